"""What the attempt checks share: lock the runs a sweep found, append the events a pure
decision gives for each (numbered by the run's head), end their leases, count the outcomes."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import asyncpg

from ostinato import outcomes
from ostinato.domain import events as ev
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.leases import attempts as attempt_leases
from ostinato.stores import runs
from ostinato.stores.runs import LockedRun
from ostinato.telemetry.logging import get_logger

ACTOR = "reconciler"
log = get_logger("ostinato.reconciler")


def append_to(events: list[NewEvent], row: LockedRun, new: list[ev.Event]) -> None:
    """The run's new events, numbered from its locked head and carrying its trace."""
    head = StreamHead.of(row)
    events.extend(head.next(event, ACTOR, traceparent=row.traceparent) for event in new)


async def per_run(pool: asyncpg.Pool, store: EventStore,
                  find: Callable[[asyncpg.Connection], Awaitable[list[uuid.UUID]]],
                  decide: Callable[[LockedRun], list[ev.Event]],
                  end_lease: bool) -> int:
    """In one transaction: the run ids `find` gives, locked, each given the events `decide`
    returns for its locked row (and, with `end_lease`, its lease ended); how many runs got
    events."""
    async with pool.acquire() as conn, conn.transaction():
        ids = await find(conn)
        if not ids:
            return 0
        events: list[NewEvent] = []
        for row in await runs.lock(conn, ids):
            append_to(events, row, decide(row))
        await store.append(conn, events)
        if end_lease:
            await attempt_leases.release_leases(conn, ids)
    observe(events)
    return len({e.stream_id for e in events})


def observe(events: list[NewEvent]) -> None:
    for e in events:
        outcomes.observe(e.tenant_id, e.stream_id, e.event)
