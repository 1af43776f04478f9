"""Worker registry: one row per (worker, scope), where scope is a tenant or '*' (shared).

The worker-gateway writes it (`touch` on claims, `seen` on heartbeats, `forget` on goodbye);
the dispatcher reads `live_capacity`. Liveness is `seen_at` within a TTL judged by the database
clock (pass `Clock.db_now()`; None means the database's own `now()`), the same rule as leases.

A worker id may appear under several scopes (the same process using two keys): the scopes are
separate rows, so a tenant worker's slots never count as another tenant's capacity.

The only module that reads the `workers` table: callers get typed rows, never records.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many

Q = load("ostinato.workers", "workers.sql")


class PoolCapacity(msgspec.Struct, frozen=True):
    """Declared slots of live workers in one pool; `tenant_id` None: shared workers."""

    tenant_id: uuid.UUID | None
    pool: str
    slots: int


class WorkerInfo(msgspec.Struct, frozen=True):
    """One registered worker under one scope, for display."""

    worker_id: str
    tenant_id: uuid.UUID | None  # None: a shared worker (admin key) serving every tenant
    pools: list[str]
    slots: int
    seen_at: datetime


async def touch(conn: asyncpg.Connection, worker_id: str, tenant_id: uuid.UUID | None,
                pools: Sequence[str], slots: int, now: datetime | None) -> None:
    """Record that the worker is alive with these pools and slots (one upsert)."""
    await conn.execute(Q["touch_worker"], worker_id, tenant_id, list(pools), slots, now)


async def seen(conn: asyncpg.Connection, worker_id: str, tenant_id: uuid.UUID | None,
               now: datetime | None) -> bool:
    """Refresh a registered worker's liveness only; False when it is not registered."""
    status = await conn.execute(Q["worker_seen"], worker_id, tenant_id, now)
    return status != "UPDATE 0"


async def forget(conn: asyncpg.Connection, worker_id: str, tenant_id: uuid.UUID | None) -> bool:
    """Remove a worker at once (graceful stop); False when it was not registered."""
    return await conn.fetchval(Q["forget_worker"], worker_id, tenant_id) is not None


async def forget_stale(conn: asyncpg.Connection, now: datetime | None,
                       older_than: timedelta) -> int:
    """Delete workers not seen for `older_than` (crashed ones never say goodbye)."""
    status = await conn.execute(Q["forget_stale_workers"], now, older_than)
    return int(status.split()[-1])


async def live_capacity(conn: asyncpg.Connection, now: datetime | None,
                        ttl: timedelta) -> list[PoolCapacity]:
    """Slots of workers seen within `ttl`, summed per (tenant scope, pool)."""
    return many(PoolCapacity, await conn.fetch(Q["live_capacity"], now, ttl))


async def list_workers(conn: asyncpg.Connection,
                       tenant_id: uuid.UUID | None) -> list[WorkerInfo]:
    """For display: a tenant's workers plus the shared ones; every worker for None (admin)."""
    return many(WorkerInfo, await conn.fetch(Q["list_workers"], tenant_id))
