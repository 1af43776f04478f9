"""What a run's state changes cost the `runs` table, and the most that making them HOT updates
could save: the ceiling of the structural step issue 19 names (moving every index whose key or
predicate names a column the run path writes off `runs`, into narrow queue tables).

No services: a fresh migrated database, --runs rows shaped as `runs` (20,000; --quick 5,000) in
state `scheduled`, in a scratch table, then the run path's three transitions (queued, running,
succeeded) 400 runs a statement as the services batch them, each batch through all three, each
statement its own transaction.

    .venv/bin/python -m bench.hot_updates [--quick] [--runs 20000] [--repeat 3]

Variants (interleaved in each repetition, medians over the repetitions):
  today         every index `runs` has now (read from the catalogue, so it follows the schema)
  hot ceiling   only the indexes that name none of the written columns; fillfactor 100
  hot, ff 50    the same with fillfactor 50, so that the updated row fits on its page

Per transition and for the three together: µs per run (the statement's time seen by the client
on loopback: server work, commit and round trip, the run's share of a 400-row statement), WAL
bytes per run, and the share of the updates that were HOT. The ceiling leaves out what the
queue tables themselves would cost (their rows inserted and deleted, their indexes), so the
saving it shows is an upper bound.
"""

from __future__ import annotations

import re
import time
from typing import Any

import asyncpg

from bench.common import log, machine, migrated_database, table, write_result

SCENARIO = "hot_updates"
BATCH = 400
# What the run path writes (eventlog/sql/readmodels.sql: RunQueued, RunStarted, RunSucceeded).
WRITTEN = ("state", "pool", "queued_at", "updated_at", "version", "traceparent", "attempt",
           "fencing_token", "worker_id", "started_at", "task_version", "pinned", "finished_at",
           "output_ref", "logs_ref")
TRANSITIONS = {
    "queued": "UPDATE scratch SET state = 'queued', pool = pool, queued_at = now(), "
              "updated_at = now(), version = version + 1 WHERE id = ANY($1::uuid[])",
    "running": "UPDATE scratch SET state = 'running', attempt = attempt + 1, "
               "fencing_token = fencing_token + 1, worker_id = 'bench-worker', "
               "started_at = now(), updated_at = now(), version = version + 1 "
               "WHERE id = ANY($1::uuid[])",
    "succeeded": "UPDATE scratch SET state = 'succeeded', finished_at = now(), "
                 "output_ref = gen_random_uuid(), updated_at = now(), version = version + 1 "
                 "WHERE id = ANY($1::uuid[])",
}
FILL = """
INSERT INTO scratch (id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for,
                     state, attempt, fencing_token, updated_at, version, due_at, scheduled_at)
SELECT gen_random_uuid(), ('00000000-0000-0000-0000-00000000000' || (i % 8))::uuid,
       gen_random_uuid(), 'noop', 'default', 'default', gen_random_uuid(),
       now() + i * interval '1 ms', 'scheduled', 0, 0, now(), 1, now(), now()
FROM generate_series(1, $1) AS i
"""


def ceiling(definitions: dict[str, str]) -> dict[str, str]:
    """The indexes (name -> definition) that name none of the WRITTEN columns."""
    written = re.compile(r"\b(" + "|".join(WRITTEN) + r")\b")
    return {name: d for name, d in definitions.items()
            if not written.search(d.split(" USING ", 1)[1])}


async def once(conn: asyncpg.Connection, runs: int, indexes: dict[str, str],
               fillfactor: int) -> dict[str, Any]:
    await conn.execute("DROP TABLE IF EXISTS scratch")
    await conn.execute("CREATE TABLE scratch (LIKE runs INCLUDING DEFAULTS) "
                       f"WITH (fillfactor = {fillfactor}, autovacuum_enabled = false)")
    for name, definition in indexes.items():
        await conn.execute(definition.replace(f" {name} ON public.runs ",
                                              f" {name}_scratch ON scratch "))
    await conn.execute(FILL, runs)
    await conn.execute("VACUUM ANALYZE scratch")
    ids = [r["id"] for r in await conn.fetch("SELECT id FROM scratch ORDER BY scheduled_for")]
    spent = {t: 0.0 for t in TRANSITIONS}
    wal = dict.fromkeys(TRANSITIONS, 0)
    for i in range(0, len(ids), BATCH):
        batch = ids[i:i + BATCH]
        for transition, sql in TRANSITIONS.items():
            lsn = await conn.fetchval("SELECT pg_current_wal_insert_lsn()")
            started = time.perf_counter()
            await conn.execute(sql, batch)
            spent[transition] += time.perf_counter() - started
            wal[transition] += int(await conn.fetchval(
                "SELECT pg_current_wal_insert_lsn() - $1::pg_lsn", lsn))
    await conn.execute("SELECT pg_stat_force_next_flush()")
    await conn.execute("SELECT 1")  # the flush happens at the end of a statement
    updated, hot = await conn.fetchrow(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'scratch'")
    figures = {t: {"us_per_run": round(spent[t] / len(ids) * 1e6, 1),
                   "wal_bytes_per_run": round(wal[t] / len(ids))} for t in TRANSITIONS}
    figures["all"] = {"us_per_run": round(sum(spent.values()) / len(ids) * 1e6, 1),
                      "wal_bytes_per_run": round(sum(wal.values()) / len(ids)),
                      "hot_share": round(hot / updated, 3) if updated else None}
    await conn.execute("DROP TABLE scratch")
    return figures


async def main(args: Any) -> dict[str, Any]:
    runs = args.runs or (5_000 if args.quick else 20_000)
    repeat = args.repeat or (1 if args.quick else 3)
    async with migrated_database() as url:
        conn = await asyncpg.connect(url)
        today = {r["name"]: r["definition"] for r in await conn.fetch(
            "SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS definition"
            " FROM pg_index WHERE indrelid = 'runs'::regclass ORDER BY 1")}
        kept = ceiling(today)
        variants = {"today": (today, 100), "hot ceiling": (kept, 100), "hot, ff 50": (kept, 50)}
        results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for rep in range(1, repeat + 1):
            for variant, (indexes, fillfactor) in variants.items():
                results[variant].append(await once(conn, runs, indexes, fillfactor))
                log(SCENARIO, f"#{rep} {variant}: {results[variant][-1]['all']}")
        await conn.close()
    median = {variant: {t: {k: sorted(r[t][k] for r in reps)[len(reps) // 2]
                            for k in reps[0][t]}
                        for t in reps[0]}
              for variant, reps in results.items()}
    return {"scenario": SCENARIO, "runs": runs, "repetitions": repeat, "batch": BATCH,
            "indexes_today": sorted(today), "indexes_hot_ceiling": sorted(kept),
            "median": median, "repetitions_figures": results, "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    rows = []
    for variant, figures in r["median"].items():
        for transition, f in figures.items():
            hot = f" (HOT {f['hot_share']:.0%})" if f.get("hot_share") is not None else ""
            rows.append((f"{variant}: {transition}", f["us_per_run"],
                         f"µs a run; {f['wal_bytes_per_run']} B of WAL{hot}"))
    return table(f"Run state changes on `runs`: {r['runs']} runs, {len(r['indexes_today'])} "
                 f"indexes today, {len(r['indexes_hot_ceiling'])} in the HOT ceiling, median of "
                 f"{r['repetitions']}", rows)


if __name__ == "__main__":
    from bench.common import base_parser
    from ostinato import eventloop

    parser = base_parser(__doc__)
    parser.add_argument("--runs", type=int, default=None)
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
