"""Due burst: --jobs one-off jobs all due in the same second; seconds from that second until all
started and until all finished, the distribution of (started_at - due_at), and the CPU a run of
every process from that second until all succeeded.

    .venv/bin/python -m bench.burst [--quick] [--jobs 100000] [--repeat 3]

The jobs are submitted through POST /v1/jobs/batch with `at` = a whole second T far enough
ahead that the submission ends before T (the result says how far ahead it ended); all due
instants are spread over [T, T+1 s). Each repetition runs on a fresh cluster and database,
after a warm-up of 2,000 immediate no-op jobs. --quick: 20,000 jobs, one repetition.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.common import (
    STATS_LAG_S,
    Profiler,
    base_parser,
    bench_cluster,
    cpu_by_process_group,
    cpu_per_run_ms,
    cpu_spent,
    lag_figures,
    log,
    machine,
    median_of,
    repeat_count,
    rows_line,
    rows_per_run,
    sdk_worker,
    service_env,
    statement_stats,
    statements_per_run,
    submit_jobs,
    table,
    table_stats,
    wait_succeeded,
    write_result,
)
from bench.start_lag import PROFILED, warm_up
from ostinato import eventloop

SCENARIO = "burst"
TARGET_ALL_STARTED_S = 60


async def once(args: Any, rep: int) -> dict[str, Any]:
    n = args.jobs
    env = service_env(args)
    async with bench_cluster(SCENARIO, env=env) as bench, sdk_worker(bench, args.concurrency):
        await warm_up(bench, SCENARIO)
        # the submission must end before the burst, and its counters be reported (STATS_LAG_S)
        lead = 12 + n / 4000
        t0 = (datetime.now(UTC) + timedelta(seconds=lead)).replace(microsecond=0)

        def job(i: int) -> dict[str, Any]:
            due = t0 + timedelta(microseconds=i * 1_000_000 // n)
            return {"name": f"burst-{i}", "task": "noop", "schedule": {"at": due.isoformat()}}

        log(SCENARIO, f"#{rep}: submitting {n} jobs due in the second {t0:%H:%M:%S}")
        submit_s = await submit_jobs(bench, n, job, scenario=SCENARIO)
        margin = (t0 - datetime.now(UTC)).total_seconds()
        log(SCENARIO, f"#{rep}: submitted in {submit_s:.1f}s, {margin:.1f}s before the burst")
        await asyncio.sleep(max(0.0, margin - 1.0))
        tables, statements = await table_stats(bench.url), await statement_stats(bench.url)
        await asyncio.sleep(max(0.0, (t0 - datetime.now(UTC)).total_seconds()))
        services = {a: bench.pid(a) for a in bench.cluster.procs}
        cpu_before = cpu_by_process_group(services)
        profiler = None
        if rep == 0:  # the profiled repetition (not in the median: py-spy slows what it samples)
            profiler = Profiler(SCENARIO, {a: bench.pid(a) for a in PROFILED}, 30).start()
        where = f"due_at >= '{t0.isoformat()}'"
        done = await wait_succeeded(bench.url, n, within=args.timeout, scenario=SCENARIO,
                                    where=where, quiet_for=1.0)
        # from the burst's second until all succeeded (within the wait's half-second polls)
        cpu = cpu_spent(cpu_before, cpu_by_process_group(services))
        figures = await lag_figures(bench.url, where)
        tops = profiler.finish() if profiler else {}
        await asyncio.sleep(STATS_LAG_S)
        rows = rows_per_run(tables, await table_stats(bench.url), done)
        per_run = statements_per_run(statements, await statement_stats(bench.url), done)
    span = figures.pop("span")
    return {"jobs": n, "succeeded": done, "submit_seconds": round(submit_s, 2),
            "submitted_ahead_s": round(margin, 2),
            "all_started_s": round((span["last_start"] - t0).total_seconds(), 2),
            "all_finished_s": round((span["last_finish"] - t0).total_seconds(), 2),
            "started_per_s": round(n / max(1e-9, (span["last_start"] - t0).total_seconds()), 1),
            "cpu_seconds": cpu, "cpu_per_run_ms": cpu_per_run_ms(cpu, done),
            **figures, "rows_per_run": rows, "statements_per_run": per_run,
            "profile_top": {a: t[:8] for a, t in tops.items()}}


async def main(args: Any) -> dict[str, Any]:
    if args.quick and args.jobs == 100_000:
        args.jobs = 20_000
    runs = []
    profiled = await once(args, 0) if args.profile else None
    for rep in range(1, repeat_count(args) + 1):
        runs.append(await once(args, rep))
        log(SCENARIO, f"#{rep}: all started {runs[-1]['all_started_s']} s, all finished "
                      f"{runs[-1]['all_finished_s']} s, {runs[-1]['cpu_per_run_ms']} ms CPU a run")
    median = {k: median_of(runs, k) for k in ("all_started_s", "all_finished_s",
                                               "started_per_s", "submit_seconds",
                                               "cpu_per_run_ms")}
    median.update({f"start_lag_ms_{q}": median_of(runs, "start_lag_ms", q)
                   for q in ("p50", "p95", "p99", "max")})
    median.update({f"scheduler_lag_ms_{q}": median_of(runs, "scheduler_lag_ms", q)
                   for q in ("p50", "p99", "max")})
    return {"scenario": SCENARIO, "jobs": args.jobs, "worker_concurrency": args.concurrency,
            "repetitions": len(runs), "service_env": service_env(args), "median": median,
            "target_all_started_s": TARGET_ALL_STARTED_S, "runs": runs, "profiled_run": profiled,
            "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    m = r["median"]
    rows = [("all started after (s)", m["all_started_s"], f"target ≤ {TARGET_ALL_STARTED_S}"),
            ("all finished after (s)", m["all_finished_s"], ""),
            ("started per second", m["started_per_s"], ""),
            ("CPU per run, all processes (ms)", m["cpu_per_run_ms"], "")]
    rows += [(f"start lag {q} (ms)", m[f"start_lag_ms_{q}"], "")
             for q in ("p50", "p95", "p99", "max")]
    rows += [(f"  scheduler share {q} (ms)", m[f"scheduler_lag_ms_{q}"], "")
             for q in ("p50", "p99", "max")]
    last = r["runs"][-1] if r["runs"] else {}
    if last.get("rows_per_run"):
        rows.append(("rows a run, last repetition (ins/upd(HOT)/del)",
                     rows_line(last["rows_per_run"]), ""))
    if last.get("statements_per_run"):
        rows.append(("statements a run, server ms a run, last repetition",
                     f"{last['statements_per_run']['statements']}, "
                     f"{last['statements_per_run']['server_ms']}", ""))
    return table(f"Due burst: {r['jobs']} jobs due in one second, median of "
                 f"{r['repetitions']}", rows)


if __name__ == "__main__":
    parser = base_parser(__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--timeout", type=float, default=900)
    from ostinato.telemetry.logging import configure_logging
    configure_logging("bench", "warning")
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
