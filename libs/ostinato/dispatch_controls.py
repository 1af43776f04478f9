"""Fair-dispatch controls, each one an event: limits of a tenant (`LimitSet` on its stream) and
pauses of a pool (`PoolPaused` / `PoolResumed` on the pool's stream for one scope: every
tenant, or one tenant's queue). The dispatcher reads their read models on every decision."""

from __future__ import annotations

import math
import uuid

import asyncpg

from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.stores import limits, tenants

POOL_NAMESPACE = uuid.UUID("0b6c7f3e-5d1a-4e8b-9c2f-7a4d1e6b3c58")
SYSTEM_TENANT = uuid.UUID(int=0)  # owner of operator-wide pool streams
SCOPES = ("tenant", "task", "resource", "api")  # api: requests per key (services/api/ratelimit)


def pool_stream(pool: str, tenant_id: uuid.UUID | None) -> uuid.UUID:
    return uuid.uuid5(POOL_NAMESPACE, f"{tenant_id or '*'}/{pool}")


def _check(limit: ev.LimitSet) -> None:
    errors = []
    if limit.scope not in SCOPES:
        errors.append({"field": "scope", "message": f"one of {', '.join(SCOPES)}"})
    if limit.max_concurrency is not None and limit.max_concurrency < 0:
        errors.append({"field": "max_concurrency", "message": "must be >= 0"})
    for name in ("rate_per_second", "burst", "weight"):
        value = getattr(limit, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            errors.append({"field": name, "message": "must be a finite number >= 0"})
    if limit.burst is not None and limit.rate_per_second is None:
        errors.append({"field": "burst", "message": "needs rate_per_second"})
    if limit.burst is not None and limit.burst < 1:
        errors.append({"field": "burst", "message": "must be >= 1 (one run takes one token)"})
    if limit.scope == "resource" and limit.max_concurrency is not None:
        errors.append({"field": "max_concurrency",
                       "message": "resources take a rate limit; use a concurrency_key or a "
                                  "task limit for concurrency"})
    if limit.scope == "api" and (limit.max_concurrency is not None or
                                 limit.rate_per_second is None):
        errors.append({"field": "rate_per_second",
                       "message": "an API rate is rate_per_second (and burst) only"})
    if limit.scope != "tenant" and limit.weight is not None:
        errors.append({"field": "weight", "message": "only a tenant has a weight"})
    if errors:
        raise InvalidInput("; ".join(f"{e['field']}: {e['message']}" for e in errors), errors)


async def set_limit(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                    limit: ev.LimitSet, actor: str) -> None:
    """Record a limit (replacing the previous one of the same scope and name)."""
    _check(limit)
    async with conn.transaction():
        tenant = await tenants.lock(conn, tenant_id)
        if tenant is None:
            raise NotFound(f"no tenant {tenant_id}")
        head = StreamHead(tenant_id, tenant_id, tenant.version)
        await store.append(conn, [head.next(limit, actor)])


async def set_paused(conn: asyncpg.Connection, store: EventStore, *, pool: str,
                     tenant_id: uuid.UUID | None, paused: bool, reason: str | None,
                     actor: str) -> bool:
    """Pause or resume dispatch into `pool` (for one tenant's queue, or for all when
    `tenant_id` is None). Returns False when it already was so (nothing recorded)."""
    stream = pool_stream(pool, tenant_id)
    async with conn.transaction():
        row = await limits.lock_pool_control(conn, stream)
        if (row.paused if row else False) == paused:
            return False
        event: ev.Event = (ev.PoolPaused(pool=pool, scope_tenant_id=tenant_id, reason=reason)
                           if paused else ev.PoolResumed(pool=pool, scope_tenant_id=tenant_id))
        head = StreamHead(stream, tenant_id or SYSTEM_TENANT, row.version if row else 0)
        await store.append(conn, [head.next(event, actor)])
    return True
