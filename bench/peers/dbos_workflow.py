"""DBOS Transact as the durable-workflow peer of bench/workflows.py: the same workflow (10
no-op steps, each returning an int, as `wf10` there), N of them started at once, on the same
PostgreSQL server, in its own database (created and dropped by `run`).

DBOS is a library, not a service: the workflows run in the process that starts them, and each
step's outcome is written to DBOS's system database (`dbos.operation_outputs`, with a check of
the workflow's status and owner before it) before the next one runs. One process (a DBOS
instance is global to its process) on uvloop, as Ostinato's processes, DBOS's defaults
otherwise (a system database pool of 20 connections, `pool_pre_ping`, an unbounded executor for
its synchronous SQLAlchemy calls). All N are started at once (`asyncio.gather` over
`DBOS.start_workflow_async`), at most `--max-inflight` (default 64) running at a time: with all
2,000 in flight DBOS's threads waited longer than its pool's 30 s timeout for a connection and
retried; of 16, 64 and 256 in flight (600 workflows each, one session) 64 did best (9.2, 9.8,
7.3 workflows/s), so DBOS runs with its best of those, not with the Ostinato worker's 256.
The clock runs from just before the first start to the last workflow's `updated_at` (its
SUCCESS status, written with the database's `now()`); the process's CPU seconds over the same
window are reported too, and with PostgreSQL's (all its processes, /proc stat) CPU a workflow.

    python -m bench.peers.dbos_workflow <database url> <workflows> [--steps 10]
        [--max-inflight 64]

prints one JSON object on its last line of stdout.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
import uuid
from typing import Any

import asyncpg

from bench.common import BASE_URL, ROOT, cpu_by_process_group, log
from bench.peers.harness import run_measured

APP = "ostinato-bench"


def dbos_version() -> str | None:
    """The installed DBOS Transact version (None when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dbos")
    except PackageNotFoundError:
        return None


async def _measure(url: str, n: int, steps: int, max_inflight: int) -> dict[str, Any]:
    from dbos import DBOS, DBOSConfig

    @DBOS.step()
    async def noop(i: int) -> int:
        return i

    @DBOS.workflow()
    async def wf10() -> int:
        for i in range(steps):
            await noop(i)
        return steps

    config: DBOSConfig = {"name": APP, "system_database_url": url, "log_level": "WARNING",
                          "enable_otlp": False}
    DBOS(config=config)
    DBOS.launch()
    try:
        # Warm-up: imports, the pool's connections, SQLAlchemy's statement cache.
        await asyncio.gather(*[(await DBOS.start_workflow_async(wf10)).get_result()
                               for _ in range(20)])
        gate = asyncio.Semaphore(max_inflight)
        ids: list[str] = []

        async def one() -> int:
            async with gate:
                handle = await DBOS.start_workflow_async(wf10)
                ids.append(handle.get_workflow_id())
                return await handle.get_result()

        usage = resource.getrusage(resource.RUSAGE_SELF)
        pg_before = cpu_by_process_group({}).get("postgresql", 0.0)
        start = time.time()
        results = await asyncio.gather(*(one() for _ in range(n)))
        returned = time.time()
        pg_cpu = cpu_by_process_group({}).get("postgresql", 0.0) - pg_before
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (used.ru_utime - usage.ru_utime) + (used.ru_stime - usage.ru_stime)
    finally:
        DBOS.destroy()
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE status = 'SUCCESS') AS ok, "
            "       max(updated_at) / 1000.0 AS last_finished FROM dbos.workflow_status "
            "WHERE workflow_uuid = ANY($1::text[])", ids)
        recorded = await conn.fetchval(
            "SELECT count(*) FROM dbos.operation_outputs WHERE workflow_uuid = ANY($1::text[])",
            ids)
    finally:
        await conn.close()
    seconds = float(row["last_finished"]) - start
    return {"workflows": n, "steps": steps, "succeeded": int(row["ok"]),
            "returned_ok": sum(1 for r in results if r == steps),
            "recorded_steps": int(recorded), "max_inflight": max_inflight,
            "seconds": round(seconds, 2), "seconds_to_last_result": round(returned - start, 2),
            "process_cpu_s": round(cpu, 2), "cpu_ms_per_step": round(1000 * cpu / (n * steps), 3),
            "postgres_cpu_s": round(pg_cpu, 2),
            "cpu_ms_per_workflow": round(1000 * (cpu + pg_cpu) / n, 2),
            "workflows_per_s": round(n / seconds, 1),
            "steps_per_s": round(n * steps / seconds, 1), "dbos": dbos_version()}


MAX_INFLIGHT = 64


async def run(n: int, *, steps: int = 10, max_inflight: int = MAX_INFLIGHT,
              scenario: str = "workflows", within: float = 900) -> dict[str, Any]:
    """On a fresh database of the bench's PostgreSQL server, run the DBOS measurement in its
    own process; drop the database afterwards (also on errors). Returns its figures."""
    name = f"bench_dbos_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = BASE_URL.rpartition("/")[0] + "/" + name
    logs = ROOT / ".cache" / "bench" / f"dbos-{name[-8:]}.log"
    cmd = [sys.executable, "-m", "bench.peers.dbos_workflow", url, str(n), "--steps", str(steps),
           "--max-inflight", str(max_inflight)]
    try:
        log(scenario, f"dbos: {n} workflows of {steps} steps (log: {logs})")
        return await run_measured("dbos", cmd, logs, within)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def main() -> None:
    """The subprocess: measure, print the figures as JSON."""
    from ostinato import eventloop

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("workflows", type=int)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--max-inflight", type=int, default=MAX_INFLIGHT,
                        help="workflows running at once (0: all)")
    args = parser.parse_args()
    result = eventloop.run(_measure(args.url, args.workflows, args.steps,
                                    args.max_inflight or args.workflows))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
