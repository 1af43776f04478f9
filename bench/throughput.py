"""Throughput end to end through all five services: N no-op jobs submitted over the public API,
run by an SDK worker; prints submit rate, completion rate, and the database work and CPU per run.

    .venv/bin/python -m bench.throughput [--quick] [--jobs 20000] [--batch 500] [--repeat 3]

Needs PostgreSQL and Kafka (`infra/up.sh`). Each repetition starts its own services on free
ports with a fresh database and topic prefix, warms up with 2,000 jobs, measures, and stops
them. Completion rate = jobs / (first submission request to last run succeeded), so it includes
the submission. Writes bench/results/throughput.json (--profile: py-spy summaries beside it).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from bench.common import (
    STATS_LAG_S,
    Profiler,
    base_parser,
    bench_cluster,
    cores_used,
    cpu_by_process_group,
    cpu_per_run_ms,
    cpu_spent,
    last_finished,
    log,
    machine,
    median_of,
    pg_stats,
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
from bench.start_lag import WARMUP, warm_up
from ostinato import eventloop

SCENARIO = "throughput"
TARGET_RUNS_PER_S = 2000
PROFILED = ("api", "scheduler", "dispatcher", "worker_gateway")


async def once(args: Any, rep: int) -> dict[str, Any]:
    n = args.jobs
    env = service_env(args)
    async with bench_cluster(SCENARIO, env=env) as bench, sdk_worker(bench, args.concurrency):
        await warm_up(bench, SCENARIO)
        await asyncio.sleep(STATS_LAG_S)  # the warm-up's last counters reported
        before = await pg_stats(bench.url)
        tables = await table_stats(bench.url)
        statements_before = await statement_stats(bench.url)
        profiler = None
        if rep == 0:  # the profiled repetition (not in the median: py-spy slows what it samples)
            profiler = Profiler(SCENARIO, {**{a: bench.pid(a) for a in PROFILED},
                                           "bench_sdk_worker": os.getpid()},
                                max(5.0, n / 1500)).start()
        services = {a: bench.pid(a) for a in bench.cluster.procs}
        cpu_before = cpu_by_process_group(services)
        start, started_at = time.perf_counter(), time.time()
        submit_s = await submit_jobs(bench, n, lambda i: {"name": f"noop-{i}", "task": "noop"},
                                     batch=args.batch, submitters=args.submitters,
                                     scenario=SCENARIO)
        done = await wait_succeeded(bench.url, n + WARMUP, within=args.timeout,
                                    scenario=SCENARIO)
        polled = time.perf_counter() - start
        cpu_after = cpu_by_process_group(services)
        cpu = cores_used(cpu_before, cpu_after, polled)
        cpu_ms = cpu_per_run_ms(cpu_spent(cpu_before, cpu_after), n)
        total = await last_finished(bench.url) - started_at
        await asyncio.sleep(STATS_LAG_S)
        after = await pg_stats(bench.url)
        rows = rows_per_run(tables, await table_stats(bench.url), n)
        statements = statements_per_run(statements_before, await statement_stats(bench.url), n)
        tops = profiler.finish() if profiler else {}
    if done < n + WARMUP:
        raise TimeoutError(f"only {done - WARMUP}/{n} runs succeeded")
    return {"submit_rate_per_s": round(n / submit_s, 1),
            "completion_rate_per_s": round(n / total, 1), "end_to_end_seconds": round(total, 2),
            "db_per_run": {k: round((after[k] - before[k]) / n, 2) for k in before},
            "statements_per_run": statements, "rows_per_run": rows,
            "cores_used": cpu, "cpu_per_run_ms": cpu_ms,
            "profile_top": {a: t[:8] for a, t in tops.items()}}


async def main(args: Any) -> dict[str, Any]:
    if args.quick and args.jobs == 20_000:
        args.jobs = 10_000
    runs = []
    profiled = await once(args, 0) if args.profile else None
    for rep in range(1, repeat_count(args) + 1):
        log(SCENARIO, f"#{rep}: {args.jobs} jobs")
        runs.append(await once(args, rep))
        log(SCENARIO, f"#{rep}: {runs[-1]['completion_rate_per_s']} runs/s")
    median = {k: median_of(runs, k) for k in ("submit_rate_per_s", "completion_rate_per_s",
                                               "end_to_end_seconds", "cpu_per_run_ms")}
    median.update({f"db_{k}_per_run": median_of(runs, "db_per_run", k)
                   for k in ("xact_commit", "tup_inserted", "tup_updated", "tup_deleted")})
    median.update({f"sql_{k}_per_run": median_of(runs, "statements_per_run", k)
                   for k in ("statements", "server_ms")})
    return {"scenario": SCENARIO, "jobs": args.jobs, "submitters": args.submitters,
            "batch": args.batch, "worker_concurrency": args.concurrency,
            "repetitions": len(runs), "service_env": service_env(args), "median": median,
            "target_runs_per_s": TARGET_RUNS_PER_S, "runs": runs, "profiled_run": profiled,
            "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    m = r["median"]
    rows = [("submit rate (jobs/s)", m["submit_rate_per_s"], ""),
            ("completion rate (runs/s)", m["completion_rate_per_s"],
             f"target ≥ {TARGET_RUNS_PER_S}"),
            ("end to end (s)", m["end_to_end_seconds"], ""),
            ("per run: CPU ms, all processes", m.get("cpu_per_run_ms"), "first submission to "
                                                                         "last success"),
            ("per run: statements", m.get("sql_statements_per_run"), "pg_stat_statements"),
            ("per run: server ms", m.get("sql_server_ms_per_run"), "execution time"),
            ("per run: commits", m["db_xact_commit_per_run"], ""),
            ("per run: rows inserted", m["db_tup_inserted_per_run"], ""),
            ("per run: rows updated", m["db_tup_updated_per_run"], ""),
            ("per run: rows deleted", m["db_tup_deleted_per_run"], "")]
    if r["runs"] and r["runs"][-1].get("rows_per_run"):
        rows.append(("rows a run by table (ins/upd(HOT)/del)",
                     rows_line(r["runs"][-1]["rows_per_run"]), "last repetition"))
    cores = r["runs"][-1].get("cores_used") or {}
    rows += [(f"cores: {group}", used, "last repetition") for group, used in cores.items()]
    return table(f"Throughput: {r['jobs']} no-op jobs, median of {r['repetitions']}", rows)


if __name__ == "__main__":
    parser = base_parser(__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--submitters", type=int, default=4)
    parser.add_argument("--batch", type=int, default=500, help="jobs per submission request")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--timeout", type=float, default=900)
    from ostinato.telemetry.logging import configure_logging
    configure_logging("bench", "warning")
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
