"""A rolling restart under load, as an orchestrator does it (issue 39 item 5): two instances of
every service (the api and the worker-gateway behind a TCP balancer), a Python client
submitting jobs (fx runs and three-step workflows) and reading them back, two SDK workers; every
instance of every service is stopped (SIGTERM: the drain, the exit) and started again on its
port, one at a time. Prints per instance the restart time (SIGTERM → exit, SIGTERM → /readyz
200 again) and what the client saw meanwhile (503 answers, connections lost, calls sent again,
the slowest call's added latency), then the totals: errors that reached the client, lost and
duplicated effects.

    .venv/bin/python -m bench.rolling_restart [--quick] [--rounds 1] [--every 0.1]
        [--env OSTINATO_DRAIN_SECONDS=1]

Needs PostgreSQL and Kafka (`make infra-up`). Writes bench/results/rolling_restart.json.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import asdict
from typing import Any

import asyncpg

from bench.common import (
    BASE_URL,
    KAFKA,
    ROOT,
    base_parser,
    distribution,
    log,
    machine,
    service_env,
    table,
    write_result,
)
from tests.helpers.lab.cluster import Cluster
from tests.helpers.lab.invariants import verify, wait_settled
from tests.helpers.lab.lab import FAULT_ENV
from tests.helpers.lab.load import create_tenant
from tests.helpers.lab.processes import WorkerProc
from tests.helpers.lab.rolling import (
    ClientLoad,
    Restart,
    WireCounts,
    added_latency,
    effect_problems,
    rolling_restart,
)

SCENARIO = "rolling_restart"


class PatientCluster(Cluster):
    """Waits longer for a start: on a machine other suites load, ten Python services starting
    at once take minutes (the figures then say so)."""

    def wait_ready(self, name: str, seconds: float = 600) -> None:
        super().wait_ready(name, seconds)


@asynccontextmanager
async def pair_cluster(env: dict[str, str]) -> AsyncIterator[tuple[Cluster, str, str]]:
    """Two instances of each service on a fresh database; (cluster, database url, key)."""
    from ostinato.bus import kafka as bus
    from ostinato.db.migrate import migrate

    name = f"ostinato_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = BASE_URL.rpartition("/")[0] + "/" + name
    prefix = f"b{uuid.uuid4().hex[:8]}."
    cluster = PatientCluster(database_url=url, kafka_bootstrap=KAFKA, topic_prefix=prefix,
                      log_dir=ROOT / ".cache" / "bench" / f"{SCENARIO}-{name[-8:]}",
                      extra_env={**FAULT_ENV, "OSTINATO_LOG_LEVEL": "warning", **env},
                      instances=2)
    try:
        await migrate(url)
        log(SCENARIO, f"starting two instances of each service (logs: {cluster.log_dir})")
        await asyncio.to_thread(cluster.start)
        key = await create_tenant(cluster.api_url, cluster.admin_key, "bench")
        yield cluster, url, key
    finally:
        await asyncio.to_thread(cluster.stop)
        with suppress(Exception):
            await bus.delete_topics_with_prefixes(KAFKA, [prefix])
        if os.environ.get("OSTINATO_BENCH_KEEP_DB") != "1":
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def one_round(every: float, env: dict[str, str]) -> dict[str, Any]:
    async with pair_cluster(env) as (cluster, url, key):
        workers = [WorkerProc(n, cluster.gateway_url, key, url, cluster.log_dir,
                              concurrency=16, claim_wait_seconds=2) for n in ("w1", "w2")]
        for w in workers:
            await asyncio.to_thread(lambda w=w: w.start().wait_ready(300))  # a loaded machine
        load = ClientLoad(cluster.api_url, key, every=every).start()
        seen: dict[str, WireCounts] = {}
        last = WireCounts()

        def on_restart(r: Restart) -> None:
            nonlocal last
            now = load.counts
            seen[r.alias] = WireCounts(now.requests - last.requests,
                                       now.unavailable - last.unavailable, now.lost - last.lost)
            last = WireCounts(now.requests, now.unavailable, now.lost)
            log(SCENARIO, f"{r.alias}: exit {r.stop_seconds:.2f} s, ready {r.ready_seconds:.2f} s"
                          f", client saw {seen[r.alias].unavailable} 503, "
                          f"{seen[r.alias].lost} lost")

        try:
            await asyncio.sleep(2)
            restarts = await rolling_restart(cluster, pause=1.0, on_restart=on_restart)
            await asyncio.sleep(2)
        finally:
            await load.stop()
        missing, open_ = await wait_settled(_Pool(url), list(load.accepted), within=180)
        verdict = await verify(_Pool(url), load.accepted)
        # a workflow's steps write step_effects, not effects: judged by effect_problems
        verdict.runs_without_effect = []
        effects = await effect_problems(_Pool(url), load.accepted, load.steps)
        for w in workers:
            await asyncio.to_thread(w.stop)
        extra = added_latency(load, restarts)
        return {
            "restarts": [{**asdict(r), **asdict(seen[r.alias]),
                          "added_latency_s": round(extra.get(r.alias, 0.0), 3)}
                         for r in restarts],
            "client": {"calls": len(load.latencies) + len(load.errors),
                       "errors": load.errors[:20], "error_count": len(load.errors),
                       "requests": load.counts.requests, "unavailable": load.counts.unavailable,
                       "lost": load.counts.lost, "retries": load.counts.retries,
                       "latency_s": distribution([s for _, s in load.latencies], 3)},
            "jobs": len(load.accepted), "unsettled": missing + open_,
            "problems": verdict.problems() + effects,
            "duplicate_effects": len(verdict.duplicate_effect_keys),
            "lost": len(verdict.jobs_without_run),
        }


class _Pool:
    """The `Queries` the invariant checks take, a connection per call."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def fetch(self, sql: str, *args: Any, within: float = 30) -> list[Any]:
        conn = await asyncpg.connect(self.url)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def fetchval(self, sql: str, *args: Any, within: float = 30) -> Any:
        conn = await asyncpg.connect(self.url)
        try:
            return await conn.fetchval(sql, *args)
        finally:
            await conn.close()


async def amain() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=1, help="whole rolling restarts (1)")
    parser.add_argument("--every", type=float, default=None,
                        help="seconds between two submissions (0.1; --quick 0.2)")
    args = parser.parse_args()
    env = service_env(args)
    every = args.every or (0.2 if args.quick else 0.1)
    rounds = [await one_round(every, env) for _ in range(args.rounds)]
    result = {"machine": await machine(), "env": env, "every": every, "rounds": rounds}
    path = write_result(SCENARIO, result)
    for i, r in enumerate(rounds):
        rows = [(f"{x['alias']}: exit / ready (s)",
                 f"{x['stop_seconds']:.2f} / {x['ready_seconds']:.2f}",
                 f"503 {x['unavailable']}, lost {x['lost']}, retries "
                 f"{x['unavailable'] + x['lost']}, +{x['added_latency_s']:.2f} s max")
                for x in r["restarts"]]
        c = r["client"]
        rows += [("client calls / errors", f"{c['calls']} / {c['error_count']}", "errors: 0"),
                 ("503 / lost / retries", f"{c['unavailable']} / {c['lost']} / {c['retries']}",
                  "all sent again by the client"),
                 ("call latency p50 / max (s)",
                  f"{c['latency_s']['p50']} / {c['latency_s']['max']}", ""),
                 ("jobs / lost / duplicated effects",
                  f"{r['jobs']} / {r['lost']} / {r['duplicate_effects']}", "lost 0, dup 0"),
                 ("problems", len(r["problems"]), "; ".join(r["problems"])[:120])]
        print(table(f"rolling restart {i + 1}: 2 instances of each service, under load", rows))
    print(f"(written to {path})")


if __name__ == "__main__":
    asyncio.run(amain())
