"""What the attempt checks share: lock the runs a query found, append the events a pure
decision gives for each (numbered by the run's head), end their leases, count the outcomes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import asyncpg

from ostinato import outcomes
from ostinato.db.queries import load
from ostinato.domain import events as ev
from ostinato.eventlog.readmodels import Q
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.telemetry.logging import get_logger

LQ = load("ostinato.leases", "leases.sql")
ACTOR = "reconciler"
log = get_logger("ostinato.reconciler")


def append_to(events: list[NewEvent], row: Mapping[str, Any], new: list[ev.Event]) -> None:
    head = StreamHead.of(row)
    events.extend(head.next(event, ACTOR, traceparent=row["traceparent"]) for event in new)


async def per_run(pool: asyncpg.Pool, store: EventStore, query: str, args: tuple[Any, ...],
                  decide: Callable[[Mapping[str, Any]], list[ev.Event]],
                  end_lease: bool) -> int:
    async with pool.acquire() as conn, conn.transaction():
        ids = [r["id"] for r in await conn.fetch(query, *args)]
        if not ids:
            return 0
        rows = await conn.fetch(Q["lock_runs"], ids)
        events: list[NewEvent] = []
        for row in rows:
            append_to(events, row, decide(row))
        await store.append(conn, events)
        if end_lease:
            await conn.execute(LQ["release_leases"], ids)
    observe(events)
    return len({e.stream_id for e in events})


def observe(events: list[NewEvent]) -> None:
    for e in events:
        outcomes.observe(e.tenant_id, e.stream_id, e.event)
