"""Filtering 1,000,000 runs by one searchable attribute (issue 40 item 4): p50/p99 ms of the
run list's query (`list_runs_by_attributes`, or `list_runs_by_attribute_range` for a numeric
range: what GET /v1/runs?where= sends, planned for its values) for selective and non-selective
values, the first page and a deep page (keyset cursor after 1,000 rows), and EXPLAIN's plan.

No services: a fresh migrated database, --runs runs (1,000,000; --quick 200,000) over 5
tenants, generated in SQL (generate_series). 80% of the runs have attributes (the rest none,
as runs of a tenant that declares none): `customer` keyword (one big customer holds 30% of a
tenant's runs, the rest spread over 20,000 names: ~10 runs each), `amount` int uniform in
[0, 10,000), `stage` one of 5 keywords.

Storage compared, same data, same filters (each planned for its values, as the api does):
  jsonb    run_attributes (run, tenant, scheduled_for, attributes jsonb), a GIN index
           (jsonb_path_ops) and a (tenant, scheduled_for desc) btree, plus the numbers in
           run_attribute_numbers (tenant, name, num) for ranges: what Ostinato ships
  typed    a side table with one row per value, typed columns (run_attr_typed: tenant, name,
           kw, num, scheduled_for) and a btree per type ((tenant, name, kw, scheduled_for desc)
           and (tenant, name, num)): the alternative

    .venv/bin/python -m bench.search_attributes [--quick] [--runs N] [--samples 200]
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import asyncpg

from bench.common import log, machine, migrated_database, percentile, table, write_result
from ostinato.db.pool import create_pool
from ostinato.domain.attributes import parse_where
from ostinato.stores.attributes import list_query

SCENARIO = "search_attributes"
TENANTS = 5
PAGE = 50
TYPES = {"customer": "keyword", "amount": "int", "stage": "keyword"}
FILL_RUNS = """
INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for,
                  state, attempt, fencing_token, updated_at, version)
SELECT uuid_in(md5('run' || i)::cstring),
       ('00000000-0000-0000-0000-00000000000' || (i % $2))::uuid,
       uuid_in(md5('job' || (i % 1000))::cstring), 'orders.process', 'default', 'default',
       uuid_in(md5('p' || i)::cstring),
       timestamptz '2026-01-01' + i * interval '10 s', 'succeeded', 1, 1, now(), 4
FROM generate_series(1, $1) AS i
"""
# 80% of runs; customer c0 holds 30% of the runs with attributes, c1..c20000 the rest.
FILL_JSONB = """
INSERT INTO run_attributes (run_id, tenant_id, scheduled_for, attributes)
SELECT r.id, r.tenant_id, r.scheduled_for,
       jsonb_build_object('customer', CASE WHEN h % 10 < 3 THEN 'c0'
                                           ELSE 'c' || (1 + (h / 10) % 20000) END,
                          'amount', (h / 7) % 10000,
                          'stage', (ARRAY['new', 'paid', 'packed', 'shipped', 'done'])
                                   [1 + (h / 3) % 5])
FROM (SELECT id, tenant_id, scheduled_for,
             abs(hashtextextended(id::text, 0)) AS h FROM runs) AS r
WHERE r.h % 5 <> 0;
INSERT INTO run_attribute_numbers (run_id, name, tenant_id, scheduled_for, num)
SELECT run_id, 'amount', tenant_id, scheduled_for, (attributes ->> 'amount')::numeric
FROM run_attributes
"""
TYPED = """
CREATE TABLE run_attr_typed (
    run_id uuid NOT NULL, tenant_id uuid NOT NULL, name text NOT NULL, kw text, num numeric,
    scheduled_for timestamptz NOT NULL, PRIMARY KEY (run_id, name));
INSERT INTO run_attr_typed
SELECT run_id, tenant_id, key, CASE WHEN jsonb_typeof(value) = 'string' THEN value #>> '{}' END,
       CASE WHEN jsonb_typeof(value) = 'number' THEN (value #>> '{}')::numeric END,
       scheduled_for
FROM run_attributes, jsonb_each(attributes);
CREATE INDEX run_attr_typed_kw ON run_attr_typed (tenant_id, name, kw, scheduled_for DESC, run_id);
CREATE INDEX run_attr_typed_num ON run_attr_typed (tenant_id, name, num);
ANALYZE run_attr_typed;
"""
TYPED_EQ = """
SELECT r.* FROM run_attr_typed a JOIN runs r ON r.id = a.run_id
WHERE a.tenant_id = $1 AND a.name = $2 AND a.kw = $3
  AND ($4::timestamptz IS NULL OR (a.scheduled_for, a.run_id) < ($4, $5::uuid))
ORDER BY a.scheduled_for DESC, a.run_id DESC LIMIT $6
"""
TYPED_GT = """
SELECT r.* FROM run_attr_typed a JOIN runs r ON r.id = a.run_id
WHERE a.tenant_id = $1 AND a.name = $2 AND a.num > $3
  AND ($4::timestamptz IS NULL OR (a.scheduled_for, a.run_id) < ($4, $5::uuid))
ORDER BY a.scheduled_for DESC, a.run_id DESC LIMIT $6
"""
FILTERS = {  # name: (where, what it selects)
    "selective eq": ("customer=c1234", "~10 runs of the tenant"),
    "non-selective eq": ("customer=c0", "30% of the tenant's runs with attributes"),
    "selective range": ("amount>9990", "0.1%"),
    "non-selective range": ("amount>100", "99%"),
}
TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")


def jsonb_query(where: str, after: tuple[Any, Any], limit: int) -> tuple[str, tuple[Any, ...]]:
    """The run list's statement and arguments, as `run_store.page` sends them."""
    sql, args = list_query(parse_where([where], TYPES))
    return sql, (TENANT, None, None, None, None, None, None, None, *after, limit, *args)


def typed_query(where: str, after: tuple[Any, Any], limit: int) -> tuple[str, tuple[Any, ...]]:
    f = parse_where([where], TYPES)
    if f.equals:
        [(name, value)] = f.equals.items()
        return TYPED_EQ, (TENANT, name, value, *after, limit)
    [c] = f.compare
    return TYPED_GT, (TENANT, c.name, c.value, *after, limit)


async def fetch(conn: asyncpg.Connection, sql: str, args: tuple[Any, ...]) -> list[Any]:
    """As `run_store.page` sends the run list's query: planned for these values."""
    async with conn.transaction():
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        return await conn.fetch(sql, *args)


async def timed(conn: asyncpg.Connection, sql: str, args: tuple[Any, ...],
                samples: int) -> tuple[dict[str, float], int]:
    times, rows = [], 0
    for _ in range(samples):
        started = time.perf_counter()
        rows = len(await fetch(conn, sql, args))
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"p50": round(percentile(times, 50), 2), "p99": round(percentile(times, 99), 2)}, rows


async def cursor_after(conn: asyncpg.Connection, sql: str, args: tuple[Any, ...],
                       depth: int) -> tuple[Any, Any]:
    """The (scheduled_for, id) keyset cursor after the first `depth` matches (None: fewer)."""
    rows = await fetch(conn, sql, args)
    if len(rows) < depth:
        return None, None
    return rows[depth - 1]["scheduled_for"], rows[depth - 1]["id"]


async def plan(conn: asyncpg.Connection, sql: str, args: tuple[Any, ...]) -> list[str]:
    rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, *args)
    return [r[0] for r in rows]


async def main(args: Any) -> dict[str, Any]:
    runs = args.runs or (200_000 if args.quick else 1_000_000)
    samples = args.samples or (50 if args.quick else 200)
    figures: dict[str, Any] = {}
    plans: dict[str, list[str]] = {}
    async with migrated_database() as url:
        owner = await asyncpg.connect(url)
        started = time.perf_counter()
        await owner.execute(FILL_RUNS, runs, TENANTS)
        await owner.execute(FILL_JSONB)
        await owner.execute("VACUUM ANALYZE runs")
        await owner.execute("VACUUM ANALYZE run_attributes")
        await owner.execute("VACUUM ANALYZE run_attribute_numbers")
        log(SCENARIO, f"{runs:,} runs in {time.perf_counter() - started:.0f} s")
        await owner.execute(TYPED)
        sizes = {r["name"]: r["size"] for r in await owner.fetch(
            "SELECT c.relname AS name, pg_size_pretty(pg_total_relation_size(c.oid)) AS size "
            "FROM pg_class c WHERE c.relname IN ('run_attributes', 'run_attr_typed')")}
        with_attrs = await owner.fetchval("SELECT count(*) FROM run_attributes")
        await owner.close()
        pool = await create_pool(url, max_size=1)
        async with pool.acquire() as conn:
            for name, (where, _) in FILTERS.items():
                deep = await cursor_after(conn, *jsonb_query(where, (None, None), 1000), 1000)
                for storage in ("jsonb", "typed"):
                    for page, after in (("first page", (None, None)), ("page after 1,000", deep)):
                        if after == (None, None) and page != "first page":
                            continue  # fewer than 1,000 matches: no deep page
                        if storage == "jsonb":
                            q, a = jsonb_query(where, after, PAGE + 1)
                        else:
                            q, a = typed_query(where, after, PAGE + 1)
                        key = f"{name} ({where}), {page}, {storage}"
                        figures[key], n = await timed(conn, q, a, samples)
                        figures[key]["rows"] = n
                        log(SCENARIO, f"{key}: {figures[key]}")
                        if page == "first page":
                            plans[key] = await plan(conn, q, a)
        await pool.close()
    return {"scenario": SCENARIO, "runs": runs, "runs_with_attributes": with_attrs,
            "tenants": TENANTS, "samples": samples, "page": PAGE, "sizes": sizes,
            "figures": figures, "plans": plans, "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    rows = [(key, f"{f['p50']} / {f['p99']}", f"ms p50 / p99, {f['rows']} rows")
            for key, f in r["figures"].items()]
    out = [table(f"Runs filtered by one attribute: {r['runs']:,} runs "
                 f"({r['runs_with_attributes']:,} with attributes), {r['tenants']} tenants, "
                 f"pages of {r['page']}, {r['samples']} samples each; sizes {r['sizes']}",
                 rows)]
    for key, lines in r["plans"].items():
        out.append(f"\nEXPLAIN {key}:\n  " + "\n  ".join(lines))
    return "\n".join(out)


if __name__ == "__main__":
    from bench.common import base_parser
    from ostinato import eventloop

    parser = base_parser(__doc__)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--samples", type=int, default=None)
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
