"""What watching the disk costs (issue 38 item 9, docs/RETENTION.md "The disk"): one pass of
the reconciler's storage duty (pg_database_size, a statvfs, the catalog read the room reusable
inside the database's files is estimated from, the upsert of `storage_state`),
and what the api's gate adds to a request for new work: a read of the level when its 2 s cache
has run out, nothing but a clock read and a comparison otherwise.

No services: a fresh migrated database, `--passes` storage passes (200; --quick 50) with the
volume measure (the database's own folder's filesystem is not visible from here: this
checkout's folder stands in) and with a capacity, then `--admits` calls of the gate with its
cache warm and with it cold (every call a read). Figures: median and p99 µs.

    .venv/bin/python -m bench.storage_watch [--quick]
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import asyncpg

from bench.common import distribution, log, machine, migrated_database, table, write_result
from ostinato.db.pool import create_pool
from ostinato.stores import storage as storage_store
from services.api.storage import StorageGate
from services.reconciler.checks.storage import StorageConfig, check_storage

SCENARIO = "storage_watch"
HERE = str(Path(__file__).resolve().parent)  # a folder on this machine's disk


async def timed(n: int, call: Any) -> dict[str, Any]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - t0) * 1e6)
    return distribution(samples)


async def main(args: Any) -> dict[str, Any]:
    passes = args.passes or (50 if args.quick else 200)
    admits = args.admits or (2_000 if args.quick else 20_000)
    async with migrated_database() as url:
        pool: asyncpg.Pool = await create_pool(url, max_size=2)
        try:
            async with pool.acquire() as conn:
                size = int(await conn.fetchval("SELECT pg_database_size(current_database())"))
            volume = StorageConfig(volume_path=HERE)
            capacity = StorageConfig(capacity_bytes=size * 10)
            async with pool.acquire() as conn:  # the reusable-room estimate's catalog read
                out = {"relations_us": await timed(passes,
                                                   lambda: storage_store.relations(conn)),
                       "relations": len(await storage_store.relations(conn))}
            out |= {"pass_volume_us": await timed(passes, lambda: check_storage(pool, volume)),
                   "pass_capacity_us": await timed(passes,
                                                   lambda: check_storage(pool, capacity))}
            log(SCENARIO, f"passes: {out['pass_volume_us']}")
            warm = StorageGate(lambda: pool, 60)
            await warm.admit()
            out["admit_cached_us"] = await timed(admits, warm.admit)
            cold = StorageGate(lambda: pool, 60, cache_seconds=0.0)
            out["admit_uncached_us"] = await timed(min(admits, 5_000), cold.admit)
        finally:
            await pool.close()
    return {"scenario": SCENARIO, "passes": passes, "admits": admits,
            "database_bytes": size, **out, "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    def row(label: str, key: str, what: str) -> tuple[str, Any, str]:
        d = r[key]
        return (label, d.get("p50"), f"µs p50 (p99 {d.get('p99')}); {what}")
    return table(f"Watching the disk: {r['passes']} passes, {r['admits']} admits", [
        row("storage pass, volume", "pass_volume_us", "every reconcile interval (10 s)"),
        row("storage pass, capacity", "pass_capacity_us", "every reconcile interval (10 s)"),
        row("reusable-room read", "relations_us",
            f"within each pass ({r.get('relations')} tables and TOAST tables)"),
        row("gate, cache warm", "admit_cached_us", "per request for new work"),
        row("gate, cache cold", "admit_uncached_us", "at most once per 2 s per api process"),
    ])


if __name__ == "__main__":
    from bench.common import base_parser
    from ostinato import eventloop

    parser = base_parser(__doc__)
    parser.add_argument("--passes", type=int, default=None)
    parser.add_argument("--admits", type=int, default=None)
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
