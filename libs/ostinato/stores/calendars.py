"""The `calendars` read model: a tenant's exclusion calendars."""

from __future__ import annotations

import uuid
from datetime import date, datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "calendars.sql")


class CalendarRow(msgspec.Struct, frozen=True, kw_only=True):
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
