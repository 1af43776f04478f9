"""Bearer API-key authentication and role checks as a Litestar dependency; every route gets a
Principal (`domain.roles`) allowed to do what the route does. A key is the bootstrap admin's or
one the `api_keys` read model knows by its hash (`authenticate`; issued by `ostinato.tenancy`).

What a route does is its handler's `opt["action"]` (`ostinato.domain.roles`), inherited from
its router or app (the worker gateway says `WORK` once for all its routes), else `READ` for a
GET and `OPERATE` for any other method. So a route cannot forget the check, and a new route is
open to operators only until it says otherwise.
"""

from __future__ import annotations

import hmac
from datetime import datetime

import asyncpg
import structlog
from litestar import Request
from litestar.di import NamedDependency

from ostinato.domain import roles
from ostinato.domain.errors import Forbidden, Unauthorized
from ostinato.domain.roles import ADMIN, Principal
from ostinato.runtime.instants import raise_pending
from ostinato.stores import api_keys
from ostinato.stores.api_keys import hash_key

Caller = NamedDependency[Principal]


def action_of(request: Request) -> str:
    return request.route_handler.opt.get("action") or roles.default_action(request.method)


async def principal(request: Request) -> Principal:
    """The caller, authenticated and authorized; then a date-time error the body held
    (`instants.raise_pending`)."""
    found = authorize(await authenticated(request), action_of(request))
    raise_pending(request)
    return found


async def authenticated(request: Request) -> Principal:
    """Who calls (401 if nobody known), before any role check."""
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("send an API key as 'Authorization: Bearer <key>'")
    state = request.app.state
    async with state.pool.acquire() as conn:
        found = await authenticate(conn, key.strip(), state.settings.admin_key,
                                   state.clock.now())
    if found is None:
        raise Unauthorized("unknown or revoked API key")
    if found.tenant_id is not None:
        structlog.contextvars.bind_contextvars(tenant_id=str(found.tenant_id))
    return found


async def authenticate(
    conn: asyncpg.Connection, key: str, admin_key: str, now: datetime
) -> Principal | None:
    """The caller a key stands for, None for an unknown or revoked key."""
    if admin_key and hmac.compare_digest(key.encode(), admin_key.encode()):
        return Principal(tenant_id=None, role=ADMIN, name="admin")
    owner = await api_keys.authenticate(conn, hash_key(key), now)
    if owner is None:
        return None
    return Principal(tenant_id=owner.tenant_id, role=roles.canonical(owner.role),
                     name=owner.tenant_name, key_id=owner.id, key_name=owner.name,
                     pools=tuple(owner.pools))


def authorize(p: Principal, action: str) -> Principal:
    if not roles.may(p.role, action):
        raise Forbidden(roles.refusal(p.role, action))
    return p


def actor_of(p: Principal) -> str:
    """How the audit trail names a caller: "admin", "tenant:<name>" for a tenant's first key,
    "tenant:<name>/<key name>" for a named one."""
    if p.tenant_id is None:
        return "admin"
    return f"tenant:{p.name}/{p.key_name}" if p.key_name else f"tenant:{p.name}"


def require_tenant(p: Principal) -> Principal:
    if p.tenant_id is None:
        raise Forbidden("this call needs a tenant's API key, not the admin key (or name the "
                        "tenant in the X-Ostinato-Tenant header)")
    return p


def require_admin(p: Principal) -> Principal:
    if p.role != ADMIN:
        raise Forbidden("this call needs the admin key")
    return p
