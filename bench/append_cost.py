"""What one event costs the log, and what each choice around its row adds: the append's index
entries, its `json` column, its `RETURNING`. A run writes six events, so a microsecond here is
six a run (issue 19).

No services: a fresh migrated database, and a scratch table shaped as `events` (its columns,
defaults and indexes read from the catalogue, so it follows the schema), filled the way
`eventlog.sql`'s `append_events` fills the log: --batch events a statement (100, as the
scheduler's and the gateway's batches), each statement its own transaction, --events in all
(30,000; --quick 10,000).

    .venv/bin/python -m bench.append_cost [--quick] [--events 30000] [--repeat 3]

Variants (interleaved in each repetition, medians over the repetitions): `today`; then one
change each: without one of the indexes, `data` as `text` (not checked as JSON), no
`RETURNING`; and `bare`, only the primary key (the optimistic-concurrency check) and `seq`'s
key, `text`, no `RETURNING`. Figures: µs an event as the client sees the statement on loopback
(server work, commit and round trip, the event's share of the batch).
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg

from bench.common import log, machine, migrated_database, table, write_result
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


async def once(conn: asyncpg.Connection, events: int, batch: int, indexes: dict[str, str],
               text: bool, returning: bool) -> float:
    """µs an event for one variant."""
    await conn.execute("DROP TABLE IF EXISTS scratch")
    await conn.execute("CREATE TABLE scratch (LIKE events INCLUDING DEFAULTS)")
    if text:
        await conn.execute("ALTER TABLE scratch ALTER COLUMN data TYPE text")
    for name, definition in indexes.items():
        await conn.execute(definition.replace(f" {name} ON public.events ",
                                              f" {name}_scratch ON scratch "))
    statement = await conn.prepare(INSERT.format(cast="" if text else "::json",
                                                 returning=RETURNING if returning else ""))
    tenant, spent = uuid.uuid4(), 0.0
    for start in range(0, events, batch):
        n = min(batch, events - start)
        args = ([new_id() for _ in range(n)], [1] * n, ["run"] * n, [tenant] * n,
                [new_id() for _ in range(n)], ["RunX"] * n, [DATA[i % 5] for i in range(n)],
                ["scheduler"] * n, [None] * n, [TRACEPARENT] * n, datetime.now(UTC))
        began = time.perf_counter()
        await statement.fetch(*args)
        spent += time.perf_counter() - began
    await conn.execute("DROP TABLE scratch")
    return round(spent / events * 1e6, 2)


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
        variants: dict[str, tuple[dict[str, str], bool, bool]] = {"today": (today, False, True)}
        for index in today:
            variants[f"without {index}"] = ({k: v for k, v in today.items() if k != index},
                                            False, True)
        variants["data as text"] = (today, True, True)
        variants["no RETURNING"] = (today, False, False)
        variants["bare"] = (keys, True, False)
        results: dict[str, list[float]] = {v: [] for v in variants}
        for rep in range(1, repeat + 1):
            for variant, (indexes, text, returning) in variants.items():
                results[variant].append(await once(conn, events, args.batch, indexes, text,
                                                   returning))
            log(SCENARIO, f"#{rep}: today {results['today'][-1]} µs an event")
        await conn.close()
    median = {v: sorted(xs)[len(xs) // 2] for v, xs in results.items()}
    return {"scenario": SCENARIO, "events": events, "batch": args.batch, "repetitions": repeat,
            "indexes_today": sorted(today), "median_us_per_event": median,
            "repetitions_figures": results, "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    today = r["median_us_per_event"]["today"]
    rows = [(v, us, f"µs an event ({us - today:+.2f})")
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
