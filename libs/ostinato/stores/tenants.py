"""The `tenants` read model: names, stream heads and each tenant's weight (keys: api_keys.py)."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "tenants.sql")


class TenantHead(msgspec.Struct, frozen=True):
    """A locked tenant row: enough to append to its stream."""

    id: uuid.UUID
    name: str
    weight: float
    version: int


class TenantRow(msgspec.Struct, frozen=True):
    id: uuid.UUID
    name: str
    weight: float
    created_at: datetime


class TenantWeight(msgspec.Struct, frozen=True):
    id: uuid.UUID
    name: str
    weight: float


async def id_by_name(conn: asyncpg.Connection, name: str) -> uuid.UUID | None:
    return await conn.fetchval(Q["tenant_by_name"], name)


async def lock(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> TenantHead | None:
    return one(TenantHead, await conn.fetchrow(Q["lock_tenant"], tenant_id))


async def weights(conn: asyncpg.Connection) -> list[TenantWeight]:
    return many(TenantWeight, await conn.fetch(Q["tenant_weights"]))


async def name_of(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> str | None:
    return await conn.fetchval(Q["tenant_name"], tenant_id)


async def page(conn: asyncpg.Connection, after: tuple[datetime | None, uuid.UUID | None],
               limit: int) -> list[TenantRow]:
    """Every tenant, newest first, strictly after the (created_at, id) cursor `after`."""
    return many(TenantRow, await conn.fetch(Q["tenants_page"], *after, limit))


async def created_since(conn: asyncpg.Connection, since: datetime | None) -> list[TenantRow]:
    """Tenants created at or after `since` (every tenant for None), oldest first."""
    return many(TenantRow, await conn.fetch(Q["tenants_created_since"], since))
