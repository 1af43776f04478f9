"""PostgreSQL primary killed with -9 under load, on the HA profile's topology: a pg_auto_failover
monitor, a primary and a synchronous standby (infra/postgres/ha-up.sh on ports and a data folder
of its own, stopped after), the five services and two fault workers on the multi-host URL
(target_session_attrs=read-write), submissions at --rate jobs/s with idempotency keys.

    .venv/bin/python -m bench.pg_failover [--rate 60] [--batch 6] [--before 10] [--after 15]

Printed: seconds from the kill to the monitor promoting the standby, to the first write that
succeeds (a probe inserting every 20 ms through the same multi-host URL, on its own pool), and
to the first job the api writes (its JobCreated event's transaction, by the database clock);
what clients saw (failed requests by kind, submissions whose answer the kill cut and that the
idempotency key resolved to the job already created); lost and duplicated (the fault suite's
end check). The failover timing is the HA profile's: unhealthy after 5 s without a health
check or keeper report, 5 s for the old primary to stand down (OSTINATO_PG_HA_UNHEALTHY_MS,
OSTINATO_PG_HA_DEMOTE_MS).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import KAFKA, log, machine, table, write_result
from ostinato import eventloop
from ostinato.db.migrate import migrate
from ostinato.db.pool import create_pool
from tests.helpers.env import new_topic_prefix
from tests.helpers.lab.cluster import Cluster
from tests.helpers.lab.database import Db
from tests.helpers.lab.invariants import verify, wait_settled
from tests.helpers.lab.lab import FAULT_ENV, Lab
from tests.helpers.lab.load import Load
from tests.helpers.lab.pg_ha import PRIMARY_STATES, HaPostgres

SCENARIO = "pg_failover"


class Probe:
    """An INSERT every `every` seconds on a pool of its own; `first_success_after(t)` is when
    the first one begun after monotonic `t` succeeded."""

    def __init__(self, url: str, every: float = 0.02) -> None:
        self.url = url
        self.every = every
        self.successes: list[tuple[float, float]] = []  # (begun, done), monotonic
        self.failures = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        pool = await create_pool(self.url, min_size=1, max_size=1, statement_timeout_ms=5000)
        await pool.execute("CREATE TABLE IF NOT EXISTS bench_probe (at timestamptz NOT NULL)")
        try:
            while not self._stop.is_set():
                begun = time.monotonic()
                try:
                    await asyncio.wait_for(pool.execute(
                        "INSERT INTO bench_probe VALUES (clock_timestamp())"), 5)
                    self.successes.append((begun, time.monotonic()))
                except Exception:  # every failure is the outage being measured
                    self.failures += 1
                await asyncio.sleep(self.every)
        finally:
            pool.terminate()

    def stop(self) -> None:
        self._stop.set()

    def first_success_after(self, t: float) -> float | None:
        return next((done for begun, done in self.successes if begun >= t), None)


async def scenario(args: argparse.Namespace, ha: HaPostgres, logs: Path) -> dict[str, Any]:
    await migrate(ha.url("ostinato_owner"))
    cluster = Cluster(database_url=ha.url("ostinato_app"), kafka_bootstrap=KAFKA,
                      topic_prefix=new_topic_prefix(), log_dir=logs, extra_env=dict(FAULT_ENV))
    lab = Lab(cluster=cluster, db=Db(ha.url("ostinato")), effects_url=ha.url("ostinato_owner"))
    try:
        await lab.start()
        for name in ("w1", "w2"):
            await lab.worker(name, concurrency=16)
        nodes = await ha.nodes()
        [primary] = [n for n in nodes.values() if n.reported == "primary"]
        [standby] = [n for n in nodes.values() if n.reported == "secondary"]
        probe = Probe(ha.url("ostinato_owner"))
        probe_task = asyncio.create_task(probe.run())
        load = Load(cluster.api_url, lab.api_key, rate=args.rate, batch=args.batch).start()
        try:
            log(SCENARIO, f"{args.rate:g} jobs/s for {args.before:g}s, then kill -9 "
                          f"{primary.name} (127.0.0.1:{primary.port})")
            await asyncio.sleep(args.before)
            await asyncio.to_thread(ha.kill, primary.name)
            # from here every process of the node is gone; the servers share this host's clock,
            # so the wall time compares with the events' recorded_at
            killed_at, kill_wall = time.monotonic(), datetime.now(UTC)
            promoted_at = None
            while promoted_at is None:
                if (await ha.nodes())[standby.name].reported in PRIMARY_STATES:
                    promoted_at = time.monotonic()
                await asyncio.sleep(0.1)
            log(SCENARIO, f"{standby.name} promoted after {promoted_at - killed_at:.1f}s; "
                          f"load for {args.after:g}s more")
            await asyncio.sleep(args.after)
        finally:
            await load.stop()
            probe.stop()
            await probe_task
        first_write = probe.first_success_after(killed_at)
        # the first job the api wrote after the kill: its transaction began (recorded_at,
        # now()) on the promoted primary; one begun before the kill committed before it or never
        first_job = await lab.db.fetchval(
            "SELECT min(recorded_at) FROM events WHERE type = 'JobCreated' AND recorded_at > $1",
            kill_wall)
        missing, open_runs = await wait_settled(lab.db, load.job_ids, args.drain)
        verdict = await verify(lab.db, load.job_ids)
        stored = {r["idempotency_key"]: str(r["id"]) for r in await lab.db.fetch(
            "SELECT idempotency_key, id FROM jobs WHERE idempotency_key LIKE $1",
            f"{load.prefix}%")}
        lost = len(set(load.accepted.items()) - set(stored.items()))
        unacknowledged = len(set(stored) - set(load.accepted))
        return {
            "killed": primary.name, "promoted": standby.name,
            "seconds_to_promotion": round(promoted_at - killed_at, 2),
            "seconds_to_first_write": None if first_write is None
            else round(first_write - killed_at, 2),
            "seconds_to_first_job_written": None if first_job is None
            else round((first_job - kill_wall).total_seconds(), 2),
            "jobs_acknowledged": len(load.accepted),
            "failed_requests": load.failed_requests,
            "failed_requests_by_kind": dict(load.errors),
            "in_doubt_resolved_by_key": len(load.resolved_in_doubt),
            "abandoned": len(load.abandoned),
            "probe_failures": probe.failures,
            "lost_jobs": lost, "unacknowledged_jobs": unacknowledged,
            "runs_missing": missing, "runs_open": open_runs,
            "runs": verdict.runs, "succeeded": verdict.succeeded, "effects": verdict.effects,
            "duplicated_effects": len(verdict.duplicate_effect_keys)
            + len(verdict.duplicate_effect_runs),
            "duplicate_claims": verdict.duplicate_claims,
            "problems": verdict.problems(),
        }
    finally:
        await lab.close()


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    base = Path(f"/tmp/ostinato-bench-pg-ha-{uuid.uuid4().hex[:8]}")
    ha = HaPostgres.on_free_ports(base)
    log(SCENARIO, f"starting the HA PostgreSQL (monitor {ha.monitor_port}, nodes {ha.ports})")
    await asyncio.to_thread(ha.up)
    try:
        about = await machine(ha.url("ostinato"))
        figures = await scenario(args, ha, base.with_name(base.name + "-logs"))
    finally:
        await asyncio.to_thread(ha.down)
    return {"scenario": SCENARIO, "machine": about,
            "settings": {"rate": args.rate, "batch": args.batch, "before": args.before,
                         "after": args.after,
                         "unhealthy_ms": int(os.environ.get("OSTINATO_PG_HA_UNHEALTHY_MS",
                                                            "5000")),
                         "demote_ms": int(os.environ.get("OSTINATO_PG_HA_DEMOTE_MS", "5000"))},
            **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=60, help="jobs per second submitted")
    parser.add_argument("--batch", type=int, default=6, help="jobs per submission request")
    parser.add_argument("--before", type=float, default=10, help="seconds of load before the kill")
    parser.add_argument("--after", type=float, default=15,
                        help="seconds of load after the promotion")
    parser.add_argument("--drain", type=float, default=180, help="max seconds for runs to end")
    args = parser.parse_args()
    result = eventloop.run(amain(args))
    path = write_result(SCENARIO, result)
    print(table("PostgreSQL primary killed (kill -9) under load: pg_auto_failover", [
        ("kill -> standby promoted (s)", result["seconds_to_promotion"], "monitor's view"),
        ("kill -> first write (s)", result["seconds_to_first_write"], "probe, 20 ms"),
        ("kill -> first job written (s)", result["seconds_to_first_job_written"],
         "api, database clock"),
        ("jobs acknowledged", result["jobs_acknowledged"], ""),
        ("failed requests (retried)", result["failed_requests"],
         str(result["failed_requests_by_kind"])),
        ("in doubt, resolved by key", result["in_doubt_resolved_by_key"], "same job id"),
        ("abandoned submissions", result["abandoned"], "0"),
        ("lost jobs", result["lost_jobs"], "0"),
        ("jobs nobody was told of", result["unacknowledged_jobs"], "0"),
        ("runs / succeeded / effects", f"{result['runs']}/{result['succeeded']}/"
         f"{result['effects']}", "all equal"),
        ("duplicated effects", result["duplicated_effects"], "0"),
    ]))
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
