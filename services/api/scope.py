"""The one dependency every tenant route takes: who calls (tenant and actor), on which
connection, with which clock, store and settings. A route never opens its own connection or
reads the app state; a tenant's key is required here, so a route cannot forget the check."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
from litestar import Request
from litestar.di import NamedDependency

from ostinato.clock import Clock
from ostinato.eventlog.store import EventStore
from ostinato.runtime.auth import actor_of, require_tenant
from ostinato.runtime.settings import Settings
from ostinato.tenancy import Principal


@dataclass(frozen=True, slots=True)
class TenantScope:
    tenant_id: uuid.UUID
    actor: str  # how the audit trail names the caller: "tenant:<name>"
    conn: asyncpg.Connection
    clock: Clock
    store: EventStore
    settings: Settings


async def tenant_scope(request: Request,
                       caller: NamedDependency[Principal]) -> AsyncIterator[TenantScope]:
    tenant = require_tenant(caller)
    state = request.app.state
    async with state.pool.acquire() as conn:
        yield TenantScope(tenant_id=tenant.tenant_id, actor=actor_of(tenant), conn=conn,
                          clock=state.clock, store=state.store, settings=state.settings)


Tenant = NamedDependency[TenantScope]
