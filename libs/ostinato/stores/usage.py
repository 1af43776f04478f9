"""Usage accounting per tenant (`GET /v1/usage`): runs, attempts, worker-seconds, workflow steps
and output bytes (recorded on the completion events, so they outlive the outputs' retention)
from the run-event log, payload bytes from the blob store, by hour or day."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many

Q = load("ostinato.stores", "usage.sql")


class EventUsage(msgspec.Struct, frozen=True):
    bucket: datetime
    runs: int
    attempts: int
    workflow_steps: int
    worker_seconds: float
    output_bytes: int


class ByteUsage(msgspec.Struct, frozen=True):
    bucket: datetime
    payload_bytes: int


async def events_between(conn: asyncpg.Connection, tenant_id: uuid.UUID, start: datetime,
                         end: datetime, granularity: str) -> list[EventUsage]:
    return many(EventUsage, await conn.fetch(Q["usage_events"], tenant_id, start, end,
                                             granularity))


async def bytes_between(conn: asyncpg.Connection, tenant_id: uuid.UUID, start: datetime,
                        end: datetime, granularity: str) -> list[ByteUsage]:
    return many(ByteUsage, await conn.fetch(Q["usage_bytes"], tenant_id, start, end,
                                            granularity))
