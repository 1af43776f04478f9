"""Tenants and API keys. Keys are random, shown once, and stored only as a SHA-256 hash (a
high-entropy key needs no slow hash); every request resolves its key to exactly one tenant."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass

import asyncpg

from ostinato.domain import events as ev
from ostinato.domain.errors import Conflict
from ostinato.domain.ids import new_id
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.stores import tenants

ADMIN = "admin"
TENANT_ROLE = "tenant"


@dataclass(frozen=True, slots=True)
class Principal:
    tenant_id: uuid.UUID | None  # None for the bootstrap admin
    role: str
    name: str


def new_api_key() -> str:
    return "ost_" + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


async def create_tenant(
    conn: asyncpg.Connection, store: EventStore, name: str, *, actor: str, weight: int = 1
) -> tuple[uuid.UUID, str]:
    """Create a tenant and its first API key; returns (tenant id, the key shown once)."""
    if await tenants.id_by_name(conn, name) is not None:
        raise Conflict(f"a tenant named {name!r} already exists", errors=[
            {"field": "name", "message": "already taken"}])
    tenant_id = new_id()
    key = new_api_key()
    try:
        async with conn.transaction():
            head = StreamHead(tenant_id, tenant_id)
            await store.append(conn, [
                head.next(ev.TenantCreated(name=name, weight=weight), actor),
                head.next(ev.ApiKeyIssued(key_hash=hash_key(key).hex(), role=TENANT_ROLE), actor),
            ])
    except asyncpg.UniqueViolationError as exc:  # a concurrent create with the same name won
        raise Conflict(f"a tenant named {name!r} already exists", errors=[
            {"field": "name", "message": "already taken"}]) from exc
    return tenant_id, key


async def authenticate(
    conn: asyncpg.Connection, key: str, admin_key: str
) -> Principal | None:
    if admin_key and hmac.compare_digest(key.encode(), admin_key.encode()):
        return Principal(tenant_id=None, role=ADMIN, name="admin")
    owner = await tenants.owner_of_key(conn, hash_key(key))
    if owner is None:
        return None
    return Principal(tenant_id=owner.tenant_id, role=owner.role, name=owner.name)
