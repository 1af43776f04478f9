"""The `dead_letters` read model (with the run's payload and last error): the queue of one
tenant, filtered and paged, its counts, and one letter."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "dead_letters.sql")


class DeadLetterRow(msgspec.Struct, frozen=True):
    run_id: uuid.UUID
    tenant_id: uuid.UUID
    job_id: uuid.UUID
    task: str
    reason: str  # permanent | exhausted | queue_wait_expired
    error_type: str | None
    message: str | None
    attempts: int
    dead_lettered_at: datetime
    triage_state: str
    triage_by: str | None
    triage_comment: str | None
    triaged_at: datetime | None
    replays: int
    last_replay_run: uuid.UUID | None
    payload_ref: uuid.UUID
    last_error: Any


class Filter(msgspec.Struct, frozen=True):
    job_id: uuid.UUID | None = None
    error_type: str | None = None
    triage_state: str | None = None
    dead_lettered_before: datetime | None = None

    def args(self) -> tuple[Any, ...]:
        return self.job_id, self.error_type, self.triage_state, self.dead_lettered_before


class Count(msgspec.Struct, frozen=True):
    error_type: str | None
    triage_state: str
    n: int


async def page(conn: asyncpg.Connection, tenant_id: uuid.UUID, where: Filter, *,
               after: tuple[datetime | None, uuid.UUID | None] = (None, None),
               limit: int) -> list[DeadLetterRow]:
    """Newest first, strictly after the (dead_lettered_at, run_id) cursor `after`."""
    return many(DeadLetterRow, await conn.fetch(Q["list_dead_letters"], tenant_id, *where.args(),
                                                *after, limit))


async def counts(conn: asyncpg.Connection, tenant_id: uuid.UUID, where: Filter) -> list[Count]:
    return many(Count, await conn.fetch(Q["dead_letter_counts"], tenant_id, *where.args()))


async def by_id(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                run_id: uuid.UUID) -> DeadLetterRow | None:
    return one(DeadLetterRow, await conn.fetchrow(Q["dead_letter_by_id"], run_id, tenant_id))
