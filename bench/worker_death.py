"""A dead worker's runs resumed elsewhere: kill -9 → RunStarted on another worker, p50/max.

    .venv/bin/python -m bench.worker_death [--quick] [--kills 10] [--runs 4] [--env K=V]

Needs PostgreSQL and Kafka. Starts the five services at their default settings (a 30 s
attempt lease, OSTINATO_WORKER_DEAD_AFTER_SECONDS 3) on a fresh database. Each round starts a
victim worker (tests/faults/worker_proc.py, SDK defaults: a ping a second while it holds runs),
submits `--runs` jobs whose first attempt sleeps 60 s, waits until the victim holds them all,
starts the worker `b` that will take them over, reads the database clock, kills the victim
with -9 and waits for each run's RunStarted by `b`: the figure is that event's `recorded_at`
minus the kill, per run (both the database's clock); then `b` finishes them and stops. Also
printed: the cause recorded on each LeaseExpired, and the time the victim's leases still had
to run (what the old lease-only detection would have waited). Writes
bench/results/worker_death.json.

The target (DESIGN.md): a dead worker's runs resumed within 5 s.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import asyncpg

from bench.common import (
    Bench,
    base_parser,
    bench_cluster,
    distribution,
    log,
    machine,
    service_env,
    table,
    write_result,
)
from tests.helpers.lab.load import fx_job, submit
from tests.helpers.lab.processes import WorkerProc

SCENARIO = "worker_death"


async def _until(check: Any, within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{what} not within {within:g} s")


async def one_kill(bench: Bench, db: asyncpg.Connection, round_no: int, runs: int
                   ) -> dict[str, Any]:
    victim = WorkerProc(f"victim{round_no}", bench.cluster.gateway_url, bench.key, bench.url,
                        bench.cluster.log_dir, concurrency=runs, claim_wait_seconds=1)
    b = WorkerProc("b", bench.cluster.gateway_url, bench.key, bench.url, bench.cluster.log_dir,
                   concurrency=64, claim_wait_seconds=10)
    try:
        return await _round(bench, db, round_no, runs, victim, b)
    finally:  # whatever happened, no worker outlives its round
        victim.kill()
        await asyncio.to_thread(b.stop)


async def _round(bench: Bench, db: asyncpg.Connection, round_no: int, runs: int,
                 victim: WorkerProc, b: WorkerProc) -> dict[str, Any]:
    await asyncio.to_thread(lambda: victim.start().wait_ready())
    async with bench.client() as client:
        job_ids = await submit(client, [fx_job(f"r{round_no}-{i}", sleep=60, slow_attempts=1)
                                        for i in range(runs)])
    ids = [uuid.UUID(j) for j in job_ids]

    async def held() -> list[uuid.UUID] | None:
        rows = await db.fetch("SELECT id FROM runs WHERE job_id = ANY($1::uuid[]) "
                              "AND state = 'running' AND worker_id = $2", ids, victim.name)
        return [r["id"] for r in rows] if len(rows) == runs else None

    run_ids = await _until(held, 60, f"round {round_no}: the victim to hold its runs")
    await asyncio.to_thread(lambda: b.start().wait_ready())
    killed_at = await db.fetchval("SELECT clock_timestamp()")
    leases_left = await db.fetchval(
        "SELECT min(expires_at) FROM attempt_leases WHERE run_id = ANY($1::uuid[])", run_ids)
    victim.kill()

    async def resumed() -> list[Any] | None:
        rows = await db.fetch(
            "SELECT stream_id, min(recorded_at) AS at FROM events WHERE type = 'RunStarted' "
            "AND stream_id = ANY($1::uuid[]) AND actor = 'worker:b' GROUP BY stream_id",
            run_ids)
        return list(rows) if len(rows) == runs else None

    rows = await _until(resumed, 120, f"round {round_no}: b to start every run again")

    async def finished() -> bool:
        return await db.fetchval("SELECT count(*) FROM runs WHERE id = ANY($1::uuid[]) "
                                 "AND state = 'succeeded'", run_ids) == runs

    await _until(finished, 60, f"round {round_no}: b to finish the runs")
    causes = await db.fetch(
        "SELECT data->>'cause' AS cause FROM events WHERE type = 'LeaseExpired' "
        "AND stream_id = ANY($1::uuid[])", run_ids)
    seconds = [(r["at"] - killed_at).total_seconds() for r in rows]
    log(SCENARIO, f"round {round_no}: resumed after {min(seconds):.2f}-{max(seconds):.2f} s")
    return {"seconds": seconds, "causes": [c["cause"] for c in causes],
            "lease_left_s": (leases_left - killed_at).total_seconds()}


async def amain() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--kills", type=int, default=None, help="kill -9 rounds (10; quick 3)")
    parser.add_argument("--runs", type=int, default=4, help="runs the victim holds per round")
    args = parser.parse_args()
    kills = args.kills or (3 if args.quick else 10)
    env = service_env(args)
    async with bench_cluster(SCENARIO, env=env) as bench:
        db = await asyncpg.connect(bench.url)
        try:
            rounds = [await one_kill(bench, db, i, args.runs) for i in range(kills)]
        finally:
            await db.close()
    seconds = sorted(s for r in rounds for s in r["seconds"])
    spread = distribution(seconds, 2)
    causes = Counter(c for r in rounds for c in r["causes"])
    lease_left = distribution(sorted(r["lease_left_s"] for r in rounds), 1)
    result = {"machine": await machine(), "env": env, "kills": kills, "runs_per_kill": args.runs,
              "resumed_seconds": spread, "causes": dict(causes),
              "lease_left_at_kill_seconds": lease_left, "rounds": rounds}
    path = write_result(SCENARIO, result)
    print(table(f"kill -9 → resumed on another worker ({kills} kills × {args.runs} runs)", [
        ("p50 (s)", spread.get("p50"), "target <= 5"),
        ("max (s)", spread.get("max"), "target <= 5"),
        ("lease left at kill, p50 (s)", lease_left.get("p50"), "what expiry alone would wait"),
        ("causes", ", ".join(f"{k} {v}" for k, v in sorted(causes.items())), ""),
    ]))
    print(f"(written to {path})")


if __name__ == "__main__":
    asyncio.run(amain())
