"""Start lag under a steady stream: jobs due at --rate per second for --seconds, each a one-off
`at` job; p50/p95/p99/max of (started_at - due_at), split into the scheduler's share
(scheduled_at - due_at) and the rest (queue, dispatch, claim).

    .venv/bin/python -m bench.start_lag [--quick] [--rate 1000] [--seconds 60] [--repeat 3]

The jobs are submitted through POST /v1/jobs/batch *before* the first one falls due (their due
instants are T0 + i/rate), so the API's work does not overlap the measured window: the figure
is the path scheduler -> dispatcher -> gateway -> SDK worker. Each repetition starts a fresh
cluster on a fresh database, warms up with 2,000 immediate no-op jobs, then measures.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.common import (
    Profiler,
    base_parser,
    bench_cluster,
    lag_figures,
    log,
    machine,
    median_of,
    repeat_count,
    sdk_worker,
    service_env,
    submit_jobs,
    table,
    wait_succeeded,
    write_result,
)
from ostinato import eventloop

SCENARIO = "start_lag"
TARGET_P99_MS = 250
WARMUP = 2000
PROFILED = ("scheduler", "dispatcher", "worker_gateway")


async def warm_up(bench: Any, scenario: str) -> None:
    """Immediate no-op jobs through the whole path, until all ran (connections, caches)."""
    await submit_jobs(bench, WARMUP, lambda i: {"name": f"warm-{i}", "task": "noop"},
                      scenario=scenario)
    await wait_succeeded(bench.url, WARMUP, within=120, scenario=scenario)


async def once(args: Any, rep: int) -> dict[str, Any]:
    total = int(args.rate * args.seconds)
    env = service_env(args)
    async with bench_cluster(SCENARIO, env=env) as bench, sdk_worker(bench, args.concurrency):
        await warm_up(bench, SCENARIO)
        lead = 8 + total / 2500  # the submission must end before the first job falls due
        t0 = (datetime.now(UTC) + timedelta(seconds=lead)).replace(microsecond=0)

        def job(i: int) -> dict[str, Any]:
            due = t0 + timedelta(seconds=i / args.rate)
            return {"name": f"lag-{i}", "task": "noop", "schedule": {"at": due.isoformat()}}

        log(SCENARIO, f"#{rep}: submitting {total} jobs due from {t0:%H:%M:%S} at "
                      f"{args.rate:g}/s for {args.seconds:g}s")
        submit_s = await submit_jobs(bench, total, job, scenario=SCENARIO)
        margin = (t0 - datetime.now(UTC)).total_seconds()
        if margin < 0:
            log(SCENARIO, f"submission ended {-margin:.1f}s after the first due time")
        profiler = None
        if rep == 0:  # the profiled repetition (not in the median: py-spy slows what it samples)
            await asyncio.sleep(max(0.0, margin))
            profiler = Profiler(SCENARIO, {a: bench.pid(a) for a in PROFILED},
                                min(args.seconds, 30)).start()
        where = f"due_at >= '{t0.isoformat()}'"
        done = await wait_succeeded(bench.url, total, within=margin + args.seconds + 300,
                                    scenario=SCENARIO, where=where, quiet_for=margin + args.seconds)
        figures = await lag_figures(bench.url, where)
        tops = profiler.finish() if profiler else {}
    return {"jobs": total, "succeeded": done, "submit_seconds": round(submit_s, 2),
            "submitted_ahead_s": round(margin, 2), **figures,
            "profile_top": {a: t[:8] for a, t in tops.items()}}


async def main(args: Any) -> dict[str, Any]:
    if args.quick:
        args.seconds = min(args.seconds, 15)
    runs = []
    profiled = await once(args, 0) if args.profile else None
    for rep in range(1, repeat_count(args) + 1):
        runs.append(await once(args, rep))
        lag = runs[-1]["start_lag_ms"]
        log(SCENARIO, f"#{rep}: p50 {lag['p50']} ms, p99 {lag['p99']} ms, max {lag['max']} ms")
    median = {f"{part}_{q}": median_of(runs, part, q)
              for part in ("start_lag_ms", "scheduler_lag_ms", "queue_to_start_ms")
              for q in ("p50", "p95", "p99", "max")}
    return {"scenario": SCENARIO, "rate_per_s": args.rate, "seconds": args.seconds,
            "worker_concurrency": args.concurrency, "repetitions": len(runs),
            "service_env": service_env(args),
            "median": median, "target_p99_ms": TARGET_P99_MS, "runs": runs,
            "profiled_run": profiled,
            "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    m = r["median"]
    rows = [(f"start lag {q} (ms)", m[f"start_lag_ms_{q}"],
             f"target ≤ {TARGET_P99_MS}" if q == "p99" else "")
            for q in ("p50", "p95", "p99", "max")]
    rows += [(f"  scheduler share {q} (ms)", m[f"scheduler_lag_ms_{q}"], "")
             for q in ("p50", "p99")]
    rows += [(f"  queue→start {q} (ms)", m[f"queue_to_start_ms_{q}"], "") for q in ("p50", "p99")]
    return table(f"Start lag: {r['rate_per_s']:g} due/s for {r['seconds']:g} s, median of "
                 f"{r['repetitions']}", rows)


if __name__ == "__main__":
    parser = base_parser(__doc__)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--concurrency", type=int, default=256)
    from ostinato.telemetry.logging import configure_logging
    configure_logging("bench", "warning")
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
