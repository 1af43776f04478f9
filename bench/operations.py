"""Bulk operations by query: how fast the api works through a tracked operation (POST
/v1/operations), and what it costs the API's other requests meanwhile.

    .venv/bin/python -m bench.operations [--quick] [--runs 20000] [--env OSTINATO_X=VALUE]

--runs one-off jobs due now go through POST /v1/jobs/batch; the scheduler turns them into
scheduled runs (no dispatcher or worker runs, so they stay waiting). Then: the dry run's count
(its latency), one cancel operation over all of them, polled until completed (items/s, from
created_at to finished_at, by the database's clock), and GET /v1/runs?limit=50 latencies sampled
while it runs and again afterwards (what an operation costs the API's other callers). --quick:
5,000 runs. Figures only: nothing here is asserted.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import asyncpg

from bench.common import (
    base_parser,
    bench_cluster,
    distribution,
    log,
    machine,
    service_env,
    submit_jobs,
    table,
    write_result,
)

SCENARIO = "operations"


async def _runs_created(url: str, want: int, within: float = 600) -> None:
    conn = await asyncpg.connect(url)
    try:
        deadline = time.monotonic() + within
        while (n := await conn.fetchval("SELECT count(*) FROM runs")) < want:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{n} of {want} runs created")
            await asyncio.sleep(0.5)
    finally:
        await conn.close()


async def _sample(client: Any, stop: asyncio.Event, out: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        r = await client.get("/v1/runs", params={"limit": 50})
        r.raise_for_status()
        out.append((time.perf_counter() - start) * 1000)
        await asyncio.sleep(0.05)


async def measure(runs: int, env: dict[str, str]) -> dict[str, Any]:
    async with bench_cluster(SCENARIO, env=env, services=("api", "scheduler")) as bench:
        log(SCENARIO, f"submitting {runs} jobs")
        await submit_jobs(bench, runs, lambda i: {"name": f"op-{i}", "task": "idle"},
                          scenario=SCENARIO)
        await _runs_created(bench.url, runs)
        async with bench.client() as client:
            idle: list[float] = []
            stop = asyncio.Event()
            sampler = asyncio.create_task(_sample(client, stop, idle))
            await asyncio.sleep(3)
            stop.set()
            await sampler
            body = {"kind": "cancel", "filter": {"task": "idle"}}
            start = time.perf_counter()
            r = await client.post("/v1/operations", json={**body, "dry_run": True})
            count_ms = (time.perf_counter() - start) * 1000
            assert r.json()["count"] == runs, r.text
            log(SCENARIO, f"cancelling {runs} runs as one operation")
            op = (await client.post("/v1/operations", json=body)).json()
            busy: list[float] = []
            stop = asyncio.Event()
            sampler = asyncio.create_task(_sample(client, stop, busy))
            while op["state"] == "running":
                await asyncio.sleep(0.2)
                op = (await client.get(f"/v1/operations/{op['id']}")).json()
            stop.set()
            await sampler
    seconds = (datetime.fromisoformat(op["finished_at"])
               - datetime.fromisoformat(op["created_at"])).total_seconds()
    return {"runs": runs, "done": op["done"], "seconds": round(seconds, 2),
            "items_per_second": round(op["done"] / seconds) if seconds else None,
            "dry_run_count_ms": round(count_ms, 1),
            "list_runs_ms_idle": distribution(idle), "list_runs_ms_during": distribution(busy)}


async def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--runs", type=int, default=None, help="runs to cancel (20,000)")
    args = parser.parse_args()
    runs = args.runs or (5_000 if args.quick else 20_000)
    env = service_env(args)
    figures = await measure(runs, env)
    result = {"scenario": SCENARIO, "machine": await machine(), "env": env, **figures}
    print(table(f"bulk cancel of {runs:,} runs as one operation", [
        ("items/s", figures["items_per_second"], ""),
        ("seconds", figures["seconds"], ""),
        ("dry-run count ms", figures["dry_run_count_ms"], ""),
        ("GET /v1/runs p50 ms, idle", figures["list_runs_ms_idle"].get("p50"), ""),
        ("GET /v1/runs p50 ms, during", figures["list_runs_ms_during"].get("p50"), ""),
        ("GET /v1/runs p99 ms, during", figures["list_runs_ms_during"].get("p99"), ""),
    ]))
    print(f"result: {write_result(SCENARIO, result)}")


if __name__ == "__main__":
    asyncio.run(main())
