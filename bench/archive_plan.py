"""What the archiver's pick and the removal procedure cost on a large `runs` table (issue 38,
migration 0046): the plan and time of `archive_candidates` (stores/sql/archive.sql) with and
without the partial index `runs_ended`, and the time of `ostinato_remove_runs` per run.

No services: a fresh migrated database, --runs rows in `runs` (1,000,000; --quick 200,000) over
--tenants tenants, ended over the last 60 days (90 % succeeded, 5 % dead-lettered and not
triaged, 5 % still scheduled), so about half are past the default 30-day retention; then
--remove runs past it (2,000; --quick 1,000) are given 6 events each and removed a batch of
200 at a time as the archiver does.

    .venv/bin/python -m bench.archive_plan [--quick] [--runs N] [--tenants 20] [--compare REV]

Prints the candidates query's plan (EXPLAIN ANALYZE, BUFFERS) and its median time over 5 runs,
with the index and with it dropped; with --compare, the same query as the commit REV had it
(git show), timed on the same rows (a before/after of the pick); and the procedure's µs per
removed run, with the hot tables' sizes before and after. Figures only: nothing here is
asserted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from datetime import timedelta
from typing import Any

import asyncpg

from bench.common import ROOT, log, machine, migrated_database, table, write_result
from ostinato.db.pool import _init_connection
from ostinato.db.queries import load, parse
from ostinato.domain.retention import MIN_KEEP_SECONDS
from ostinato.stores.archive import NO_JIT

SCENARIO = "archive_plan"
Q = load("ostinato.stores", "archive.sql")
WINDOW = timedelta(hours=24)
BATCH = 200
FILL = """
INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for,
                  state, attempt, fencing_token, updated_at, version, finished_at, trigger)
SELECT gen_random_uuid(), t.id, gen_random_uuid(), 'noop', 'default', 'default',
       gen_random_uuid(), at, s, 1, 1, at, 6, CASE WHEN s = 'scheduled' THEN NULL ELSE at END,
       'api'
FROM (SELECT i, now() - (i::bigint * 5184000 / $1) * interval '1 second' AS at,
             CASE WHEN i % 20 = 0 THEN 'scheduled' WHEN i % 20 = 1 THEN 'dead_lettered'
                  ELSE 'succeeded' END AS s,
             (i % $2) AS k
      FROM generate_series(1, $1) AS i) AS r
JOIN (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM tenants) AS t ON t.k = r.k
"""
EVENTS = """
INSERT INTO events (stream_id, version, stream_type, tenant_id, event_id, type, data, actor,
                    occurred_at)
SELECT r.id, v, 'run', r.tenant_id, gen_random_uuid(),
       (ARRAY['RunScheduled', 'RunQueued', 'RunStarted', 'StepCompleted', 'StepCompleted',
              'RunSucceeded'])[v], '{"bench": true}', 'bench', r.finished_at
FROM runs r CROSS JOIN generate_series(1, 6) AS v
WHERE r.id = ANY($1::uuid[])
"""
SIZES = """
SELECT relname, pg_total_relation_size(oid) FROM pg_class
WHERE relname IN ('runs', 'events', 'usage_carried') ORDER BY relname
"""


def arguments(sql: str) -> tuple[object, ...]:
    """The pick's parameters: the batch, the checks window, and (since the floor setting) the
    retention floor; an older query takes the first two."""
    return (BATCH, WINDOW, MIN_KEEP_SECONDS) if "$3" in sql else (BATCH, WINDOW)


async def timed(conn: asyncpg.Connection, repeat: int = 5, sql: str = Q["archive_candidates"],
                jit: bool = False) -> tuple[float, int]:
    """Median ms of the candidates query and how many runs it picked; without JIT (as
    stores/archive.py runs the pick) unless `jit`."""
    times, got = [], 0
    for _ in range(repeat):
        began = time.perf_counter()
        async with conn.transaction():
            if not jit:
                await conn.execute(NO_JIT)
            got = len(await conn.fetch(sql, *arguments(sql)))
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), got


async def plan(conn: asyncpg.Connection, sql: str = Q["archive_candidates"]) -> str:
    async with conn.transaction():
        await conn.execute(NO_JIT)
        rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, *arguments(sql))
    return "\n".join(r[0] for r in rows)


def query_at(rev: str) -> str:
    """archive_candidates as the commit `rev` had it."""
    text = subprocess.run(["git", "-C", str(ROOT), "show",
                           f"{rev}:libs/ostinato/stores/sql/archive.sql"],
                          capture_output=True, text=True, check=True).stdout
    return parse(text, f"{rev}:archive.sql")["archive_candidates"]


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
            await conn.execute(FILL, args.runs, args.tenants)
            await conn.execute("VACUUM ANALYZE runs")
            log(SCENARIO, f"{args.runs} runs in {time.perf_counter() - began:.1f}s")
            with_index = await timed(conn)
            with_jit = await timed(conn, repeat=3, jit=True)
            with_plan = await plan(conn)
            compared = None
            if args.compare:
                old_sql = query_at(args.compare)
                compared = (await timed(conn, repeat=3, sql=old_sql, jit=True),
                            await plan(conn, old_sql),
                            await timed(conn, repeat=3, sql=old_sql))
            await conn.execute("DROP INDEX runs_ended")
            without_index = await timed(conn, repeat=1)
            without_plan = await plan(conn)
            await conn.execute(
                "CREATE INDEX runs_ended ON runs (tenant_id, finished_at)"
                " WHERE state IN ('succeeded', 'dead_lettered', 'cancelled')")
            doomed = [r["id"] for r in await conn.fetch(
                "SELECT id FROM runs WHERE state = 'succeeded'"
                " AND finished_at < now() - interval '31 days' ORDER BY finished_at LIMIT $1",
                args.remove)]
            await conn.execute(EVENTS, doomed)
            await conn.execute("ANALYZE events")
            sizes_before = dict(await conn.fetch(SIZES))
            removed, spent = 0, 0.0
            for start in range(0, len(doomed), BATCH):
                ids = doomed[start:start + BATCH]
                began = time.perf_counter()
                async with conn.transaction():
                    rows = await conn.fetch(Q["archive_remove_runs"], ids, [6] * len(ids),
                                            WINDOW)
                spent += time.perf_counter() - began
                removed += sum(r["removed"] for r in rows)
            sizes_after = dict(await conn.fetch(SIZES))
        finally:
            await conn.close()
    per_run_us = spent / removed * 1e6 if removed else None
    rows = [("candidates, with runs_ended", f"{with_index[0]:.1f}", f"ms ({with_index[1]} picked)"),
            ("  the same with JIT (the server's default)", f"{with_jit[0]:.1f}", "ms")]
    if compared:
        rows += [(f"candidates at {args.compare} (with JIT, as it ran)",
                  f"{compared[0][0]:.1f}", f"ms ({compared[0][1]} picked)"),
                 (f"candidates at {args.compare}, without JIT", f"{compared[2][0]:.1f}",
                  f"ms ({compared[2][1]} picked)")]
    print(table(f"archive pick and removal ({args.runs} runs, {args.tenants} tenants)", [
        *rows,
        ("candidates, without it", f"{without_index[0]:.1f}",
         f"ms ({without_index[1]} picked)"),
        ("removal", f"{per_run_us:.0f}" if per_run_us else "-",
         f"µs per run ({removed} removed, batches of {BATCH})"),
    ]))
    print("plan with runs_ended:\n" + with_plan)
    if compared:
        print(f"plan at {args.compare}:\n" + compared[1])
    print("plan without it:\n" + without_plan)
    print(f"sizes before removal: {sizes_before}\nsizes after (not shrunk: DELETE frees "
          f"space for reuse, the files stay): {sizes_after}")
    return {"runs": args.runs, "tenants": args.tenants,
            "candidates_ms": {"with_index": with_index[0], "without_index": without_index[0]},
            "picked": with_index[1], "removal_us_per_run": per_run_us, "removed": removed,
            "candidates_ms_with_jit": with_jit[0],
            "compared": ({"rev": args.compare, "candidates_ms_with_jit": compared[0][0],
                          "candidates_ms_without_jit": compared[2][0],
                          "picked": compared[0][1], "plan": compared[1]} if compared else None),
            "plans": {"with_index": with_plan, "without_index": without_plan},
            "sizes_before": sizes_before, "sizes_after": sizes_after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--remove", type=int)
    parser.add_argument("--compare", metavar="REV",
                        help="also time archive_candidates as commit REV had it")
    args = parser.parse_args()
    args.runs = args.runs or (200_000 if args.quick else 1_000_000)
    args.remove = args.remove or (1_000 if args.quick else 2_000)
    import asyncio

    async def both() -> dict[str, Any]:
        result = await run(args)
        result["machine"] = await machine()
        return result

    write_result(SCENARIO, asyncio.run(both()))


if __name__ == "__main__":
    main()
