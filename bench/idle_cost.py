"""Idle cost of future jobs: --jobs one-off jobs due next month must cost nothing until due.
Measured before and after they are submitted, on the same cluster: the scheduler's idle poll
(`any_due_jobs`; `claim_due_jobs` over all 16 shards, which it runs when that finds a job due;
`claim_due_retries`) and the reconciler's `oldest_due`, timed through asyncpg --polls times
each, and EXPLAIN ANALYZE; the scheduler's, reconciler's and PostgreSQL's CPU seconds per second
while idle (/proc/<pid>/stat); the mean scheduler tick (its own `ostinato_scheduler_tick_seconds`
histogram); and the storage the jobs take (pg_total_relation_size per table,
pg_database_size).

    .venv/bin/python -m bench.idle_cost [--quick] [--jobs 1000000] [--idle-seconds 30]
                                        [--broker-topics 0]

The jobs go through POST /v1/jobs/batch (1,000 per request, 4 requests in flight), so the rows
are exactly what the API writes. After the submission the outbox is drained and the tables are
VACUUM ANALYZEd (what autovacuum would do shortly) before the second measurement. --quick: 100,000
jobs, 10 s idle windows. One repetition (the insert dominates; the polls are repeated instead).
--broker-topics N first puts N other topics on the broker (one partition each, under the
cluster's prefix, deleted with it), as on a broker shared with other applications: a service
that read the metadata of every topic would show it in the idle figures.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from bench.common import (
    KAFKA,
    base_parser,
    bench_cluster,
    cpu_by_process_group,
    cpu_spent,
    distribution,
    log,
    machine,
    submit_jobs,
    table,
    write_result,
)
from ostinato import eventloop
from ostinato.bus.kafka import ensure_topics
from ostinato.leases.shard import SHARDS
from ostinato.stores import jobs, runs
from tests.helpers.lab.metrics import metric_total, scrape

SCENARIO = "idle_cost"
SHARD_LIST = list(range(SHARDS))
TABLES = ("jobs", "events", "blobs", "outbox", "runs")
CLUSTER = ("postgresql", "kafka")  # beside the services' own processes


async def time_polls(url: str, polls: int) -> dict[str, Any]:
    """Each poll query `polls` times in its own transaction (rolled back), in microseconds,
    planned as its service plans it: the due poll with a custom plan per execution
    (`stores.jobs.claim_due`), the others as PostgreSQL chooses (cached after five)."""
    conn = await asyncpg.connect(url)
    scheduler_conn = await asyncpg.connect(
        url, server_settings={"plan_cache_mode": "force_custom_plan"})
    try:
        queries = {
            # The stores' own SQL (prepared and EXPLAINed here, so not through their functions).
            "any_due_jobs": (jobs.Q["any_due_jobs"], lambda now: (now,)),
            "claim_due_jobs": (jobs.Q["claim_due_jobs"], lambda now: (now, 100, [], SHARD_LIST)),
            "claim_due_retries": (runs.Q["claim_due_retries"], lambda now: (now, 500)),
            "oldest_due": (jobs.Q["oldest_due"], lambda now: (now, SHARDS)),
        }
        out: dict[str, Any] = {}
        for name, (sql, params) in queries.items():
            runner = scheduler_conn if name == "claim_due_jobs" else conn
            stmt = await runner.prepare(sql)
            samples = []
            for _ in range(polls):
                now = datetime.now(UTC)
                tr = runner.transaction()
                await tr.start()
                t = time.perf_counter()
                await stmt.fetch(*params(now))
                samples.append((time.perf_counter() - t) * 1e6)
                await tr.rollback()
            out[name] = distribution(samples[polls // 10:])  # the first tenth warms up
        for name, (sql, params) in queries.items():
            plan = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + sql,
                                    *params(datetime.now(UTC)))
            out[f"{name}_plan"] = [r[0] for r in plan]
        sql, params = queries["claim_due_jobs"]
        # What a prepared statement run many times gets (asyncpg prepares every query; after
        # five executions PostgreSQL may switch to the generic plan): the plan without values.
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.execute(f"PREPARE due_generic AS {sql.strip().rstrip(';')}")
        shards = "{" + ",".join(map(str, SHARD_LIST)) + "}"
        plan = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) EXECUTE due_generic("
                                f"'{datetime.now(UTC).isoformat()}', 100, '{{}}', '{shards}')")
        await conn.execute("DEALLOCATE due_generic; RESET plan_cache_mode")
        out["claim_due_jobs_generic_plan"] = [r[0] for r in plan]
        return out
    finally:
        await conn.close()
        await scheduler_conn.close()


async def idle_cpu(bench: Any, seconds: float) -> dict[str, Any]:
    """CPU seconds per second of the scheduler, the reconciler and PostgreSQL (every backend:
    the services' polls are planned and run there), of every process of the cluster (Kafka
    too), and the scheduler's mean tick, over `seconds` of idling."""
    services = {a: bench.pid(a) for a in bench.cluster.procs}
    port = bench.cluster.ports["scheduler"]
    groups_before = cpu_by_process_group(services)
    m0 = await scrape(port)
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    elapsed = time.monotonic() - t0
    m1 = await scrape(port)
    spent = cpu_spent(groups_before, cpu_by_process_group(services))
    cluster = {g: round(c / elapsed, 4) for g, c in spent.items() if g in {*services, *CLUSTER}}
    ticks = (metric_total(m1, "ostinato_scheduler_tick_seconds_count")
             - metric_total(m0, "ostinato_scheduler_tick_seconds_count"))
    tick_sum = (metric_total(m1, "ostinato_scheduler_tick_seconds_sum")
                - metric_total(m0, "ostinato_scheduler_tick_seconds_sum"))
    return {**{f"{g}_cpu_s_per_s": cluster.get(g, 0.0)
               for g in ("scheduler", "reconciler", "postgresql")},
            "cluster_cpu_s_per_s": {**cluster, "all": round(sum(cluster.values()), 4)},
            "scheduler_ticks_per_s": round(ticks / elapsed, 1),
            "scheduler_mean_tick_ms": round(1000 * tick_sum / ticks, 3) if ticks else None}


async def storage(url: str) -> dict[str, int]:
    conn = await asyncpg.connect(url)
    try:
        sizes = {t: await conn.fetchval("SELECT pg_total_relation_size($1::regclass)", t)
                 for t in TABLES}
        sizes["jobs_due_index"] = await conn.fetchval(
            "SELECT pg_relation_size('jobs_due'::regclass)")
        sizes["database"] = await conn.fetchval("SELECT pg_database_size(current_database())")
        return sizes
    finally:
        await conn.close()


async def settle(url: str, within: float = 600) -> None:
    """Until the outbox is empty (the api's relay published every event), then VACUUM ANALYZE
    (a million inserts trigger autovacuum: done now, it cannot run during the idle window)."""
    conn = await asyncpg.connect(url)
    try:
        deadline = time.monotonic() + within
        while (left := await conn.fetchval("SELECT count(*) FROM outbox")) and \
                time.monotonic() < deadline:
            log(SCENARIO, f"outbox: {left} rows to publish")
            await asyncio.sleep(5)
        await conn.execute("VACUUM ANALYZE")  # autovacuum's work, done before, not during
    finally:
        await conn.close()


async def other_topics(prefix: str, count: int) -> None:
    """`count` topics no service uses, under `prefix` (the cluster deletes them at its end)."""
    names = [f"{prefix}other.{i}" for i in range(count)]
    for start in range(0, count, 500):
        await ensure_topics(KAFKA, names[start:start + 500], 1)
        log(SCENARIO, f"other topics on the broker: {min(count, start + 500)}/{count}")


async def measure(bench: Any, args: Any, label: str) -> dict[str, Any]:
    log(SCENARIO, f"{label}: {args.idle_seconds:g}s idle, then {args.polls} polls per query")
    await settle(bench.url)
    cpu = await idle_cpu(bench, args.idle_seconds)
    polls = await time_polls(bench.url, args.polls)
    return {**cpu, "polls_us": polls, "storage_bytes": await storage(bench.url)}


async def main(args: Any) -> dict[str, Any]:
    if args.quick and args.jobs == 1_000_000:
        args.jobs = 100_000
    if args.quick:
        args.idle_seconds = min(args.idle_seconds, 10)
    async with bench_cluster(SCENARIO) as bench:
        if args.broker_topics:
            await other_topics(bench.cluster.topic_prefix, args.broker_topics)
        await asyncio.sleep(5)  # leases taken, first polls done
        without = await measure(bench, args, "without future jobs")
        month = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)

        def job(i: int) -> dict[str, Any]:  # spread over a day, next month
            due = month + timedelta(seconds=i * 86_400 / args.jobs)
            return {"name": f"future-{i}", "task": "noop", "schedule": {"at": due.isoformat()},
                    "payload": {"i": i}}

        log(SCENARIO, f"submitting {args.jobs} jobs due from {month:%Y-%m-%d}")
        submit_s = await submit_jobs(bench, args.jobs, job, scenario=SCENARIO, batch=1000)
        log(SCENARIO, f"submitted in {submit_s:.0f}s ({args.jobs / submit_s:.0f} jobs/s)")
        with_jobs = await measure(bench, args, f"with {args.jobs} future jobs")
    per_job = {k: round((with_jobs["storage_bytes"][k] - without["storage_bytes"][k]) / args.jobs,
                        1) for k in without["storage_bytes"]}
    ratios = {q: round(with_jobs["polls_us"][q]["p50"] / without["polls_us"][q]["p50"], 2)
              for q in ("any_due_jobs", "claim_due_jobs", "claim_due_retries", "oldest_due")}
    return {"scenario": SCENARIO, "future_jobs": args.jobs, "polls": args.polls,
            "broker_topics": args.broker_topics,
            "idle_seconds": args.idle_seconds, "submit_seconds": round(submit_s, 1),
            "submit_rate_per_s": round(args.jobs / submit_s, 1),
            "without": without, "with": with_jobs, "poll_p50_ratio_with_over_without": ratios,
            "bytes_per_future_job": per_job,
            "cpu_ratio_with_over_without": round(
                with_jobs["scheduler_cpu_s_per_s"] / max(1e-6, without["scheduler_cpu_s_per_s"]),
                2),
            "target": "no measurable per-poll cost (ratio ≈ 1.0 within noise)",
            "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    w, f = r["without"], r["with"]
    rows: list[tuple[str, Any, str]] = []
    for q in ("any_due_jobs", "claim_due_jobs", "claim_due_retries", "oldest_due"):
        rows.append((f"{q} p50 µs (without → with)",
                     f"{w['polls_us'][q]['p50']} → {f['polls_us'][q]['p50']}",
                     f"ratio {r['poll_p50_ratio_with_over_without'][q]} (target ≈ 1)"))
        rows.append((f"{q} p99 µs (without → with)",
                     f"{w['polls_us'][q]['p99']} → {f['polls_us'][q]['p99']}", ""))
    rows += [("scheduler mean tick ms", f"{w['scheduler_mean_tick_ms']} → "
              f"{f['scheduler_mean_tick_ms']}", ""),
             ("scheduler CPU s/s idle", f"{w['scheduler_cpu_s_per_s']} → "
              f"{f['scheduler_cpu_s_per_s']}", f"ratio {r['cpu_ratio_with_over_without']}"),
             ("reconciler CPU s/s idle", f"{w['reconciler_cpu_s_per_s']} → "
              f"{f['reconciler_cpu_s_per_s']}", ""),
             ("PostgreSQL CPU s/s idle (all services)", f"{w['postgresql_cpu_s_per_s']} → "
              f"{f['postgresql_cpu_s_per_s']}", ""),
             ("whole cluster CPU s/s idle (services, PostgreSQL, Kafka)",
              f"{w['cluster_cpu_s_per_s']['all']} → {f['cluster_cpu_s_per_s']['all']}",
              ", ".join(f"{g} {c}" for g, c in sorted(
                  f["cluster_cpu_s_per_s"].items(), key=lambda gc: -gc[1]) if g != "all")),
             ("other topics on the broker", r.get("broker_topics", 0), ""),
             ("bytes per future job (db)", r["bytes_per_future_job"]["database"], ""),
             ("  jobs table+indexes", r["bytes_per_future_job"]["jobs"], ""),
             ("  events", r["bytes_per_future_job"]["events"], ""),
             ("  blobs (payloads)", r["bytes_per_future_job"]["blobs"], ""),
             ("database size MiB (with)", round(f["storage_bytes"]["database"] / 2**20, 1), ""),
             ("submit rate (jobs/s)", r["submit_rate_per_s"], "")]
    return table(f"Idle cost: {r['future_jobs']} jobs due next month", rows)


if __name__ == "__main__":
    parser = base_parser(__doc__)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--idle-seconds", type=float, default=30)
    parser.add_argument("--polls", type=int, default=500)
    parser.add_argument("--broker-topics", type=int, default=0,
                        help="other topics put on the broker first (a shared broker)")
    from ostinato.telemetry.logging import configure_logging
    configure_logging("bench", "warning")
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
