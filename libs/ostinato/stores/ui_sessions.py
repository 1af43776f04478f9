"""The web UI's sessions (`ui_sessions`, migration 0049): kept in PostgreSQL so that any api
instance serves a browser whichever instance logged it in, and a restart logs nobody out. Rows
are found by the SHA-256 of the session token (the cookie's value), never by the token. The api
reads and writes them (services/api/ui/sessions.py); the reconciler's retention duty sweeps
the expired ones."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import one

Q = load("ostinato.stores", "ui_sessions.sql")
EXPIRE_BATCH = 1_000  # sessions deleted per sweep at most


class SessionRow(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID | None  # None: the admin key's session
    tenant: str
    role: str
    key_hash: bytes
    csrf: str
    acting_for: uuid.UUID | None
    flash: str | None


async def create(conn: asyncpg.Connection, token_hash: bytes, row: SessionRow,
                 now: datetime | None, *, idle: timedelta, max_age: timedelta) -> None:
    """A new session, expiring after `idle` without use or `max_age` in any case (`now`: the
    clock's `db_now()`, None for the database's own clock)."""
    await conn.execute(Q["ui_session_create"], token_hash, row.tenant_id, row.tenant, row.role,
                       row.key_hash, row.csrf, now, idle, max_age)


async def touch(conn: asyncpg.Connection, token_hash: bytes, now: datetime | None, *,
                idle: timedelta, max_age: timedelta,
                every: timedelta) -> SessionRow | None:
    """The live session (None: unknown or expired), its idle expiry pushed on in the same
    statement when it was last seen over `every` ago (not on every page: a write a page would
    cost a WAL flush for a minute's precision nobody needs)."""
    return one(SessionRow, await conn.fetchrow(Q["ui_session_touch"], token_hash, now, idle,
                                               max_age, every))


async def save(conn: asyncpg.Connection, token_hash: bytes, *,
               flash: str | None, flash_changed: bool,
               acting_for: uuid.UUID | None, acting_changed: bool) -> None:
    """What a request changed: only those fields are written (a page polled meanwhile by
    another request neither loses nor resurrects them)."""
    await conn.execute(Q["ui_session_save"], token_hash, flash, flash_changed, acting_for,
                       acting_changed)


async def drop(conn: asyncpg.Connection, token_hash: bytes) -> None:
    await conn.execute(Q["ui_session_drop"], token_hash)


async def expire(conn: asyncpg.Connection, now: datetime | None,
                 limit: int = EXPIRE_BATCH) -> int:
    """Delete up to `limit` sessions expired by `now` (None: the database's now()); how many."""
    status = await conn.execute(Q["ui_sessions_expire"], now, limit)
    return int(status.split()[-1])
