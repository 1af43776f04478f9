"""The `audit` trail: one row per attempt at a control action through the API (who, for which
tenant, which request, on what, how it ended, before and after). Insert and read only: the
table refuses UPDATE and DELETE (migration 0027)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many

Q = load("ostinato.stores", "audit.sql")


class AuditRow(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID | None
    caller_tenant_id: uuid.UUID | None
    key_id: uuid.UUID | None
    key_name: str
    role: str
    actor: str
    request_id: str
    action: str
    target_kind: str
    target_id: str
    status: int
    outcome: str
    detail: str
    before: Any
    after: Any
    recorded_at: datetime


class Filter(msgspec.Struct, frozen=True):
    action: str | None = None
    key_id: uuid.UUID | None = None
    target_kind: str | None = None
    target_id: str | None = None
    request_id: str | None = None
    since: datetime | None = None  # recorded at or after
    until: datetime | None = None  # recorded before


async def record(conn: asyncpg.Connection, *, id: uuid.UUID, tenant_id: uuid.UUID | None,
                 caller_tenant_id: uuid.UUID | None, key_id: uuid.UUID | None, key_name: str,
                 role: str, actor: str, request_id: str, action: str, target_kind: str,
                 target_id: str, status: int, outcome: str, detail: str, before: Any,
                 after: Any) -> None:
    await conn.execute(Q["record_audit"], id, tenant_id, caller_tenant_id, key_id, key_name,
                       role, actor, request_id, action, target_kind, target_id, status,
                       outcome, detail, before, after)


async def page(conn: asyncpg.Connection, tenant_id: uuid.UUID | None, where: Filter, *,
               after: tuple[datetime | None, uuid.UUID | None], limit: int) -> list[AuditRow]:
    """Newest first, strictly after the (recorded_at, id) cursor; `tenant_id` None reads every
    tenant's (the admin key without X-Ostinato-Tenant)."""
    query = Q["list_audit"] if tenant_id is not None else Q["list_audit_all"]
    return many(AuditRow, await conn.fetch(
        query, tenant_id, where.action, where.key_id,
        where.target_kind, where.target_id, where.request_id, where.since, where.until, *after,
        limit))
