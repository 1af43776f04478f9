"""Exclusion calendars: named sets of dates (bank holidays, freeze days) that schedules skip.
Each definition is an event on the calendar's own stream; the scheduler reads the read model."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import date

import asyncpg

from ostinato.domain import events as ev
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.stores import calendars as calendar_store

CALENDAR_NAMESPACE = uuid.UUID("2f0e3c1a-8d7b-4b4e-9a52-5b1d3c9e7f20")


def calendar_id(tenant_id: uuid.UUID, name: str) -> uuid.UUID:
    """One stream per (tenant, name): redefining a calendar appends to the same stream."""
    return uuid.uuid5(CALENDAR_NAMESPACE, f"{tenant_id}/{name}")


async def define_calendar(
    conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID, name: str,
    dates: Iterable[date], actor: str,
) -> calendar_store.CalendarRow:
    """Define or redefine (the dates replace the old ones) a tenant's calendar."""
    stream = calendar_id(tenant_id, name)
    async with conn.transaction():
        current = await calendar_store.lock(conn, tenant_id, stream)
        head = StreamHead(stream, tenant_id, current.version if current else 0)
        await store.append(conn, [head.next(ev.CalendarDefined(
            name=name, dates=sorted(set(dates))), actor)])
        defined = await calendar_store.by_name(conn, tenant_id, name)
        assert defined is not None  # just appended, in this transaction
        return defined


async def excluded_dates(
    conn: asyncpg.Connection, keys: Iterable[tuple[uuid.UUID, str]]
) -> dict[tuple[uuid.UUID, str], frozenset[date]]:
    """The dates of each (tenant, calendar name) asked for; unknown calendars exclude nothing."""
    wanted = set(keys)
    if not wanted:
        return {}
    rows = await calendar_store.dates_by_ids(conn, [calendar_id(t, n) for t, n in wanted])
    found = {(r.tenant_id, r.name): frozenset(r.dates) for r in rows}
    return {key: found.get(key, frozenset()) for key in wanted}
