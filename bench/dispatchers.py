"""What a second dispatcher adds (issue 39): the same burst drained with one dispatcher and
with two, and the takeover gap when one of two is killed with -9 under a steady load.

    .venv/bin/python -m bench.dispatchers [--quick] [--jobs 4000] [--rate 100]

Needs PostgreSQL and Kafka (`infra/up.sh postgres kafka`). For each count of dispatchers (1,
then 2) it starts the five services (the extra dispatcher as `dispatcher-2`) and two fault
workers (tests/faults/worker_proc.py, 64 slots each, no-op runs) on a fresh database, submits
--jobs jobs at once, and reads from the log: queued/s (RunQueued events over the span from the
first to the last), succeeded/s, the decisions each dispatcher made and its rounds' mean time
(its /metrics). Rounds are serialised by the advisory lock (docs/ARCHITECTURE.md §3), so the
second dispatcher adds no throughput; what it buys is the takeover: with two dispatchers and
--rate jobs/s arriving, the one that decided last is killed -9, and the gap is the time from
the kill to the next RunQueued (by the database clock), beside the largest gap between
consecutive RunQueued events in the seconds before the kill (what a round's cadence costs
anyway). No timed assertion anywhere: figures only (bench/results/dispatchers.json).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
import uuid
from contextlib import suppress
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench.common import BASE_URL, KAFKA, ROOT, log, machine, table, write_result
from ostinato import eventloop
from ostinato.bus.kafka import delete_topics_with_prefixes
from ostinato.db.migrate import migrate
from tests.helpers.lab.cluster import Cluster
from tests.helpers.lab.database import Db
from tests.helpers.lab.invariants import verify, wait_settled
from tests.helpers.lab.lab import Lab
from tests.helpers.lab.load import Load, fx_job, submit
from tests.helpers.lab.metrics import metric_total, scrape

SCENARIO = "dispatchers"


class Run:
    """One cluster on a fresh database, `dispatchers` dispatcher processes."""

    def __init__(self, dispatchers: int) -> None:
        self.dispatchers = dispatchers
        self.name = f"ostinato_disp_{uuid.uuid4().hex[:8]}"
        self.url = urlunsplit(urlsplit(BASE_URL)._replace(path=f"/{self.name}"))
        self.prefix = f"d{uuid.uuid4().hex[:8]}."
        cluster = Cluster(database_url=self.url, kafka_bootstrap=KAFKA,
                          topic_prefix=self.prefix,
                          log_dir=ROOT / ".cache" / "bench" / f"{SCENARIO}-{self.name[-8:]}",
                          extra_env={"OSTINATO_LOG_LEVEL": "warning",
                                     "OSTINATO_DB_POOL_SIZE": "20"})
        self.lab = Lab(cluster=cluster, db=Db(self.url))
        self.admin = Db(BASE_URL)

    @property
    def aliases(self) -> list[str]:
        return ["dispatcher"] + [f"dispatcher-{i}" for i in range(2, self.dispatchers + 1)]

    async def __aenter__(self) -> Run:
        await self.admin.execute(f'CREATE DATABASE "{self.name}"')
        try:
            await migrate(self.url)
            await self.lab.start(tenant="bench")
            for alias in self.aliases[1:]:
                await asyncio.to_thread(self.lab.cluster.spawn, alias, "dispatcher")
            for w in ("w1", "w2"):
                await self.lab.worker(w, concurrency=64)
        except BaseException:  # whatever started is stopped, the database dropped
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.lab.close()
        finally:
            with suppress(Exception):
                await delete_topics_with_prefixes(KAFKA, [self.prefix])
            await self.admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)',
                                     within=60)
            await self.admin.close()

    async def per_dispatcher(self) -> dict[str, dict[str, float]]:
        found = {}
        for alias in self.aliases:
            if self.lab.cluster.procs[alias].poll() is not None:
                continue
            samples = await scrape(self.lab.cluster.ports[alias])
            rounds = metric_total(samples, "ostinato_dispatch_round_seconds_count")
            spent = metric_total(samples, "ostinato_dispatch_round_seconds_sum")
            found[alias] = {"decisions": metric_total(samples,
                                                      "ostinato_dispatch_decisions_total"),
                            "queued": metric_total(samples, "ostinato_runs_queued_total"),
                            "round_ms_mean": round(1000 * spent / rounds, 2) if rounds else 0}
        return found


async def burst(dispatchers: int, jobs: int, drain: float) -> dict[str, Any]:
    async with Run(dispatchers) as run:
        lab = run.lab
        log(SCENARIO, f"{dispatchers} dispatcher(s): submitting {jobs} jobs")
        keys = [f"burst-{uuid.uuid4().hex[:6]}-{i:06d}" for i in range(jobs)]
        started = time.monotonic()
        ids: list[str] = []
        async with lab.client() as client:
            for lo in range(0, jobs, 500):
                ids += await submit(client, [fx_job(k) for k in keys[lo:lo + 500]])
        missing, open_runs = await wait_settled(lab.db, ids, drain)
        drained = time.monotonic() - started
        verdict = await verify(lab.db, ids)
        span = (await lab.db.fetch(
            "SELECT min(recorded_at) AS first, max(recorded_at) AS last, count(*) AS n, "
            "  count(DISTINCT stream_id) AS runs FROM events WHERE type = 'RunQueued'"))[0]
        done = (await lab.db.fetch(
            "SELECT min(recorded_at) AS first, max(recorded_at) AS last FROM events "
            "WHERE type = 'RunSucceeded'"))[0]
        queued_s = (span["last"] - span["first"]).total_seconds() or 1e-9
        done_s = (done["last"] - done["first"]).total_seconds() or 1e-9
        return {"dispatchers": dispatchers, "jobs": jobs, "drain_s": round(drained, 1),
                "queued_per_s": round(span["n"] / queued_s, 1),
                "succeeded_per_s": round(verdict.succeeded / done_s, 1),
                "run_queued_events": span["n"], "runs_queued_twice": span["n"] - span["runs"],
                "per_dispatcher": await run.per_dispatcher(),
                "unsettled": missing + open_runs, "problems": verdict.problems()}


async def takeover(rate: float, before: float, after: float, drain: float) -> dict[str, Any]:
    async with Run(2) as run:
        lab = run.lab
        load = Load(lab.cluster.api_url, lab.api_key, rate=rate, batch=10).start()
        try:
            await asyncio.sleep(before)
            # the one whose rounds were most recent: metrics are per process
            shares = await run.per_dispatcher()
            victim = max(shares, key=lambda a: shares[a]["decisions"])
            killed_at: datetime = await lab.db.now()
            lab.cluster.kill(victim)
            log(SCENARIO, f"killed {victim} (-9) under {rate:g} jobs/s")
            await asyncio.sleep(after)
        finally:
            await load.stop()
        missing, open_runs = await wait_settled(lab.db, load.job_ids, drain)
        verdict = await verify(lab.db, load.job_ids)
        times = [r["recorded_at"] for r in await lab.db.fetch(
            "SELECT DISTINCT recorded_at FROM events WHERE type = 'RunQueued' "
            "AND recorded_at > $1::timestamptz - make_interval(secs => $2::float8) ORDER BY 1",
            killed_at, before - 2)]
        earlier = [t for t in times if t <= killed_at]
        later = [t for t in times if t > killed_at]
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(earlier)]
        gap = (later[0] - killed_at).total_seconds() if later else None
        return {"rate": rate, "killed": victim,
                "decisions_before_kill": {a: s["decisions"] for a, s in shares.items()},
                "takeover_gap_s": None if gap is None else round(gap, 3),
                "largest_gap_before_kill_s": round(max(gaps), 3) if gaps else None,
                "jobs": len(load.job_ids), "abandoned": len(load.abandoned),
                "lost": len(set(verdict.jobs_without_run) | set(verdict.jobs_not_succeeded)),
                "duplicated": len(verdict.duplicate_effect_keys)
                + len(verdict.duplicate_effect_runs),
                "unsettled": missing + open_runs, "problems": verdict.problems()}


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    one = await burst(1, args.jobs, args.drain)
    two = await burst(2, args.jobs, args.drain)
    gap = await takeover(args.rate, args.before, args.after, args.drain)
    return {"scenario": SCENARIO, "quick": args.quick, "burst": [one, two], "takeover": gap,
            "machine": await machine(BASE_URL)}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true", help="1,500 jobs, shorter phases")
    parser.add_argument("--jobs", type=int, default=None, help="burst size (4000; quick 1500)")
    parser.add_argument("--rate", type=float, default=100.0, help="jobs/s around the kill")
    parser.add_argument("--before", type=float, default=None, help="s of load before the kill")
    parser.add_argument("--after", type=float, default=None, help="s of load after the kill")
    parser.add_argument("--drain", type=float, default=180.0)
    args = parser.parse_args()
    args.jobs = args.jobs or (1500 if args.quick else 4000)
    args.before = args.before or (6.0 if args.quick else 15.0)
    args.after = args.after or (4.0 if args.quick else 10.0)
    result = eventloop.run(amain(args))
    one, two = result["burst"]
    gap = result["takeover"]
    rows = [(f"{b['dispatchers']} dispatcher(s): queued / succeeded per s",
             f"{b['queued_per_s']} / {b['succeeded_per_s']}",
             f"{b['jobs']} jobs, drained in {b['drain_s']} s; decisions " + ", ".join(
                 f"{a} {int(s['decisions'])} (round {s['round_ms_mean']} ms)"
                 for a, s in b["per_dispatcher"].items())) for b in (one, two)]
    rows += [("takeover: kill -9 -> next RunQueued (s)", gap["takeover_gap_s"],
              f"{gap['killed']} killed at {gap['rate']:g} jobs/s; largest gap before it: "
              f"{gap['largest_gap_before_kill_s']} s"),
             ("lost / duplicated (burst 1, burst 2, takeover)",
              f"{one['unsettled']}+{one['runs_queued_twice']}, "
              f"{two['unsettled']}+{two['runs_queued_twice']}, "
              f"{gap['lost']} / {gap['duplicated']}", "must be 0")]
    print(table("dispatchers: one vs two, and a takeover", rows))
    write_result(SCENARIO, result)


if __name__ == "__main__":
    main()
