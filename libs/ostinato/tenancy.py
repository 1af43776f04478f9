"""Tenants and API keys, the commands. Keys are random, shown once, and stored only as their
hash (`stores.api_keys.hash_key`); every request resolves its key to exactly one tenant and one
role (`runtime.auth.authenticate`, a `domain.roles.Principal`). A tenant has any number of keys;
a key is revoked, or rotated (a new key with the same name, role and pools, the old one revoked
at the end of a grace period)."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from ostinato.domain import events as ev
from ostinato.domain import roles
from ostinato.domain.errors import Conflict, InvalidInput, NotFound
from ostinato.domain.ids import new_id
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.stores import api_keys, tenants
from ostinato.stores.api_keys import hash_key

MAX_ROTATION_GRACE = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A key as issued: the only time its secret is known."""

    key_id: uuid.UUID
    key: str
    name: str
    role: str
    pools: list[str]


def new_api_key() -> str:
    return "ost_" + secrets.token_urlsafe(32)


def _issue(*, name: str, role: str, pools: list[str],
           rotated_from: uuid.UUID | None = None) -> tuple[IssuedKey, ev.ApiKeyIssued]:
    key, key_id = new_api_key(), new_id()
    event = ev.ApiKeyIssued(key_hash=hash_key(key).hex(), role=role, key_id=key_id, name=name,
                            pools=pools, rotated_from=rotated_from)
    return IssuedKey(key_id, key, name, role, pools), event


async def create_tenant(
    conn: asyncpg.Connection, store: EventStore, name: str, *, actor: str, weight: int = 1
) -> tuple[uuid.UUID, str]:
    """Create a tenant and its first key, an operator's; returns (tenant id, the key shown
    once)."""
    if await tenants.id_by_name(conn, name) is not None:
        raise Conflict(f"a tenant named {name!r} already exists", errors=[
            {"field": "name", "message": "already taken"}])
    tenant_id = new_id()
    head = StreamHead(tenant_id, tenant_id)
    issued, issue = _issue(name="", role=roles.OPERATOR, pools=[])
    try:
        async with conn.transaction():
            await store.append(conn, [
                head.next(ev.TenantCreated(name=name, weight=weight), actor),
                head.next(issue, actor),
            ])
    except asyncpg.UniqueViolationError as exc:  # a concurrent create with the same name won
        raise Conflict(f"a tenant named {name!r} already exists", errors=[
            {"field": "name", "message": "already taken"}]) from exc
    return tenant_id, issued.key


async def _locked_head(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> StreamHead:
    tenant = await tenants.lock(conn, tenant_id)
    if tenant is None:
        raise NotFound(f"no tenant {tenant_id}")
    return StreamHead(tenant_id, tenant_id, tenant.version)


def _check_role(role: str, pools: list[str]) -> None:
    if role not in roles.TENANT_ROLES:
        raise InvalidInput(f"unknown role {role!r}", errors=[{
            "field": "role", "message": f"one of {', '.join(roles.TENANT_ROLES)}"}])
    if pools and role != roles.WORKER:
        raise InvalidInput("only a worker key is limited to pools", errors=[{
            "field": "pools", "message": "give pools with role worker only"}])


async def issue_key(conn: asyncpg.Connection, store: EventStore, tenant_id: uuid.UUID, *,
                    name: str, role: str, pools: list[str], actor: str) -> IssuedKey:
    _check_role(role, pools)
    async with conn.transaction():
        head = await _locked_head(conn, tenant_id)
        issued, issue = _issue(name=name, role=role, pools=pools)
        await store.append(conn, [head.next(issue, actor)])
    return issued


async def _live_key(conn: asyncpg.Connection, tenant_id: uuid.UUID, key_id: uuid.UUID,
                    now: datetime) -> api_keys.KeyRow:
    row = await api_keys.get_key(conn, tenant_id, key_id)
    if row is None:
        raise NotFound(f"no API key {key_id}")
    if row.revoked_at is not None and row.revoked_at <= now:
        raise Conflict(f"API key {key_id} is already revoked (at {row.revoked_at.isoformat()})")
    return row


async def _not_the_last_way_in(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                               row: api_keys.KeyRow, at: datetime) -> None:
    if roles.canonical(row.role) == roles.OPERATOR and \
            await api_keys.operators_left(conn, tenant_id, row.id, at) == 0:
        raise Conflict(f"API key {row.id} is the tenant's last operator key: issue another "
                       "operator key first (or rotate this one)")


async def revoke_key(conn: asyncpg.Connection, store: EventStore, tenant_id: uuid.UUID,
                     key_id: uuid.UUID, *, now: datetime, actor: str,
                     reason: str = "") -> api_keys.KeyRow:
    async with conn.transaction():
        head = await _locked_head(conn, tenant_id)
        row = await _live_key(conn, tenant_id, key_id, now)
        await _not_the_last_way_in(conn, tenant_id, row, now)
        await store.append(conn, [head.next(
            ev.ApiKeyRevoked(key_id=key_id, effective_at=now, reason=reason), actor)])
    return row


async def rotate_key(conn: asyncpg.Connection, store: EventStore, tenant_id: uuid.UUID,
                     key_id: uuid.UUID, *, now: datetime, grace: timedelta,
                     actor: str) -> tuple[IssuedKey, datetime]:
    """A new key in the old one's place; the old one works until the returned instant."""
    if not timedelta(0) <= grace <= MAX_ROTATION_GRACE:
        raise InvalidInput("the grace period is 0 to 7 days", errors=[{
            "field": "grace_seconds", "message": "between 0 and 604800"}])
    async with conn.transaction():
        head = await _locked_head(conn, tenant_id)
        row = await _live_key(conn, tenant_id, key_id, now)
        issued, issue = _issue(name=row.name, role=roles.canonical(row.role),
                               pools=list(row.pools), rotated_from=key_id)
        ends = now + grace
        await store.append(conn, [
            head.next(issue, actor),
            head.next(ev.ApiKeyRevoked(key_id=key_id, effective_at=ends, reason="rotated"),
                      actor),
        ])
    return issued, ends

