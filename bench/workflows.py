"""Durable workflows end to end through all five services (docs/WORKFLOWS.md): prints steps/s
and workflows/s of 10-step no-op workflows, the resume latency of sleeping workflows (a timer's
due time to its run's next start), the wake poll's cost with many runs asleep against none, and
the SDK worker's memory while one long workflow runs.

    .venv/bin/python -m bench.workflows [--quick] [--workflows 2000] [--sleepers 500]
        [--asleep 100000] [--long-steps 100000]

Needs PostgreSQL and Kafka (`infra/up.sh`). Scenarios, each on its own services and database:

- steps: `--workflows` (quick 300) workflows of 10 no-op steps, submitted through
  POST /v1/jobs/batch, run by an SDK worker in this process (concurrency 256): workflows/s and
  steps/s from the first submission to the last run finished (the database's clock).
- resume: `--sleepers` (quick 100) workflows that sleep 2 s, then take one step: for each, the
  database time from the timer's due time (`TimerFired.due_at`) to the start of the run's next
  attempt (`RunStarted`), p50/p99/max.
- idle poll: the scheduler's wake query (`claim_wakeups`, as it runs it) 500 times with no run
  asleep, then with `--asleep` (quick 20,000) suspended runs due next month written straight
  into `runs`: per-poll ms and the ratio (the partial index `runs_wake` should make it ≈ 1).
- long: one workflow of `--long-steps` (quick 20,000) steps, run twice (the second execution
  after the first fails at the last step, so it replays the whole history from pages): steps/s,
  and this process's RSS sampled every 0.5 s (first, peak, last): it must stay flat, as the
  history is read one page at a time.

Not measured yet: DBOS Transact on the same PostgreSQL (not in the benchmark lock). Writes
bench/results/workflows.json.
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import time
from contextlib import asynccontextmanager, suppress
from typing import Any

import asyncpg

from bench.common import (
    Bench,
    base_parser,
    bench_cluster,
    distribution,
    last_finished,
    log,
    machine,
    submit_jobs,
    table,
    wait_succeeded,
    write_result,
)
from ostinato import eventloop

SCENARIO = "workflows"
STEPS = 10


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


@asynccontextmanager
async def workflow_worker(bench: Bench, long_steps: int = 0, concurrency: int = 256) -> Any:
    """An SDK worker in this process serving the benchmark's workflows."""
    from ostinato.sdk import RetryableError, Worker, WorkflowContext, workflow

    async def noop(i: int) -> int:
        return i

    @workflow("wf10")
    async def wf10(ctx: WorkflowContext, payload: object) -> int:
        for i in range(STEPS):
            await ctx.step("noop", noop, i)
        return STEPS

    @workflow("sleeper")
    async def sleeper(ctx: WorkflowContext, payload: object) -> None:
        await ctx.sleep(2.0)
        await ctx.step("after", noop, 0)

    failed_once: list[bool] = []

    async def last(i: int) -> int:
        if not failed_once:
            failed_once.append(True)
            raise RetryableError("fail once at the end, to replay the whole history")
        return i

    @workflow("long")
    async def long(ctx: WorkflowContext, payload: object) -> int:
        for i in range(long_steps - 1):
            await ctx.step("noop", noop, i)
        return await ctx.step("last", last, long_steps)

    worker = Worker(bench.cluster.gateway_url, bench.key, [wf10, sleeper, long],
                    concurrency=concurrency, claim_wait_seconds=1, capture_logs=False)
    running = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        await worker.stop()
        with suppress(Exception):
            await running


def _job(task: str, i: int) -> dict[str, Any]:
    return {"name": f"{task}-{i}", "task": task, "idempotency_key": f"{task}-{i}",
            "retry": {"max_attempts": 5, "initial_delay": "0s", "max_delay": "0s"}}


async def steps_scenario(n: int) -> dict[str, Any]:
    async with bench_cluster(SCENARIO) as bench, workflow_worker(bench):
        start = time.time()
        await submit_jobs(bench, n, lambda i: _job("wf10", i), batch=500, scenario=SCENARIO)
        done = await wait_succeeded(bench.url, n, within=600, scenario=SCENARIO)
        seconds = await last_finished(bench.url) - start
    return {"workflows": n, "succeeded": done, "seconds": round(seconds, 2),
            "workflows_per_s": round(n / seconds, 1),
            "steps_per_s": round(n * STEPS / seconds, 1)}


async def resume_scenario(n: int) -> dict[str, Any]:
    async with bench_cluster(SCENARIO) as bench, workflow_worker(bench):
        await submit_jobs(bench, n, lambda i: _job("sleeper", i), batch=500, scenario=SCENARIO)
        done = await wait_succeeded(bench.url, n, within=300, scenario=SCENARIO)
        conn = await asyncpg.connect(bench.url)
        try:
            rows = await conn.fetch("""
                SELECT extract(epoch FROM (s.recorded_at
                       - (t.data->>'due_at')::timestamptz)) * 1000 AS ms
                FROM events t
                JOIN LATERAL (SELECT recorded_at FROM events s
                              WHERE s.stream_id = t.stream_id AND s.type = 'RunStarted'
                                AND s.version > t.version ORDER BY s.version LIMIT 1) s ON true
                WHERE t.type = 'TimerFired'""")
        finally:
            await conn.close()
    lags = sorted(float(r["ms"]) for r in rows)
    return {"workflows": n, "succeeded": done, "resume_ms": distribution(lags)}


async def idle_poll_scenario(asleep: int) -> dict[str, Any]:
    from ostinato.stores import runs

    async with bench_cluster(SCENARIO, services=("api",)) as bench:
        conn = await asyncpg.connect(bench.url)
        try:
            async def poll_ms() -> float:
                times = []
                for _ in range(500):
                    t0 = time.perf_counter()
                    async with conn.transaction():
                        await conn.fetch(runs.Q["claim_wakeups"], None, 500)
                    times.append((time.perf_counter() - t0) * 1000)
                return statistics.median(times)

            empty = await poll_ms()
            await conn.execute("""
                INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref,
                                  scheduled_for, state, attempt, fencing_token, updated_at,
                                  version, wait_reason, wait_seq, wait_name, wake_at)
                SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'sleeper',
                       'default', 'default', gen_random_uuid(), now(), 'suspended', 1, 1, now(),
                       4, 'timer', 0, 'sleep', now() + interval '30 days' + i * interval '1 s'
                FROM generate_series(1, $1) AS i""", asleep)
            await conn.execute("VACUUM ANALYZE runs")
            full = await poll_ms()
        finally:
            await conn.close()
    return {"asleep": asleep, "poll_ms_none": round(empty, 3), "poll_ms_asleep": round(full, 3),
            "ratio": round(full / empty, 2) if empty else None}


async def long_scenario(steps: int) -> dict[str, Any]:
    samples: list[float] = []

    async def sample() -> None:
        while True:
            samples.append(_rss_mib())
            await asyncio.sleep(0.5)

    async with bench_cluster(SCENARIO) as bench, workflow_worker(bench, long_steps=steps):
        sampler = asyncio.create_task(sample())
        start = time.time()
        await submit_jobs(bench, 1, lambda i: _job("long", i), scenario=SCENARIO)
        done = await wait_succeeded(bench.url, 1, within=3600, scenario=SCENARIO)
        seconds = await last_finished(bench.url) - start
        sampler.cancel()
    executed = 2 * steps  # the first execution, then the replay of all of it
    return {"steps": steps, "succeeded": done, "seconds": round(seconds, 1),
            "steps_per_s_incl_replay": round(executed / seconds, 1),
            "rss_mib": {"first": round(samples[0], 1), "peak": round(max(samples), 1),
                        "last": round(samples[-1], 1), "samples": len(samples)}}


async def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--workflows", type=int, default=2000)
    parser.add_argument("--sleepers", type=int, default=500)
    parser.add_argument("--asleep", type=int, default=100_000)
    parser.add_argument("--long-steps", type=int, default=100_000)
    args = parser.parse_args()
    if args.quick:
        args.workflows, args.sleepers, args.asleep, args.long_steps = 300, 100, 20_000, 20_000
    result: dict[str, Any] = {"scenario": SCENARIO, "machine": await machine()}
    log(SCENARIO, f"steps: {args.workflows} workflows of {STEPS} steps")
    result["steps"] = await steps_scenario(args.workflows)
    log(SCENARIO, f"resume: {args.sleepers} sleeping workflows")
    result["resume"] = await resume_scenario(args.sleepers)
    log(SCENARIO, f"idle poll: {args.asleep} runs asleep")
    result["idle_poll"] = await idle_poll_scenario(args.asleep)
    log(SCENARIO, f"long: one workflow of {args.long_steps} steps")
    result["long"] = await long_scenario(args.long_steps)
    result["peers"] = {"dbos": "not run: DBOS Transact is not in the benchmark lock yet"}
    path = write_result(SCENARIO, result)
    s, r, i, lg = result["steps"], result["resume"], result["idle_poll"], result["long"]
    print(table(f"workflows ({path})", [
        ("workflows/s (10 no-op steps each)", s["workflows_per_s"], "end to end"),
        ("steps/s", s["steps_per_s"], "end to end"),
        ("resume latency p50 (ms)", r["resume_ms"].get("p50"), "timer due -> next start"),
        ("resume latency p99 (ms)", r["resume_ms"].get("p99"), ""),
        ("wake poll ms, none asleep", i["poll_ms_none"], "median of 500"),
        (f"wake poll ms, {i['asleep']} asleep", i["poll_ms_asleep"], f"ratio {i['ratio']}"),
        (f"long workflow, {lg['steps']} steps: steps/s", lg["steps_per_s_incl_replay"],
         "incl. one full replay"),
        ("SDK worker RSS MiB first / peak / last",
         f"{lg['rss_mib']['first']} / {lg['rss_mib']['peak']} / {lg['rss_mib']['last']}",
         "must stay flat"),
    ]))


if __name__ == "__main__":
    eventloop.run(main())
