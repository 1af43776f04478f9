"""The one dependency every tenant route takes: who calls (tenant and actor), on which
connection, with which clock, store and settings. A route never opens its own connection or
reads the app state; a tenant's key is required here, so a route cannot forget the check. A
control action's work runs in one transaction with its audit row (`auditing.recorded`)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
from litestar import Request
from litestar.di import NamedDependency

from ostinato.clock import Clock
from ostinato.domain.errors import Forbidden, InvalidInput, NotFound
from ostinato.domain.roles import Principal
from ostinato.eventlog.store import EventStore
from ostinato.runtime.auth import actor_of, require_tenant
from ostinato.runtime.settings import Settings
from ostinato.stores import tenants
from services.api import auditing
from services.api.archived import Archive, archive_of
from services.api.auditing import Audit


@dataclass(frozen=True, slots=True)
class TenantScope:
    tenant_id: uuid.UUID
    actor: str  # how the audit trail names the caller (runtime.auth.actor_of)
    conn: asyncpg.Connection
    clock: Clock
    store: EventStore
    settings: Settings
    audit: Audit  # what a control action adds to its audit row (services.api.auditing)
    archive: Archive | None = None  # archived runs read back (services.api.archived)


ACT_FOR_TENANT = "x-ostinato-tenant"  # the admin key acting on one tenant's resources


async def tenant_scope(request: Request,
                       caller: NamedDependency[Principal]) -> AsyncIterator[TenantScope]:
    state = request.app.state
    async with state.pool.acquire() as conn:
        try:
            tenant_id = await _acting_for(conn, request, caller)
        except Forbidden as exc:  # a tenant's key naming another tenant
            await auditing.refused(request, caller, exc)
            raise
        async with auditing.recorded(conn, request, caller, tenant_id) as audit:
            yield TenantScope(tenant_id=tenant_id, actor=actor_of(caller), conn=conn,
                              clock=state.clock, store=state.store, settings=state.settings,
                              audit=audit, archive=archive_of(state))


async def tenant_of(request: Request, caller: Principal) -> uuid.UUID:
    """The tenant a route without `TenantScope` acts for, checked as `tenant_scope` does, on a
    connection held only for that check (a long poll holds none while it waits)."""
    if caller.tenant_id is not None and not request.headers.get(ACT_FOR_TENANT):
        return caller.tenant_id
    async with request.app.state.pool.acquire() as conn:
        try:
            return await _acting_for(conn, request, caller)
        except Forbidden as exc:
            await auditing.refused(request, caller, exc)
            raise


async def _acting_for(conn: asyncpg.Connection, request: Request, caller: Principal) -> uuid.UUID:
    """The caller's tenant; for the admin key, the tenant it names in X-Ostinato-Tenant (the
    operator UI acts on any tenant's runs; every event it writes names the actor "admin")."""
    named = request.headers.get(ACT_FOR_TENANT)
    if caller.tenant_id is not None:
        if named and named != str(caller.tenant_id):
            raise Forbidden(f"a tenant's key acts for its own tenant only ({ACT_FOR_TENANT})")
        return caller.tenant_id
    if not named:
        return require_tenant(caller).tenant_id  # raises: the admin names no tenant
    try:
        tenant_id = uuid.UUID(named)
    except ValueError:
        raise InvalidInput(f"{ACT_FOR_TENANT} must be a tenant id", errors=[
            {"field": ACT_FOR_TENANT, "message": "not a UUID"}]) from None
    if await tenants.name_of(conn, tenant_id) is None:
        raise NotFound(f"no tenant {tenant_id}")
    return tenant_id


Tenant = NamedDependency[TenantScope]
