"""Bearer API-key authentication as a Litestar dependency; every route gets a Principal."""

from __future__ import annotations

import structlog
from litestar import Request
from litestar.di import NamedDependency

from ostinato.domain.errors import Forbidden, Unauthorized
from ostinato.tenancy import ADMIN, Principal, authenticate

Caller = NamedDependency[Principal]


async def principal(request: Request) -> Principal:
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("send an API key as 'Authorization: Bearer <key>'")
    state = request.app.state
    async with state.pool.acquire() as conn:
        found = await authenticate(conn, key.strip(), state.settings.admin_key)
    if found is None:
        raise Unauthorized("unknown API key")
    if found.tenant_id is not None:
        structlog.contextvars.bind_contextvars(tenant_id=str(found.tenant_id))
    return found


def actor_of(p: Principal) -> str:
    """How the audit trail names a caller: "admin", or "tenant:<name>"."""
    return "admin" if p.tenant_id is None else f"tenant:{p.name}"


def require_tenant(p: Principal) -> Principal:
    if p.tenant_id is None:
        raise Forbidden("this call needs a tenant's API key, not the admin key")
    return p


def require_admin(p: Principal) -> Principal:
    if p.role != ADMIN:
        raise Forbidden("this call needs the admin key")
    return p
