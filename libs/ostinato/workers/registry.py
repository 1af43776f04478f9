"""Worker registry: one row per (worker, scope), where scope is a tenant or '*' (shared).

The worker-gateway writes it (`touch` on claims, `seen` on heartbeats, `forget` on goodbye);
the dispatcher reads `live_capacity`. Liveness is `seen_at` within a TTL judged by the database
clock (pass `Clock.db_now()`; None means the database's own `now()`), the same rule as leases.

A worker id may appear under several scopes (the same process using two keys): the scopes are
separate rows, so a tenant worker's slots never count as another tenant's capacity.

The only module that reads the `workers` table (but for the reconciler's stuck-run sweep,
`stuck_runs_by_reason`, which joins it): callers get typed rows, never records. `unserved`
is the signal of the reconciler's OstinatoNoWorkerForPool alert.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many

Q = load("ostinato.workers", "workers.sql")


class PoolCapacity(msgspec.Struct, frozen=True):
    """Declared slots of live workers in one pool; `tenant_id` None: shared workers."""

    tenant_id: uuid.UUID | None
    pool: str
    slots: int


class WorkerInfo(msgspec.Struct, frozen=True):
    """One registered worker under one scope, for display."""

    worker_id: str
    tenant_id: uuid.UUID | None  # None: a shared worker (admin key) serving every tenant
    pools: list[str]
    slots: int
    seen_at: datetime
    versions: dict[str, str] | None  # task -> the version of its handler on this worker


class ServedVersion(msgspec.Struct, frozen=True):
    """A live worker in `pool` (`tenant_id` None: a shared one) serves `task` at `version`."""

    tenant_id: uuid.UUID | None
    pool: str
    task: str
    version: str


async def touch(conn: asyncpg.Connection, worker_id: str, tenant_id: uuid.UUID | None,
                pools: Sequence[str], slots: int, now: datetime | None, *,
                versions: Mapping[str, str] | None = None,
                payload_versions: Mapping[str, Sequence[int]] | None = None,
                liveness_seconds: float | None = None) -> None:
    """Record that the worker is alive with these pools, slots and served versions, and how
    often it pings while it holds runs (None: it does not; one upsert)."""
    await conn.execute(Q["touch_worker"], worker_id, tenant_id, list(pools), slots, now,
                       None if versions is None else dict(versions),
                       None if payload_versions is None else
                       {t: list(vs) for t, vs in payload_versions.items()}, liveness_seconds)


async def seen(conn: asyncpg.Connection, worker_id: str, tenant_id: uuid.UUID | None,
               now: datetime | None) -> bool:
    """Refresh a registered worker's liveness only; False when it is not registered."""
    status = await conn.execute(Q["worker_seen"], worker_id, tenant_id, now)
    return status != "UPDATE 0"


async def forget(conn: asyncpg.Connection, worker_id: str, tenant_id: uuid.UUID | None) -> bool:
    """Remove a worker at once (graceful stop); False when it was not registered."""
    return await conn.fetchval(Q["forget_worker"], worker_id, tenant_id) is not None


async def forget_stale(conn: asyncpg.Connection, now: datetime | None,
                       older_than: timedelta) -> int:
    """Delete workers not seen for `older_than` (crashed ones never say goodbye)."""
    status = await conn.execute(Q["forget_stale_workers"], now, older_than)
    return int(status.split()[-1])


async def live_capacity(conn: asyncpg.Connection, now: datetime | None,
                        ttl: timedelta) -> list[PoolCapacity]:
    """Slots of workers seen within `ttl`, summed per (tenant scope, pool)."""
    return many(PoolCapacity, await conn.fetch(Q["live_capacity"], now, ttl))


async def live_versions(conn: asyncpg.Connection, now: datetime | None,
                        ttl: timedelta) -> list[ServedVersion]:
    """The (pool, task, version) triples live workers serve, per tenant scope."""
    return many(ServedVersion, await conn.fetch(Q["live_versions"], now, ttl))


def unserved_reason(task: str, version: str, pool: str) -> str:
    """How a pinned run that no live worker can take says why it waits (the dispatcher's hold,
    GET /v1/runs/{id}; the reconciler's RunStuck detail builds the same text in SQL)."""
    return f"no worker serves {task} v{version} in pool {pool}"


async def serves(conn: asyncpg.Connection, tenant_id: uuid.UUID, pool: str, task: str,
                 version: str, now: datetime | None, ttl: timedelta) -> bool:
    """A live worker of the tenant (or a shared one) in `pool` serves `task` at `version`."""
    return bool(await conn.fetchval(Q["serves_version"], tenant_id, pool, task, version, now,
                                    ttl))


class ServingCount(msgspec.Struct, frozen=True):
    task: str
    version: str
    workers: int


async def serving_workers(conn: asyncpg.Connection, tenant_id: uuid.UUID, now: datetime | None,
                          ttl: timedelta) -> list[ServingCount]:
    """Per task and version, the live workers serving a tenant (its own and shared ones)."""
    return many(ServingCount, await conn.fetch(Q["serving_workers"], tenant_id, now, ttl))


async def list_workers(conn: asyncpg.Connection,
                       tenant_id: uuid.UUID | None) -> list[WorkerInfo]:
    """For display: a tenant's workers plus the shared ones; every worker for None (admin)."""
    return many(WorkerInfo, await conn.fetch(Q["list_workers"], tenant_id))


class UnservedPool(msgspec.Struct, frozen=True):
    """Runs of a tenant waiting in a pool that no live worker serves."""

    tenant_id: uuid.UUID
    tenant: str
    pool: str
    n: int
    since: datetime


async def unserved(conn: asyncpg.Connection, now: datetime | None, after: timedelta,
                   ttl: timedelta, limit: int) -> list[UnservedPool]:
    """Per (tenant, pool): runs due more than `after` ago, still waiting, with no live worker
    (seen within `ttl`) of the tenant or shared in their pool."""
    return many(UnservedPool, await conn.fetch(Q["unserved_pools"], now, after, ttl, limit))


async def gateway_seen(conn: asyncpg.Connection, instance: str, now: datetime | None) -> None:
    """A worker-gateway instance says it is alive: the reconciler judges a worker's silence
    only while a gateway was there to hear it (`leases.abandoned_leases`)."""
    await conn.execute(Q["gateway_seen"], instance, now)


async def gateway_gone(conn: asyncpg.Connection, instance: str, now: datetime | None) -> None:
    """A worker-gateway instance stopping gracefully: counted as a restart now, so its workers'
    silence while it is away (a rolling restart) starts counting only then (rows of instances
    gone for an hour are deleted)."""
    await conn.execute(Q["gateway_gone"], instance, now)
