"""What one index of `runs` costs the run path: its insert (scheduled) and bench/hot_updates.py's
transitions (queued, running, succeeded), 400 runs a statement on a scratch copy of `runs`, with
every index `runs` has and without the one named, interleaved --repeat times (7) so that both
variants meet the same load; medians. Written for migration 0053's runs_tenant_state (issue 41
item 6: an index a list page reads is written by every state change, none a HOT update).

    .venv/bin/python -m bench.index_cost [--index runs_tenant_state] [--runs 20000] [--repeat 7]

Figures: µs a run (the statements' time seen by the client) and WAL bytes a run, for the insert
and for the three transitions, with the index and without it, and the difference. Figures
only: nothing asserted.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import asyncpg

from bench.common import log, machine, migrated_database, table, write_result
from bench.hot_updates import BATCH, FILL, once

SCENARIO = "index_cost"


async def inserts(conn: asyncpg.Connection, runs: int, indexes: dict[str, str]) -> dict[str, Any]:
    """µs and WAL bytes a run of inserting `runs` scheduled runs, BATCH a statement, into a
    scratch copy of `runs` with `indexes`."""
    await conn.execute("DROP TABLE IF EXISTS scratch")
    await conn.execute("CREATE TABLE scratch (LIKE runs INCLUDING DEFAULTS)"
                       " WITH (autovacuum_enabled = false)")
    for name, definition in indexes.items():
        await conn.execute(definition.replace(f" {name} ON public.runs ",
                                              f" {name}_scratch ON scratch "))
    spent, wal = 0.0, 0
    for _ in range(runs // BATCH):
        lsn = await conn.fetchval("SELECT pg_current_wal_insert_lsn()")
        began = time.perf_counter()
        await conn.execute(FILL, BATCH)
        spent += time.perf_counter() - began
        wal += int(await conn.fetchval("SELECT pg_current_wal_insert_lsn() - $1::pg_lsn", lsn))
    await conn.execute("DROP TABLE scratch")
    n = runs // BATCH * BATCH
    return {"us_per_run": round(spent / n * 1e6, 1), "wal_bytes_per_run": round(wal / n)}


async def main(args: Any) -> dict[str, Any]:
    repeat = args.repeat or 7
    async with migrated_database() as url:
        conn = await asyncpg.connect(url)
        every = {r["name"]: r["definition"] for r in await conn.fetch(
            "SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS definition"
            " FROM pg_index WHERE indrelid = 'runs'::regclass ORDER BY 1")}
        if args.index not in every:
            raise SystemExit(f"runs has no index {args.index!r}: {', '.join(sorted(every))}")
        without = {n: d for n, d in every.items() if n != args.index}
        variants = {"with": every, "without": without}
        figures: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        added: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for rep in range(1, repeat + 1):
            order = list(variants) if rep % 2 else list(variants)[::-1]
            for variant in order:
                added[variant].append(await inserts(conn, args.runs, variants[variant]))
                figures[variant].append((await once(conn, args.runs, variants[variant],
                                                    100))["all"])
                log(SCENARIO, f"#{rep} {variant} {args.index}: insert {added[variant][-1]}, "
                              f"transitions {figures[variant][-1]}")
        await conn.close()
    median = {v: {k: statistics.median(f[k] for f in reps)
                  for k in ("us_per_run", "wal_bytes_per_run")}
              for v, reps in figures.items()}
    median_insert = {v: {k: statistics.median(f[k] for f in reps)
                         for k in ("us_per_run", "wal_bytes_per_run")}
                     for v, reps in added.items()}
    return {"scenario": SCENARIO, "index": args.index, "definition": every[args.index],
            "runs": args.runs, "repetitions": repeat, "median": median,
            "median_insert": median_insert, "repetitions_figures": figures,
            "repetitions_inserts": added, "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    rows = []
    for what, key in (("insert", "median_insert"), ("3 transitions", "median")):
        w, wo = r[key]["with"], r[key]["without"]
        rows += [(f"{what}, {v} {r['index']}", f"{m['us_per_run']:.1f}",
                  f"µs a run; {m['wal_bytes_per_run']:.0f} B of WAL a run")
                 for v, m in r[key].items()]
        rows.append((f"{what}: its cost", f"{w['us_per_run'] - wo['us_per_run']:+.1f}",
                     f"µs a run ({(w['us_per_run'] / wo['us_per_run'] - 1) * 100:+.1f} %); "
                     f"{w['wal_bytes_per_run'] - wo['wal_bytes_per_run']:+.0f} B of WAL a run"))
    return table(f"One index on the run path: queued, running, succeeded of {r['runs']} runs, "
                 f"median of {r['repetitions']}", rows)


if __name__ == "__main__":
    from bench.common import base_parser
    from ostinato import eventloop

    parser = base_parser(__doc__)
    parser.add_argument("--index", default="runs_tenant_state")
    parser.add_argument("--runs", type=int, default=20_000)
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
