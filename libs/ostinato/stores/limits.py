"""What caps dispatch: a tenant's limits, the pool pauses a caller may see and the waiting load
per (tenant, pool, class), for display; every limit and pause, for the dispatcher; the locked
head a pool pause's writer appends from."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "limits.sql")


class LimitRow(msgspec.Struct, frozen=True):
    scope: str  # tenant | task | resource
    name: str
    max_concurrency: int | None
    rate_per_second: float | None
    burst: float | None
    updated_at: datetime


class PoolControlRow(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID | None  # None: an operator's pause of the pool for every tenant
    pool: str
    paused: bool
    reason: str | None
    actor: str
    changed_at: datetime


class WaitingLoad(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    pool: str
    priority: str
    depth: int
    oldest: datetime


class InFlight(msgspec.Struct, frozen=True):
    """Runs holding a dispatch slot (queued, not yet claimed, or running) per group."""

    tenant_id: uuid.UUID
    pool: str
    priority: str
    task: str
    concurrency_key: str | None
    n: int


async def of_tenant(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> list[LimitRow]:
    return many(LimitRow, await conn.fetch(Q["limits_of_tenant"], tenant_id))


async def pool_controls(conn: asyncpg.Connection,
                        visible_to: uuid.UUID | None) -> list[PoolControlRow]:
    """Every operator pause and `visible_to`'s own (every tenant's, for None: the admin)."""
    return many(PoolControlRow, await conn.fetch(Q["pool_controls_visible"], visible_to))


async def waiting_load(conn: asyncpg.Connection) -> list[WaitingLoad]:
    return many(WaitingLoad, await conn.fetch(Q["waiting_depth"]))


async def in_flight(conn: asyncpg.Connection) -> list[InFlight]:
    """From the narrow read model `run_slots`, which every state change keeps in step."""
    return many(InFlight, await conn.fetch(Q["in_flight_runs"]))


class Limit(msgspec.Struct, frozen=True):
    """A limit as the dispatcher applies it."""

    tenant_id: uuid.UUID
    scope: str
    name: str
    max_concurrency: int | None
    rate_per_second: float | None
    burst: float | None


class PausedPool(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID | None  # None: paused for every tenant
    pool: str
    reason: str | None
    actor: str
    changed_at: datetime


class PoolControlHead(msgspec.Struct, frozen=True):
    id: uuid.UUID
    paused: bool
    version: int


async def every_limit(conn: asyncpg.Connection) -> list[Limit]:
    return many(Limit, await conn.fetch(Q["all_limits"]))


async def paused_pools(conn: asyncpg.Connection) -> list[PausedPool]:
    return many(PausedPool, await conn.fetch(Q["paused_pools"]))


async def lock_pool_control(conn: asyncpg.Connection,
                            stream_id: uuid.UUID) -> PoolControlHead | None:
    """The pool stream's head, locked; None before its first pause."""
    return one(PoolControlHead, await conn.fetchrow(Q["lock_pool_control"], stream_id))
