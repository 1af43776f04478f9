"""The `run_signals` read model: signals sent to a run, kept until a wait of their name takes
them (`delivered_seq`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "signals.sql")


class PendingSignal(msgspec.Struct, frozen=True):
    run_id: uuid.UUID
    signal_id: uuid.UUID
    name: str
    payload: Any  # None when kept in the blob store (`payload_ref`)
    received_at: datetime
    payload_ref: uuid.UUID | None


class SignalRow(msgspec.Struct, frozen=True):
    run_id: uuid.UUID
    signal_id: uuid.UUID
    name: str
    payload: Any  # None when kept in the blob store (`payload_ref`)
    received_at: datetime
    delivered_seq: int | None
    payload_ref: uuid.UUID | None


async def pending(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID],
                  names: Sequence[str]) -> dict[tuple[uuid.UUID, str], PendingSignal]:
    """The oldest undelivered signal per (run, name) among those asked for."""
    rows = many(PendingSignal, await conn.fetch(Q["pending_signals"], list(run_ids),
                                                list(names)))
    return {(s.run_id, s.name): s for s in rows}


async def by_id(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID,
                signal_id: uuid.UUID) -> SignalRow | None:
    return one(SignalRow, await conn.fetchrow(Q["signal_by_id"], run_id, signal_id, tenant_id))


async def database_now(conn: asyncpg.Connection) -> datetime:
    """The database clock, for a due time computed from "now" (the one time authority)."""
    return await conn.fetchval(Q["database_now"])
