"""Route handlers for fair dispatch: pools (load, pause, resume) and limits (docs/FAIRNESS.md).

Pausing with the admin key pauses the pool for every tenant (an operator draining a fragile
dependency); with a tenant's key it pauses that tenant's own queue in the pool. Both are
recorded as events and undone by resume.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Annotated, Any

import asyncpg
import msgspec
from litestar import Request, get, post, put
from litestar.params import FromPath, JSONBody, PathParameter

from ostinato import dispatch_controls as controls
from ostinato.domain import events as ev
from ostinato.domain import roles
from ostinato.domain.errors import NotFound
from ostinato.domain.names import POOL_NAME_PATTERN
from ostinato.domain.roles import Principal
from ostinato.eventlog.store import EventStore
from ostinato.runtime.auth import Caller, actor_of, require_admin
from ostinato.stores import limits
from ostinato.wire.api import (
    ApiRateRequest,
    ClassLoad,
    LimitRequest,
    Limits,
    LimitSet,
    LimitView,
    PoolPaused,
    PoolPauseRequest,
    Pools,
    PoolView,
    Workers,
    WorkerView,
)
from ostinato.workers import registry
from services.api import auditing
from services.api.auditing import Audit, audited
from services.api.routes import app_state
from services.api.scope import Tenant

PoolName = Annotated[str, PathParameter(pattern=POOL_NAME_PATTERN)]
LimitName = Annotated[str, PathParameter(pattern=r"^[A-Za-z0-9][\w.:-]{0,199}$")]


def _known_pool(request: Request, pool: str) -> None:
    if pool not in app_state(request).settings.pool_names:
        raise NotFound(f"no pool {pool!r}")


@get("/v1/pools", tags=["pools"])
async def list_pools(request: Request, caller: Caller) -> Pools:
    """Each pool's capacity, pauses and load per priority class: the caller's own runs (every
    tenant's, for the admin)."""
    s = app_state(request)
    async with s.pool.acquire() as conn:
        return Pools(items=await pool_views(conn, s, caller.tenant_id))


async def pool_views(conn: asyncpg.Connection, s: Any,
                     mine: uuid.UUID | None) -> list[PoolView]:
    """GET /v1/pools (and the web UI's pools page): `s` the app state, `mine` the tenant (None:
    every tenant, for the admin)."""
    capacity = await registry.live_capacity(
        conn, s.clock.db_now(), timedelta(seconds=s.settings.worker_ttl_seconds))
    waiting = await limits.waiting_load(conn)
    in_flight = await limits.in_flight(conn)
    pauses = await limits.pool_controls(conn, mine)
    now = s.clock.now()
    views = []
    for pool in s.settings.pool_names:
        classes = {c.name: ClassLoad(waiting=0, oldest_waiting_seconds=None, in_flight=0)
                   for c in s.settings.classes}
        for w in waiting:
            if w.pool == pool and (mine is None or w.tenant_id == mine):
                load = classes.setdefault(w.priority, ClassLoad(
                    waiting=0, oldest_waiting_seconds=None, in_flight=0))
                age = max(0.0, (now - w.oldest).total_seconds())
                load.waiting += w.depth
                load.oldest_waiting_seconds = max(load.oldest_waiting_seconds or 0.0, age)
        for f in in_flight:
            if f.pool == pool and (mine is None or f.tenant_id == mine):
                classes.setdefault(f.priority, ClassLoad(
                    waiting=0, oldest_waiting_seconds=None, in_flight=0)).in_flight += f.n
        paused = {(p.tenant_id, p.pool) for p in pauses if p.paused}
        views.append(PoolView(
            name=pool, paused=(None, pool) in paused,
            queue_paused=mine is not None and (mine, pool) in paused,
            shared_slots=sum(c.slots for c in capacity if c.pool == pool and c.tenant_id is None),
            own_slots=sum(c.slots for c in capacity if c.pool == pool and c.tenant_id is not None
                          and (mine is None or c.tenant_id == mine)),
            classes=classes))
    return views


async def _pause(request: Request, pool: str, caller: Principal, paused: bool,
                 reason: str | None) -> PoolPaused:
    _known_pool(request, pool)
    s = app_state(request)
    async with s.pool.acquire() as conn, \
            auditing.recorded(conn, request, caller, caller.tenant_id) as audit:
        changed = await controls.set_paused(conn, s.store, pool=pool, tenant_id=caller.tenant_id,
                                            paused=paused, reason=reason, actor=actor_of(caller))
        audit.before = {"paused": paused != changed}
        audit.after = {"paused": paused}
        audit.detail = reason or ""
    scope = "every tenant" if caller.tenant_id is None else "this tenant's queue"
    return PoolPaused(pool=pool, scope=scope, status="paused" if paused else "active",
                      changed=changed)


@post("/v1/pools/{pool:str}/pause", status_code=200, tags=["pools"],
      opt=audited("pool.pause", "pool", "pool"))
async def pause_pool(request: Request, pool: PoolName, caller: Caller,
                     data: JSONBody[PoolPauseRequest | None] = None) -> PoolPaused:
    """Stop dispatching into the pool; waiting runs stay waiting, running ones finish."""
    return await _pause(request, pool, caller, True, (data or PoolPauseRequest()).reason)


@post("/v1/pools/{pool:str}/resume", status_code=200, tags=["pools"],
      opt=audited("pool.resume", "pool", "pool"))
async def resume_pool(request: Request, pool: PoolName, caller: Caller) -> PoolPaused:
    return await _pause(request, pool, caller, False, None)


def _limit_doc(row: limits.LimitRow | None) -> dict[str, object] | None:
    if row is None:
        return None
    return {"max_concurrency": row.max_concurrency, "rate_per_second": row.rate_per_second,
            "burst": row.burst}


async def record_limit(conn: asyncpg.Connection, store: EventStore, tenant_id: uuid.UUID,
                       scope: str, name: str, data: LimitRequest, actor: str,
                       audit: Audit) -> LimitSet:
    """Set a limit; its audit row gets the limit before and after (the routes below and the
    web UI's tenants page)."""
    audit.target_id = f"{scope}:{name}" if name else scope
    audit.before = _limit_doc(await _limit_of(conn, tenant_id, scope, name))
    limit = ev.LimitSet(scope=scope, name=name, max_concurrency=data.max_concurrency,
                        rate_per_second=data.rate_per_second, burst=data.burst,
                        weight=data.weight)
    await controls.set_limit(conn, store, tenant_id=tenant_id, limit=limit, actor=actor)
    audit.after = _limit_doc(await _limit_of(conn, tenant_id, scope, name))
    return LimitSet(scope=scope, name=name, status="set")


async def _limit_of(conn: asyncpg.Connection, tenant_id: uuid.UUID, scope: str,
                    name: str) -> limits.LimitRow | None:
    return next((r for r in await limits.of_tenant(conn, tenant_id)
                 if (r.scope, r.name) == (scope, name)), None)


@put("/v1/tenants/{tenant_id:uuid}/limits", status_code=200, tags=["limits"],
     opt=audited("limit.set", "limit", action=roles.ADMINISTER))
async def put_tenant_limits(request: Request, tenant_id: FromPath[uuid.UUID],
                            data: JSONBody[LimitRequest], caller: Caller) -> LimitSet:
    """The tenant's weight, concurrency limit and rate limit (admin key)."""
    require_admin(caller)
    s = app_state(request)
    async with s.pool.acquire() as conn, \
            auditing.recorded(conn, request, caller, tenant_id) as audit:
        return await record_limit(conn, s.store, tenant_id, "tenant", "", data, "admin", audit)


@put("/v1/tenants/{tenant_id:uuid}/limits/api", status_code=200, tags=["limits"],
     opt=audited("limit.set", "limit", action=roles.ADMINISTER))
async def put_tenant_api_rate(request: Request, tenant_id: FromPath[uuid.UUID],
                              data: JSONBody[ApiRateRequest], caller: Caller) -> LimitSet:
    """Requests per second per API key of the tenant at each api process (admin key); a
    request over it is a 429 with Retry-After. Takes effect within 10 s."""
    require_admin(caller)
    s = app_state(request)
    limit = LimitRequest(rate_per_second=data.rate_per_second, burst=data.burst)
    async with s.pool.acquire() as conn, \
            auditing.recorded(conn, request, caller, tenant_id) as audit:
        return await record_limit(conn, s.store, tenant_id, "api", "", limit, "admin", audit)


@put("/v1/limits/tasks/{task:str}", status_code=200, tags=["limits"],
     opt=audited("limit.set", "limit"))
async def put_task_limit(task: LimitName, data: JSONBody[LimitRequest],
                         tenant: Tenant) -> LimitSet:
    """At most `max_concurrency` runs of this job type of the tenant at a time."""
    return await record_limit(tenant.conn, tenant.store, tenant.tenant_id, "task", task, data,
                              tenant.actor, tenant.audit)


@put("/v1/limits/resources/{name:str}", status_code=200, tags=["limits"],
     opt=audited("limit.set", "limit"))
async def put_resource_limit(name: LimitName, data: JSONBody[LimitRequest],
                             tenant: Tenant) -> LimitSet:
    """A token bucket for a named external resource: jobs with `resource: name` start at most
    `rate_per_second` a second, with bursts up to `burst`."""
    return await record_limit(tenant.conn, tenant.store, tenant.tenant_id, "resource", name,
                              data, tenant.actor, tenant.audit)


@get("/v1/workers", tags=["pools"])
async def list_workers(request: Request, caller: Caller) -> Workers:
    """Live and recently seen workers: the caller's own and the shared ones (all, for the
    admin), with the pools they serve, their declared slots and the version of each task they
    serve."""
    async with app_state(request).pool.acquire() as conn:
        workers = await registry.list_workers(conn, caller.tenant_id)
    return Workers(items=[WorkerView(worker_id=w.worker_id, shared=w.tenant_id is None,
                                     pools=w.pools, slots=w.slots, seen_at=w.seen_at,
                                     versions=w.versions or {})
                          for w in workers])


@get("/v1/limits", tags=["limits"])
async def list_limits(tenant: Tenant) -> Limits:
    return Limits(items=[LimitView(**msgspec.structs.asdict(r))
                         for r in await limits.of_tenant(tenant.conn, tenant.tenant_id)])


ROUTES = [list_pools, pause_pool, resume_pool, list_workers, put_tenant_limits,
          put_tenant_api_rate, put_task_limit,
          put_resource_limit, list_limits]
