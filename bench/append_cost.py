"""What one event costs the log, and what each choice around its row adds: the append's index
entries, its `json` column, its `RETURNING`, the shape its parameters travel in. A run writes
five events, so a microsecond here is five a run (issue 19).

No services: a fresh migrated database, and a scratch table shaped as `events` (its columns,
defaults and indexes read from the catalogue, so it follows the schema), filled the way
`eventlog.sql`'s `append_events` fills the log: --batch events a statement (100, as the
scheduler's and the gateway's batches), each statement its own transaction, --events in all
(30,000; --quick 10,000).

    .venv/bin/python -m bench.append_cost [--quick] [--events 30000] [--repeat 3]

Variants (interleaved in each repetition, medians over the repetitions): `today`; then one
change each: without one of the indexes, `data` as `text` (not checked as JSON), no
`RETURNING`; `bare`, only the primary key (the optimistic-concurrency check) and `seq`'s
key, `text`, no `RETURNING`; and the same rows sent as one array of the table's row type, or as
one JSON document (`json_to_recordset`), instead of one array a column. Figures, µs an event:
as the client sees the statement on loopback (server work, commit and round trip, the event's
share of the batch); the client's CPU (shaping the parameters, asyncpg's encoding, decoding
what returns); the server backend's CPU (`/proc`, when PostgreSQL runs on this machine).
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import msgspec

from bench.common import cpu_seconds, log, machine, migrated_database, table, write_result
from ostinato.domain.ids import new_id

SCENARIO = "append_cost"
INSERT = """
INSERT INTO scratch (stream_id, version, stream_type, tenant_id, event_id, type, data, actor,
                     epoch, traceparent, occurred_at, recorded_at)
SELECT s, v, st, t, e, ty, d{cast}, a, ep, tp, $11::timestamptz, clock_timestamp()
FROM unnest($1::uuid[], $2::int[], $3::text[], $4::uuid[], $5::uuid[], $6::text[], $7::text[],
            $8::text[], $9::bigint[], $10::text[]) AS x(s, v, st, t, e, ty, d, a, ep, tp)
{returning}"""
RETURNING = "RETURNING seq, recorded_at, event_id"
# The documents of a run's events, as encode_event writes them (sizes as the log holds them).
DATA = [json.dumps(d) for d in (
    {"type": "RunScheduled", "job_id": str(uuid.uuid4()), "task": "noop", "pool": "default",
     "priority": "default", "payload_ref": str(uuid.uuid4()),
     "scheduled_for": "2026-12-05T19:00:00.123456Z", "trigger": "schedule",
     "due_at": "2026-12-05T19:00:00.123456Z", "retry": {"max_attempts": 3}},
    {"type": "OccurrenceFired", "scheduled_for": "2026-12-05T19:00:00.123456Z",
     "run_id": str(uuid.uuid4()), "next_run_at": None, "next_slot": None},
    {"type": "RunQueued", "pool": "default", "reason": "dispatched"},
    {"type": "RunStarted", "attempt": 1, "fencing_token": 1, "worker_id": "w-1",
     "lease_expires_at": "2026-12-05T19:00:30.123456Z"},
    {"type": "RunSucceeded", "output_ref": None})]
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


JSON_INSERT = """
INSERT INTO scratch (stream_id, version, stream_type, tenant_id, event_id, type, data, actor,
                     epoch, traceparent, occurred_at, recorded_at)
SELECT s, v, st, t, e, ty, d, a, ep, tp, $2::timestamptz, clock_timestamp()
FROM json_to_recordset($1::json) AS x(s uuid, v int, st text, t uuid, e uuid, ty text, d json,
                                      a text, ep bigint, tp text)
{returning}"""
ROWS_INSERT = """
INSERT INTO scratch (stream_id, version, stream_type, tenant_id, event_id, type, data, actor,
                     epoch, traceparent, occurred_at, recorded_at)
SELECT stream_id, version, stream_type, tenant_id, event_id, type, data, actor, epoch,
       traceparent, $2::timestamptz, clock_timestamp()
FROM unnest($1::scratch[])
{returning}"""
FIELDS = ("stream_id", "version", "stream_type", "tenant_id", "event_id", "type", "data", "actor",
          "epoch", "traceparent")
_json = msgspec.json.Encoder()


def backend_cpu(pid: int) -> float | None:
    """CPU seconds of a PostgreSQL backend on this machine (None: not readable here)."""
    try:
        return cpu_seconds(pid)
    except OSError:
        return None


async def once(conn: asyncpg.Connection, events: int, batch: int, indexes: dict[str, str],
               text: bool, returning: bool, shape: str) -> dict[str, float | None]:
    """µs an event for one variant: as the client sees the statement (wall), and the CPU of
    the client (shaping the parameters, encoding, decoding what returns) and of the server.
    `shape`: how the events travel, one array a column (`columns`, as `append_events`), one
    array of the table's row type (`rows`) or one JSON document (`json`)."""
    await conn.execute("DROP TABLE IF EXISTS scratch")
    await conn.execute("CREATE TABLE scratch (LIKE events INCLUDING DEFAULTS)")
    await conn.reload_schema_state()  # the row type is new
    if text:
        await conn.execute("ALTER TABLE scratch ALTER COLUMN data TYPE text")
    for name, definition in indexes.items():
        await conn.execute(definition.replace(f" {name} ON public.events ",
                                              f" {name}_scratch ON scratch "))
    sql = {"columns": INSERT.format(cast="" if text else "::json",
                                    returning=RETURNING if returning else ""),
           "rows": ROWS_INSERT.format(returning=RETURNING if returning else ""),
           "json": JSON_INSERT.format(returning=RETURNING if returning else "")}[shape]
    statement = await conn.prepare(sql)
    columns = [r["attname"] for r in await conn.fetch(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'scratch'::regclass AND attnum > 0"
        " AND NOT attisdropped ORDER BY attnum")]
    where = [FIELDS.index(c) if c in FIELDS else None for c in columns]
    backend = await conn.fetchval("SELECT pg_backend_pid()")
    tenant, spent, client = uuid.uuid4(), 0.0, 0.0
    server = backend_cpu(backend)
    for start in range(0, events, batch):
        n = min(batch, events - start)
        rows = [(new_id(), 1, "run", tenant, new_id(), "RunX", DATA[i % 5], "scheduler", None,
                 TRACEPARENT) for i in range(n)]
        cpu = time.process_time()
        if shape == "columns":
            args: tuple[Any, ...] = (*map(list, zip(*rows, strict=True)), datetime.now(UTC))
        elif shape == "rows":
            args = ([tuple(None if k is None else r[k] for k in where) for r in rows],
                    datetime.now(UTC))
        else:
            args = (_json.encode([dict(zip(("s", "v", "st", "t", "e", "ty", "d", "a", "ep", "tp"),
                                           (*r[:6], msgspec.Raw(r[6].encode()), *r[7:]),
                                           strict=True)) for r in rows]).decode(),
                    datetime.now(UTC))
        began = time.perf_counter()
        await statement.fetch(*args)
        spent += time.perf_counter() - began
        client += time.process_time() - cpu
    after = backend_cpu(backend)
    await conn.execute("DROP TABLE scratch")
    return {"wall": round(spent / events * 1e6, 2), "client_cpu": round(client / events * 1e6, 2),
            "server_cpu": None if server is None or after is None
            else round((after - server) / events * 1e6, 2)}


async def main(args: Any) -> dict[str, Any]:
    events = args.events or (10_000 if args.quick else 30_000)
    repeat = args.repeat or 3
    async with migrated_database() as url:
        conn = await asyncpg.connect(url)
        await conn.execute("SET jit = off")  # as every service connection (db/pool.py)
        today = {r["name"]: r["definition"] for r in await conn.fetch(
            "SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS definition"
            " FROM pg_index WHERE indrelid = 'events'::regclass ORDER BY 1")}
        keys = {k: v for k, v in today.items() if k in ("events_pkey", "events_seq_key")}
        variants: dict[str, tuple[dict[str, str], bool, bool, str]] = {
            "today": (today, False, True, "columns")}
        for index in today:
            variants[f"without {index}"] = ({k: v for k, v in today.items() if k != index},
                                            False, True, "columns")
        variants["data as text"] = (today, True, True, "columns")
        variants["no RETURNING"] = (today, False, False, "columns")
        variants["bare"] = (keys, True, False, "columns")
        variants["one array of the row type"] = (today, False, True, "rows")
        variants["one JSON document"] = (today, False, True, "json")
        results: dict[str, list[dict[str, float | None]]] = {v: [] for v in variants}
        for rep in range(1, repeat + 1):
            for variant, (indexes, text, returning, shape) in variants.items():
                results[variant].append(await once(conn, events, args.batch, indexes, text,
                                                   returning, shape))
            log(SCENARIO, f"#{rep}: today {results['today'][-1]} µs an event")
        await conn.close()

    def median(variant: str, figure: str) -> float | None:
        xs = sorted(x for r in results[variant] if (x := r[figure]) is not None)
        return xs[len(xs) // 2] if xs else None

    return {"scenario": SCENARIO, "events": events, "batch": args.batch, "repetitions": repeat,
            "indexes_today": sorted(today),
            "median_us_per_event": {v: median(v, "wall") for v in variants},
            "median_client_cpu_us": {v: median(v, "client_cpu") for v in variants},
            "median_server_cpu_us": {v: median(v, "server_cpu") for v in variants},
            "repetitions_figures": results, "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    today = r["median_us_per_event"]["today"]
    rows = [(v, us, f"µs an event ({us - today:+.2f}); CPU client "
                    f"{r['median_client_cpu_us'][v]}, server {r['median_server_cpu_us'][v]}")
            for v, us in r["median_us_per_event"].items()]
    return table(f"The log's append: {r['events']} events, {r['batch']} a statement, median of "
                 f"{r['repetitions']}", rows)


if __name__ == "__main__":
    from bench.common import base_parser
    from ostinato import eventloop

    parser = base_parser(__doc__)
    parser.add_argument("--events", type=int, default=None)
    parser.add_argument("--batch", type=int, default=100)
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
