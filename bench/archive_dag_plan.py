"""What the archiver's DAG-run pick and removal cost on a large `dag_runs` table (issue 38,
migration 0052): the plan and median time of `dag_run_candidates` (stores/sql/archive.sql) for
a batch, and the time of `ostinato_remove_dag_runs` per DAG run.

No services: a fresh migrated database, --dag-runs finished DAG runs (200,000; --quick 50,000)
over --tenants tenants, ended over the last 60 days (so about half past the default 30-day
retention), each with 2 nodes and its 6 events (DagRunStarted, 2 DagNodeReady naming node runs
no longer hot, 2 DagNodeFinished, DagRunFinished), one in 20 with a node run still hot (kept:
node_run_in_hot_tables); then --remove of the expired ones (2,000; --quick 1,000) removed a
batch of 200 at a time as the archiver does.

    .venv/bin/python -m bench.archive_dag_plan [--quick] [--dag-runs N] [--tenants 20]

Prints the pick's median time over 5 runs and its plan (EXPLAIN ANALYZE, BUFFERS), the
procedure's µs per removed DAG run, and the hot tables' sizes before and after. Figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from datetime import timedelta
from typing import Any

import asyncpg

from bench.common import log, machine, migrated_database, table, write_result
from ostinato.db.pool import _init_connection
from ostinato.db.queries import load
from ostinato.domain.retention import MIN_KEEP_SECONDS
from ostinato.stores.archive import NO_JIT

SCENARIO = "archive_dag_plan"
Q = load("ostinato.stores", "archive.sql")
WINDOW = timedelta(hours=24)
BATCH = 200
FILL = """
INSERT INTO dag_runs (id, tenant_id, dag_id, dag_version, state, trigger, due_at, created_at,
                      started_at, finished_at, updated_at, version)
SELECT gen_random_uuid(), t.id, gen_random_uuid(), 1, 'succeeded', 'api', at, at, at, at, at, 6
FROM (SELECT i, now() - (i::bigint * 5184000 / $1) * interval '1 second' AS at, (i % $2) AS k
      FROM generate_series(1, $1) AS i) AS r
JOIN (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM tenants) AS t ON t.k = r.k
"""
NODES = """
INSERT INTO dag_run_nodes (dag_run_id, key, tenant_id, state, run_id, ready_at, finished_at,
                           updated_at)
SELECT d.id, k, d.tenant_id, 'succeeded', gen_random_uuid(), d.due_at, d.finished_at,
       d.finished_at
FROM dag_runs d CROSS JOIN unnest(ARRAY['extract', 'load']) AS k
"""
EVENTS = """
INSERT INTO events (stream_id, version, stream_type, tenant_id, event_id, type, data, actor,
                    occurred_at)
SELECT d.id, v, 'dag_run', d.tenant_id, gen_random_uuid(),
       (ARRAY['DagRunStarted', 'DagNodeReady', 'DagNodeFinished', 'DagNodeReady',
              'DagNodeFinished', 'DagRunFinished'])[v],
       CASE WHEN v IN (2, 3) THEN json_build_object('run_id', n1.run_id, 'key', 'extract')
            WHEN v IN (4, 5) THEN json_build_object('run_id', n2.run_id, 'key', 'load')
            ELSE '{"bench": true}'::json END,
       'bench', d.finished_at
FROM dag_runs d
JOIN dag_run_nodes n1 ON n1.dag_run_id = d.id AND n1.key = 'extract'
JOIN dag_run_nodes n2 ON n2.dag_run_id = d.id AND n2.key = 'load'
CROSS JOIN generate_series(1, 6) AS v
"""
# one in 20 keeps a node run hot: the pick must pass over it (node_run_in_hot_tables)
HOT_NODE_RUNS = """
INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for,
                  state, attempt, fencing_token, updated_at, version, finished_at, trigger)
SELECT n.run_id, n.tenant_id, gen_random_uuid(), 'noop', 'default', 'default',
       gen_random_uuid(), n.finished_at, 'succeeded', 1, 1, n.finished_at, 5, n.finished_at,
       'dag'
FROM dag_run_nodes n
WHERE n.key = 'load' AND get_byte(uuid_send(n.dag_run_id), 15) % 20 = 0
"""
SIZES = """
SELECT relname, pg_total_relation_size(oid) FROM pg_class
WHERE relname IN ('dag_runs', 'dag_run_nodes', 'events') ORDER BY relname
"""
ARGS = (BATCH, WINDOW, MIN_KEEP_SECONDS)


async def timed(conn: asyncpg.Connection, repeat: int = 5) -> tuple[float, list[Any]]:
    """Median ms of the pick and what it picked, without JIT (as stores/archive.py runs it)."""
    times: list[float] = []
    got: list[Any] = []
    for _ in range(repeat):
        began = time.perf_counter()
        async with conn.transaction():
            await conn.execute(NO_JIT)
            got = await conn.fetch(Q["dag_run_candidates"], *ARGS)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), got


async def plan(conn: asyncpg.Connection) -> str:
    async with conn.transaction():
        await conn.execute(NO_JIT)
        rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "
                                + Q["dag_run_candidates"], *ARGS)
    return "\n".join(r[0] for r in rows)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with migrated_database() as url:
        conn = await asyncpg.connect(url)
        await _init_connection(conn)
        try:
            await conn.execute(
                "INSERT INTO tenants (id, name, weight, created_at, version)"
                " SELECT gen_random_uuid(), 'bench-' || i, 1, now(), 1"
                " FROM generate_series(1, $1) AS i", args.tenants)
            began = time.perf_counter()
            for statement in (FILL, NODES, EVENTS, HOT_NODE_RUNS):
                await conn.execute(statement, *((args.dag_runs, args.tenants)
                                                if statement is FILL else ()))
            await conn.execute("VACUUM ANALYZE dag_runs, dag_run_nodes, events, runs")
            log(SCENARIO, f"{args.dag_runs} DAG runs in {time.perf_counter() - began:.1f}s")
            pick_ms, picked = await timed(conn)
            pick_plan = await plan(conn)
            sizes_before = dict(await conn.fetch(SIZES))
            removed, spent, calls = 0, 0.0, 0
            while removed < args.remove:
                _, batch = await timed(conn, repeat=1)
                if not batch:
                    break
                began = time.perf_counter()
                async with conn.transaction():
                    rows = await conn.fetch(Q["archive_remove_dag_runs"],
                                            [r["dag_run_id"] for r in batch],
                                            [r["version"] for r in batch], WINDOW)
                spent += time.perf_counter() - began
                calls += 1
                removed += sum(r["removed"] for r in rows)
            sizes_after = dict(await conn.fetch(SIZES))
        finally:
            await conn.close()
    per_us = spent / removed * 1e6 if removed else None
    print(table(f"DAG-run pick and removal ({args.dag_runs} DAG runs, {args.tenants} tenants)", [
        ("dag_run_candidates, a batch", f"{pick_ms:.1f}", f"ms ({len(picked)} picked of "
                                                          f"{BATCH})"),
        ("removal", f"{per_us:.0f}" if per_us else "-",
         f"µs per DAG run ({removed} removed in {calls} calls)"),
    ]))
    print("plan:\n" + pick_plan)
    print(f"sizes before removal: {sizes_before}\nsizes after: {sizes_after}")
    return {"dag_runs": args.dag_runs, "tenants": args.tenants, "candidates_ms": pick_ms,
            "picked": len(picked), "removal_us_per_dag_run": per_us, "removed": removed,
            "plan": pick_plan, "sizes_before": sizes_before, "sizes_after": sizes_after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dag-runs", type=int)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--remove", type=int)
    args = parser.parse_args()
    args.dag_runs = args.dag_runs or (50_000 if args.quick else 200_000)
    args.remove = args.remove or (1_000 if args.quick else 2_000)

    async def both() -> dict[str, Any]:
        result = await run(args)
        result["machine"] = await machine()
        return result

    write_result(SCENARIO, asyncio.run(both()))


if __name__ == "__main__":
    main()
