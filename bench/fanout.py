"""Chunked fan-out end to end through all five services (docs/WORKFLOWS.md, fan-out): prints the
time and chunks/s of one workflow fanning out `--chunks` no-op chunk runs with a cap of
`--cap`, against the same work submitted as plain jobs.

    .venv/bin/python -m bench.fanout [--quick] [--chunks 10000] [--cap 50] [--workers 1]
                                     [--only fanout,plain]

Needs PostgreSQL and Kafka (`infra/up.sh`). Scenarios, each on its own services and database,
with an SDK worker in this process (concurrency 256, so the cap, not the worker, bounds the
fan-out), each after a warm-up of 2,000 no-op jobs (bench.start_lag.warm_up):

- fanout: one job of the workflow `fan`, whose one step is `ctx.fan_out(noop, chunks,
  max_concurrency=cap, on_complete=noop)`: from the submission to the completion run's end
  (the database's clock), total seconds and chunks/s; the most chunk runs not final at once,
  read from the log (must be the cap); and how many chunk ends were told in the transaction of
  the report that recorded them (the worker-gateway's `ParentNotified`), the others by the
  scheduler's poll (a parent busy when the report came). `--workers N` runs N SDK workers
  (each concurrency 256): reports ending chunks of the one parent at once.
- plain: `--chunks` jobs of the same no-op task through POST /v1/jobs/batch (no cap: all due at
  once): from the first submission to the last run's end, seconds and runs/s.

`--quick`: 1,000 chunks. `--repeat N` (default 1 with `--quick`, else 3): each scenario N times,
fan-out and plain in turn, the median run (by seconds) of each reported. Writes
bench/results/fanout.json.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import asyncpg

from bench.common import (
    Bench,
    base_parser,
    bench_cluster,
    last_finished,
    log,
    machine,
    repeat_count,
    submit_jobs,
    table,
    wait_succeeded,
    write_result,
)
from bench.start_lag import WARMUP, warm_up
from ostinato import eventloop

SCENARIO = "fanout"
SCENARIOS = ("fanout", "plain")


@asynccontextmanager
async def fan_worker(bench: Bench, chunks: int, cap: int, workers: int = 1) -> AsyncIterator[Any]:
    from ostinato.sdk import Worker, WorkflowContext, task, workflow

    @task("noop")
    async def noop(payload: object) -> None:
        return None

    @workflow("fan")
    async def fan(ctx: WorkflowContext, payload: object) -> int:
        summary = await ctx.fan_out(noop, [{"i": i} for i in range(chunks)],
                                    max_concurrency=cap, on_complete=noop)
        return int(summary["succeeded"])

    started = [Worker(bench.cluster.gateway_url, bench.key, [noop, fan], concurrency=256,
                      claim_wait_seconds=1, capture_logs=False) for _ in range(workers)]
    running = [asyncio.create_task(w.run()) for w in started]
    try:
        yield started
    finally:
        for w in started:
            await w.stop()
        for r in running:
            with suppress(Exception):
                await r


def _job(task: str, i: int) -> dict[str, Any]:
    return {"name": f"{task}-{i}", "task": task, "idempotency_key": f"{task}-{i}"}


async def fanout_scenario(chunks: int, cap: int, workers: int = 1) -> dict[str, Any]:
    async with bench_cluster(SCENARIO) as bench, fan_worker(bench, chunks, cap, workers):
        await warm_up(bench, SCENARIO)
        start = time.time()
        await submit_jobs(bench, 1, lambda i: _job("fan", i), scenario=SCENARIO)
        done = await wait_succeeded(bench.url, WARMUP + chunks + 2, within=3600,
                                    scenario=SCENARIO) - WARMUP
        seconds = await last_finished(bench.url) - start
        most = await _most_at_once(bench.url)
        told = await _told_by(bench.url)
    return {"chunks": chunks, "cap": cap, "workers": workers, "succeeded_runs": done,
            "seconds": round(seconds, 2), "chunks_per_s": round(chunks / seconds, 1),
            "most_not_final_at_once": most, "ends_told_by_reports": told.get("worker-gateway", 0),
            "ends_told_by_poll": told.get("scheduler", 0)}


async def _told_by(url: str) -> dict[str, int]:
    """Chunk ends told to their parent, by who told them (the `ParentNotified`'s actor)."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT e.actor, count(*) AS n FROM events AS e JOIN runs AS r ON r.id = e.stream_id"
            " WHERE r.trigger = 'fan_out' AND e.type = 'ParentNotified' GROUP BY e.actor")
    finally:
        await conn.close()
    return {r["actor"]: r["n"] for r in rows}


async def _most_at_once(url: str) -> int:
    """The most chunk runs between their RunScheduled and their end, in log order."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT e.stream_id, e.type FROM events AS e JOIN runs AS r ON r.id = e.stream_id"
            " WHERE r.trigger = 'fan_out' AND e.type IN ('RunScheduled', 'RunSucceeded',"
            " 'RunDeadLettered', 'RunCancelled') ORDER BY e.seq")
    finally:
        await conn.close()
    live: set[Any] = set()
    most = 0
    for r in rows:
        (live.add if r["type"] == "RunScheduled" else live.discard)(r["stream_id"])
        most = max(most, len(live))
    return most


async def plain_scenario(n: int) -> dict[str, Any]:
    async with bench_cluster(SCENARIO) as bench, fan_worker(bench, 1, 1):
        await warm_up(bench, SCENARIO)
        start = time.time()
        await submit_jobs(bench, n, lambda i: _job("noop", i), batch=500, scenario=SCENARIO)
        done = await wait_succeeded(bench.url, WARMUP + n, within=3600,
                                    scenario=SCENARIO) - WARMUP
        seconds = await last_finished(bench.url) - start
    return {"jobs": n, "succeeded": done, "seconds": round(seconds, 2),
            "runs_per_s": round(n / seconds, 1)}


def _each(scenario: dict[str, Any]) -> str:
    """The median's note: every repetition's seconds, when there were several."""
    each = scenario.get("seconds_each", [])
    return f"median of {each}" if len(each) > 1 else ""


def report(result: dict[str, Any]) -> str:
    rows: list[tuple[str, Any, str]] = []
    if f := result.get("fanout"):
        rows += [(f"fan-out of {f['chunks']} chunks, cap {f['cap']}: seconds", f["seconds"],
                  _each(f)),
                 ("fan-out chunks/s", f["chunks_per_s"], ""),
                 ("most chunk runs not final at once", f["most_not_final_at_once"],
                  f"must be ≤ {f['cap']}")]
        if "ends_told_by_reports" in f:
            rows.append(("chunk ends told by their report / by the poll",
                         f"{f['ends_told_by_reports']} / {f['ends_told_by_poll']}",
                         f"{f['workers']} worker(s)"))
    if p := result.get("plain"):
        rows += [(f"{p['jobs']} plain jobs: seconds", p["seconds"], f"no cap {_each(p)}"),
                 ("plain jobs runs/s", p["runs_per_s"], "")]
    if (f := result.get("fanout")) and (p := result.get("plain")):
        rows.append(("fan-out / plain (per second)",
                     round(f["chunks_per_s"] / p["runs_per_s"], 2), "the cost of the window"))
    return table(f"fan-out ({result.get('path', '')})", rows)


async def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--cap", type=int, default=50)
    parser.add_argument("--workers", type=int, default=1,
                        help="SDK workers running the chunks (fanout scenario)")
    parser.add_argument("--only", default="",
                        help=f"comma-separated, of {','.join(SCENARIOS)} (default: all)")
    args = parser.parse_args()
    only = [x for x in args.only.split(",") if x] or list(SCENARIOS)
    if unknown := set(only) - set(SCENARIOS):
        parser.error(f"unknown scenarios: {sorted(unknown)}; choose from {','.join(SCENARIOS)}")
    if args.quick:
        args.chunks = 1000
    result: dict[str, Any] = {"scenario": SCENARIO, "machine": await machine()}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in only}
    reps = repeat_count(args)
    for rep in range(1, reps + 1):
        if "fanout" in only:
            log(SCENARIO, f"fanout: {args.chunks} chunks, cap {args.cap} ({rep}/{reps})")
            runs["fanout"].append(await fanout_scenario(args.chunks, args.cap, args.workers))
        if "plain" in only:
            log(SCENARIO, f"plain: {args.chunks} jobs ({rep}/{reps})")
            runs["plain"].append(await plain_scenario(args.chunks))
    for name, done in runs.items():
        median = sorted(done, key=lambda r: r["seconds"])[(len(done) - 1) // 2]
        result[name] = {**median, "repetitions": len(done),
                        "seconds_each": [r["seconds"] for r in done]}
    result["path"] = str(write_result(SCENARIO, result))
    print(report(result))


if __name__ == "__main__":
    from ostinato.telemetry.logging import configure_logging

    configure_logging("bench", "warning")
    eventloop.run(main())
