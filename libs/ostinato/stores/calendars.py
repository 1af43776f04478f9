"""The `calendars` read model: a tenant's exclusion calendars, the locked head their writer
appends from, and the batch lookups of the scheduler and of batch submission."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import date, datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "calendars.sql")


class CalendarRow(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    dates: list[date]
    created_at: datetime
    updated_at: datetime
    version: int


async def by_name(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                  name: str) -> CalendarRow | None:
    return one(CalendarRow, await conn.fetchrow(Q["calendar_by_name"], tenant_id, name))


async def all_of(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> list[CalendarRow]:
    return many(CalendarRow, await conn.fetch(Q["list_calendars"], tenant_id))


class CalendarHead(msgspec.Struct, frozen=True):
    id: uuid.UUID
    version: int


class CalendarDates(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    name: str
    dates: list[date]


async def lock(conn: asyncpg.Connection, tenant_id: uuid.UUID,
               calendar_id: uuid.UUID) -> CalendarHead | None:
    return one(CalendarHead, await conn.fetchrow(Q["lock_calendar"], calendar_id, tenant_id))


async def dates_by_ids(conn: asyncpg.Connection,
                       calendar_ids: Sequence[uuid.UUID]) -> list[CalendarDates]:
    return many(CalendarDates, await conn.fetch(Q["calendars_by_id"], list(calendar_ids)))


async def existing_names(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                         names: Sequence[str]) -> set[str]:
    """Which of `names` the tenant has defined."""
    return {r["name"] for r in await conn.fetch(Q["calendar_names"], tenant_id, list(names))}
