"""The `api_keys` read model (and `api_key_use`): which key authenticates as whom, and a
tenant's keys as operators see them. Keys are written only by the projector, and stored only
as `hash_key(key)`."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "api_keys.sql")


class KeyOwner(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    role: str
    name: str
    pools: list[str]
    tenant_name: str


class KeyRow(msgspec.Struct, frozen=True):
    id: uuid.UUID
    name: str
    role: str
    pools: list[str]
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None


def hash_key(key: str) -> bytes:
    """A key as stored and looked up: SHA-256 (a high-entropy key needs no slow hash, and a
    lookup by hash leaks nothing through its timing)."""
    return hashlib.sha256(key.encode()).digest()


async def authenticate(conn: asyncpg.Connection, key_hash: bytes,
                       now: datetime) -> KeyOwner | None:
    return one(KeyOwner, await conn.fetchrow(Q["authenticate"], key_hash, now))


async def list_keys(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                    limit: int = 1000) -> list[KeyRow]:
    return many(KeyRow, await conn.fetch(Q["list_keys"], tenant_id, limit))


async def get_key(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                  key_id: uuid.UUID) -> KeyRow | None:
    return one(KeyRow, await conn.fetchrow(Q["get_key"], tenant_id, key_id))


async def operators_left(conn: asyncpg.Connection, tenant_id: uuid.UUID, key_id: uuid.UUID,
                         at: datetime) -> int:
    return await conn.fetchval(Q["count_operators_left"], tenant_id, key_id, at)
