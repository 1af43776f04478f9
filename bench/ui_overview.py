"""What the web UI's overview page costs to read on a tenant with many runs (issue 41 item 4;
docs/UI.md "Overview"): the four statements of `ostinato.stores.overview` (live runs per pool
and state, runs ended per hour of the day, the start-lag histogram of the hour, alerts), each
with its plan, and the whole read as the page makes it.

No services: a fresh migrated database; one tenant with `--runs` runs (1,000,000; --quick
200,000) scheduled over the last 10 days (so a tenth ended within the day), 1 % of them not
final (scheduled, queued, running, retry_scheduled), 2 % dead-lettered; `--others` other
tenants with as many runs between them; the start-lag histogram of the last hour for every
tenant (3 pools, 12 buckets a minute), as the RunStarted projection keeps it; 20 alert keys of
the tenant. Figures: each statement's median ms and its plan (EXPLAIN ANALYZE, BUFFERS), the
whole read's p50/p99 over `--reads` reads (50; --quick 20), and the histogram's read again with
an index on (tenant_id, minute), which the schema does not have.

    .venv/bin/python -m bench.ui_overview [--quick] [--runs N] [--others N] [--reads N]
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from typing import Any

import asyncpg

from bench.common import distribution, log, machine, migrated_database, table, write_result
from ostinato.db.pool import _init_connection
from ostinato.policy.overview import LAG_MINUTES, day_start, lag_start
from ostinato.stores import overview

SCENARIO = "ui_overview"
FILL = """
INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for,
                  due_at, state, attempt, fencing_token, updated_at, version, started_at,
                  finished_at, failures, trigger)
SELECT gen_random_uuid(), $3, gen_random_uuid(), 'noop',
       (ARRAY['default', 'batch', 'gpu'])[1 + i % 3], 'default', gen_random_uuid(), at, at, s,
       1, 1, at, 6, CASE WHEN s = 'scheduled' THEN NULL ELSE at + interval '1 second' END,
       CASE WHEN s IN ('succeeded', 'dead_lettered', 'cancelled')
            THEN at + interval '2 seconds' END,
       CASE WHEN i % 50 = 2 THEN 1 ELSE 0 END, 'api'
FROM (SELECT i, $2::timestamptz - (i::bigint * 864000 / $1) * interval '1 second' AS at,
             CASE WHEN i % 100 = 0 THEN (ARRAY['scheduled', 'queued', 'running',
                                               'retry_scheduled'])[1 + (i / 100) % 4]
                  WHEN i % 50 = 1 THEN 'dead_lettered'
                  WHEN i % 97 = 3 THEN 'cancelled'
                  ELSE 'succeeded' END AS s
      FROM generate_series(1, $1) AS i) AS r
"""
LAGS = """
INSERT INTO start_lag_minutes (minute, tenant_id, pool, bucket, starts, max_seconds)
SELECT m, t.id, p, b, 1 + b % 7, 0.001 * power(1.1, b)
FROM tenants t,
     generate_series(date_trunc('minute', $1::timestamptz) - interval '70 minutes',
                     date_trunc('minute', $1::timestamptz), interval '1 minute') AS m,
     unnest(ARRAY['default', 'batch', 'gpu']) AS p,
     generate_series(60, 60 + 11 * 5, 5) AS b
"""
ALERTS = """
INSERT INTO alert_states (tenant_id, alert_key, rule, group_key, labels, annotations, status,
                          starts_at, ends_at, updated_at)
SELECT $1, 'k' || i, 'OstinatoDeadLetter', 'g', json_build_object('pool', 'default'),
       json_build_object('summary', 'bench'), CASE WHEN i % 2 = 0 THEN 'firing' ELSE 'resolved'
       END, $2::timestamptz - i * interval '1 hour',
       CASE WHEN i % 2 = 1 THEN $2::timestamptz - i * interval '30 minutes' END, $2
FROM generate_series(1, 20) AS i
"""
# The histogram's read before the minutes were named one by one (a range of the key's leading
# column: every tenant's rows of the hour).
LAG_RANGE = """
SELECT pool, minute, bucket::int AS bucket, starts, max_seconds
FROM start_lag_minutes
WHERE minute >= $2 AND tenant_id = $1
ORDER BY pool, minute, bucket
"""


async def statement(conn: asyncpg.Connection, name: str, args: tuple[Any, ...],
                    repeat: int = 5) -> tuple[float, int, str]:
    """Median ms of one of the overview's statements (or of other SQL), its rows and plan."""
    sql = overview.Q.get(name, name)
    times, rows = [], 0
    for _ in range(repeat):
        began = time.perf_counter()
        rows = len(await conn.fetch(sql, *args))
        times.append((time.perf_counter() - began) * 1000)
    plan = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, *args)
    return statistics.median(times), rows, "\n".join(r[0] for r in plan)


async def main(args: Any) -> dict[str, Any]:
    runs = args.runs or (200_000 if args.quick else 1_000_000)
    reads = args.reads or (20 if args.quick else 50)
    async with migrated_database() as url:
        conn = await asyncpg.connect(url)
        await _init_connection(conn)
        try:
            now = await conn.fetchval("SELECT now()")
            await conn.execute("INSERT INTO tenants (id, name, weight, created_at, version)"
                               " SELECT gen_random_uuid(), 'bench-' || i, 1, now(), 1"
                               " FROM generate_series(0, $1) AS i", args.others)
            tenants = [r["id"] for r in await conn.fetch("SELECT id FROM tenants ORDER BY name")]
            mine, others = tenants[0], tenants[1:]
            began = time.perf_counter()
            await conn.execute(FILL, runs, now, mine)
            for t in others:
                await conn.execute(FILL, max(1, runs // len(others)), now, t)
            await conn.execute(LAGS, now)
            await conn.execute(ALERTS, mine, now)
            await conn.execute("VACUUM ANALYZE")
            log(SCENARIO, f"{runs} runs of the tenant, as many of {len(others)} others, in "
                          f"{time.perf_counter() - began:.1f}s")
            stats = {
                "overview_live_runs": (mine,),
                "overview_ended_hours": (mine, day_start(now)),
                "overview_lag_buckets": (mine, lag_start(now), LAG_MINUTES),
                "overview_alerts": (mine, day_start(now), overview.ALERTS_SHOWN),
            }
            each = {name: await statement(conn, name, a) for name, a in stats.items()}
            samples = []
            for _ in range(reads):
                began = time.perf_counter()
                await overview.read(conn, mine, now + timedelta(seconds=1))
                samples.append((time.perf_counter() - began) * 1000)
            lag_rows = await conn.fetchval("SELECT count(*) FROM start_lag_minutes")
            # the other shapes: the range read as it was, then with an index by tenant
            ranged = await statement(conn, LAG_RANGE, (mine, lag_start(now)))
            await conn.execute("CREATE INDEX bench_lag_by_tenant"
                               " ON start_lag_minutes (tenant_id, minute)")
            await conn.execute("ANALYZE start_lag_minutes")
            indexed = await statement(conn, LAG_RANGE, (mine, lag_start(now)))
        finally:
            await conn.close()
    return {"scenario": SCENARIO, "runs": runs, "others": len(others),
            "histogram_rows": lag_rows,
            "statements": {n: {"ms": ms, "rows": rows, "plan": plan}
                           for n, (ms, rows, plan) in each.items()},
            "lag_range": {"ms": ranged[0], "rows": ranged[1], "plan": ranged[2]},
            "lag_range_with_tenant_index": {"ms": indexed[0], "rows": indexed[1],
                                            "plan": indexed[2]},
            "read_ms": distribution(samples, 2), "reads": reads, "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    rows = [(name, f"{s['ms']:.2f}", f"ms median ({s['rows']} rows)")
            for name, s in r["statements"].items()]
    for label, key, note in (
            ("the histogram as a range of minutes", "lag_range", "the read until issue 41 item 6"),
            ("the range, an index (tenant_id, minute)", "lag_range_with_tenant_index",
             "no such index exists")):
        rows.append((label, f"{r[key]['ms']:.2f}", f"ms median ({r[key]['rows']} rows; {note})"))
    rows.append(("the whole read (one snapshot)", r["read_ms"]["p50"],
                 f"ms p50 (p99 {r['read_ms']['p99']}) over {r['reads']} reads"))
    text = table(f"overview reads: a tenant with {r['runs']} runs, {r['others']} other "
                 f"tenants, {r['histogram_rows']} histogram rows", rows)
    plans = "\n\n".join(f"{name}:\n{s['plan']}" for name, s in r["statements"].items())
    return text + "\n\n" + plans


if __name__ == "__main__":
    from bench.common import base_parser
    from ostinato import eventloop

    parser = base_parser(__doc__)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--others", type=int, default=200)
    parser.add_argument("--reads", type=int, default=None)
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
