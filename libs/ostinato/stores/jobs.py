"""The `jobs` read model: one job of a tenant and a page of them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "jobs.sql")


class JobRow(msgspec.Struct, frozen=True, kw_only=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    task: str
    status: str  # active | paused | deleted | finished
    schedule: dict[str, Any]  # ostinato.schedules document
    payload_ref: uuid.UUID
    pool: str
    priority: str
    idempotency_key: str | None
    traceparent: str | None
    next_run_at: datetime | None
    last_run_at: datetime | None
    runs_created: int
    created_at: datetime
    updated_at: datetime
    version: int
    kind: str
    next_slot: datetime | None
    calendar: str | None
    overlap: str
    resume_policy: str | None
    consecutive_failures: int
    paused_at: datetime | None
    retry_policy: Any
    timeout_seconds: float | None
    queue_wait_seconds: float | None
    on_queue_wait: str | None
    shard: int
    concurrency_key: str | None
    resource: str | None


async def by_id(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                job_id: uuid.UUID) -> JobRow | None:
    return one(JobRow, await conn.fetchrow(Q["job_by_id"], job_id, tenant_id))


async def by_idempotency_key(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                             key: str) -> JobRow | None:
    return one(JobRow, await conn.fetchrow(Q["job_by_idempotency_key"], tenant_id, key))


async def page(conn: asyncpg.Connection, tenant_id: uuid.UUID, *, status: str | None,
               after: tuple[datetime | None, uuid.UUID | None], limit: int) -> list[JobRow]:
    """Newest first, strictly after the (created_at, id) cursor `after`."""
    return many(JobRow, await conn.fetch(Q["list_jobs"], tenant_id, status, *after, limit))
