"""The dispatcher's snapshot: what `policy.fairness.decide` needs, read from PostgreSQL.

`load()` does the reading (one statement, and the capacity source's), `save()` the writing
(one statement); `inputs()` is pure and maps rows to the decision's values. Everything comes
from the read models of the log (waiting and in-flight runs, limits, pauses, tenants' weights),
the worker registry (pool capacity) and the persisted token buckets, so a restarted dispatcher
decides exactly as before it stopped, less at most one run's worth of fair-queueing credit per
tenant (`FairState` is soft state).

Pool keys: a tenant's runs use its own workers' capacity when it has live workers in the pool
(key `pool/tenant`), else the shared workers' (key `pool`). So a tenant without workers never
fills a shared pool with runs nobody can claim, and fair queueing across tenants happens on
the shared fleet.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load as load_queries
from ostinato.policy.fairness import Bucket, Buckets, FairState, Limits, PoolState, Waiting
from ostinato.stores import limits, runs, tenants
from ostinato.workers.registry import PoolCapacity, ServedVersion, unserved_reason

DQ = load_queries("services.dispatcher", "dispatch.sql")

# (connection, the database clock as `Clock.db_now()` gives it) → live capacity
CapacitySource = Callable[[asyncpg.Connection, datetime | None],
                          Awaitable[Sequence[PoolCapacity]]]
# Likewise → the (pool, task, version) live workers serve: pinned runs wait for one.
ServingSource = Callable[[asyncpg.Connection, datetime | None],
                         Awaitable[Sequence[ServedVersion]]]


class SavedBucket(msgspec.Struct, frozen=True):
    """A token bucket as the last decision saved it (`token_buckets`)."""

    tenant_id: uuid.UUID
    scope: str  # tenant | resource
    name: str
    tokens: float
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: datetime
    tenants: Sequence[tenants.TenantWeight]
    limits: Sequence[limits.Limit]
    paused: Sequence[limits.PausedPool]  # tenant_id None: paused for every tenant
    capacity: Sequence[PoolCapacity]
    in_flight: Sequence[limits.InFlight]
    waiting: Sequence[runs.WaitingRun]
    buckets: Sequence[SavedBucket]
    # (tenant scope, pool, task, version) live workers serve; None: not known (no check)
    served: frozenset[tuple[uuid.UUID | None, str, str, str]] | None = None


async def load(conn: asyncpg.Connection, now: datetime, db_now: datetime | None,
               capacity: CapacitySource, instance: uuid.UUID,
               mine: FairState) -> tuple[FairState, Snapshot]:
    """The fair-queueing memory to decide from (`mine` if this instance wrote the stored one
    last, or none is stored; else the stored one, which another instance's rounds changed) and
    everything but the waiting runs (`with_waiting` adds them, once the number of candidates
    worth looking at is known): one statement, and the capacity source's own."""
    row = await conn.fetchrow(DQ["snapshot"], instance)
    tags = row["fairness"]
    state = mine if tags is None else FairState({(p, c, t): float(lag) for p, c, t, lag in tags})
    return state, Snapshot(
        now=now,
        tenants=[tenants.TenantWeight(*r) for r in row["tenants"]],
        limits=[limits.Limit(*r) for r in row["limits"]],
        paused=[limits.PausedPool(*r) for r in row["paused"]],
        capacity=await capacity(conn, db_now),
        in_flight=[limits.InFlight(*r) for r in row["in_flight"]],
        waiting=(),
        buckets=[SavedBucket(*r) for r in row["buckets"]],
    )


async def save(conn: asyncpg.Connection, holds: Sequence[tuple[uuid.UUID, uuid.UUID, str]],
               at: datetime, admitted: Sequence[uuid.UUID],
               buckets: tuple[list[Any], ...], state: FairState | None,
               instance: uuid.UUID) -> None:
    """What a round leaves, in one statement: the (run, tenant, reason) holds that changed, the
    admitted runs' holds dropped, the token buckets (`bucket_rows`), and the fair-queueing
    memory unless unchanged (None)."""
    tags = None if state is None else [[p, c, t, lag] for (p, c, t), lag in state.tags.items()]
    await conn.execute(DQ["save_round"], [h[0] for h in holds], [h[1] for h in holds],
                       [h[2] for h in holds], at, admitted, *buckets, tags, instance)


async def with_waiting(conn: asyncpg.Connection, snap: Snapshot, candidates: int,
                       serving: ServingSource | None = None,
                       db_now: datetime | None = None) -> Snapshot:
    """The snapshot with the oldest `candidates` waiting runs of every (tenant, pool, class),
    and, when some are pinned to a version, what live workers serve (read only then)."""
    waiting = await runs.waiting_candidates(conn, candidates)
    served = None
    if serving is not None and any(w.pinned for w in waiting):
        served = frozenset((s.tenant_id, s.pool, s.task, s.version)
                           for s in await serving(conn, db_now))
    return replace(snap, waiting=waiting, served=served)


def unserved(w: runs.WaitingRun,
             served: frozenset[tuple[uuid.UUID | None, str, str, str]] | None) -> str | None:
    """Why a pinned run must not be queued: no live worker (the tenant's own or a shared one)
    in its pool serves its version. Queued, it would hold a slot nobody can use."""
    if served is None or not w.pinned or w.task_version is None:
        return None
    if ((w.tenant_id, w.pool, w.task, w.task_version) in served
            or (None, w.pool, w.task, w.task_version) in served):
        return None
    return unserved_reason(w.task, w.task_version, w.pool)


def free_slots(snap: Snapshot, prefetch: float = 0.0) -> int:
    """The most runs any pool could take now (0: no decision can admit anything)."""
    pools, _ = pool_states(snap, prefetch)
    return max((p.total_slots - sum(p.busy.values()) for p in pools.values() if not p.paused),
               default=0)


@dataclass(frozen=True, slots=True)
class Inputs:
    waiting: list[Waiting]
    pools: dict[str, PoolState]
    limits: Limits
    buckets: Buckets
    held: dict[uuid.UUID, str]  # held before the decision (a tenant's queue paused)
    tenant_of: dict[uuid.UUID, uuid.UUID]  # run id → tenant id, for every waiting run
    bucket_keys: dict[tuple[str, str], tuple[uuid.UUID, str, str]] = field(default_factory=dict)


def inputs(snap: Snapshot, key_concurrency: int, prefetch: float = 0.0) -> Inputs:
    """The decision's inputs. Names in reasons are tenants' names; a job type, resource or
    concurrency key is scoped to its tenant (`tenant/task`), so tenants never share limits.
    A pool's capacity is its workers' slots plus `prefetch` times as many: runs queued ready for
    the next free slot, so a worker finishing a run finds the next one without waiting for a
    decision (a bounded buffer, not a pile)."""
    names = {t.id: t.name for t in snap.tenants}
    queue_paused = {(p.tenant_id, p.pool) for p in snap.paused if p.tenant_id is not None}
    pools, pool_key = pool_states(snap, prefetch)
    by_tenant: Counter[str] = Counter()
    by_job_type: Counter[str] = Counter()
    by_key: Counter[tuple[str, str]] = Counter()
    for f in snap.in_flight:
        tenant = names.get(f.tenant_id)
        if tenant is None:
            continue
        by_tenant[tenant] += f.n
        by_job_type[f"{tenant}/{f.task}"] += f.n
        if f.concurrency_key is not None:
            by_key[(tenant, f.concurrency_key)] += f.n

    tenant_limit: dict[str, int] = {}
    job_type_limit: dict[str, int] = {}
    tenant_buckets: dict[str, Bucket] = {}
    resource_buckets: dict[str, Bucket] = {}
    saved = {(b.tenant_id, b.scope, b.name): b for b in snap.buckets}
    bucket_keys: dict[tuple[str, str], tuple[uuid.UUID, str, str]] = {}
    for lim in snap.limits:
        tenant = names.get(lim.tenant_id)
        if tenant is None:
            continue
        scope = lim.scope
        if scope == "tenant" and lim.max_concurrency is not None:
            tenant_limit[tenant] = lim.max_concurrency
        elif scope == "task" and lim.max_concurrency is not None:
            job_type_limit[f"{tenant}/{lim.name}"] = lim.max_concurrency
        if scope in ("tenant", "resource") and lim.rate_per_second is not None:
            name = tenant if scope == "tenant" else f"{tenant}/{lim.name}"
            bucket = _bucket(lim, saved.get((lim.tenant_id, scope, lim.name)), snap.now)
            (tenant_buckets if scope == "tenant" else resource_buckets)[name] = bucket
            bucket_keys[(scope, name)] = (lim.tenant_id, scope, lim.name)

    waiting: list[Waiting] = []
    held: dict[uuid.UUID, str] = {}
    tenant_of: dict[uuid.UUID, uuid.UUID] = {}
    for w in snap.waiting:
        tenant = names.get(w.tenant_id)
        if tenant is None:
            continue
        tenant_of[w.id] = w.tenant_id
        if (w.tenant_id, w.pool) in queue_paused:
            held[w.id] = f"queue {w.pool} of tenant {tenant} paused"
            continue
        if (reason := unserved(w, snap.served)) is not None:
            held[w.id] = reason
            continue
        waiting.append(Waiting(
            run_id=w.id, tenant=tenant, klass=w.priority,
            pool=pool_key(w.tenant_id, w.pool), job_type=f"{tenant}/{w.task}",
            concurrency_key=w.concurrency_key,
            resource=f"{tenant}/{w.resource}" if w.resource is not None else None,
            enqueued_at=w.updated_at))
    limits = Limits(
        tenant_concurrency=tenant_limit, job_type_concurrency=job_type_limit,
        key_concurrency=key_concurrency,
        tenant_weights={t.name: float(t.weight) for t in snap.tenants},
        in_flight_by_tenant=dict(by_tenant), in_flight_by_job_type=dict(by_job_type),
        in_flight_by_key=dict(by_key))
    return Inputs(waiting, pools, limits, Buckets(tenant_buckets, resource_buckets), held,
                  tenant_of, bucket_keys)


def pool_states(snap: Snapshot, prefetch: float = 0.0
                ) -> tuple[dict[str, PoolState], Callable[[uuid.UUID, str], str]]:
    """Every pool's slots (`prefetch` included) and busy slots per class, and the function
    giving a tenant's runs in a pool their pool key (see the module's docstring)."""
    names = {t.id: t.name for t in snap.tenants}
    extra = 1.0 + max(0.0, prefetch)
    own = {(c.tenant_id, c.pool): math.ceil(c.slots * extra) for c in snap.capacity
           if c.tenant_id is not None}
    shared = {c.pool: math.ceil(c.slots * extra) for c in snap.capacity if c.tenant_id is None}
    operator_paused = {p.pool for p in snap.paused if p.tenant_id is None}

    def pool_key(tenant_id: uuid.UUID, pool: str) -> str:
        return f"{pool}/{names[tenant_id]}" if (tenant_id, pool) in own else pool

    slots = {pool: (pool, n) for pool, n in shared.items()}  # key -> (pool, slots)
    slots.update({pool_key(t, pool): (pool, n) for (t, pool), n in own.items() if t in names})
    busy: dict[str, Counter[str]] = {}
    for f in snap.in_flight:
        if f.tenant_id in names:
            busy.setdefault(pool_key(f.tenant_id, f.pool), Counter())[f.priority] += f.n
    pools = {key: PoolState(key, n, dict(busy.get(key, {})), paused=pool in operator_paused)
             for key, (pool, n) in slots.items()}
    return pools, pool_key


def _bucket(limit: limits.Limit, saved: SavedBucket | None, now: datetime) -> Bucket:
    """A limit's bucket: as saved by the last decision (refilled later by `decide`), or full."""
    rate = float(limit.rate_per_second)
    capacity = float(limit.burst) if limit.burst is not None else max(1.0, rate)
    if saved is None:
        return Bucket(capacity, capacity, rate, now)
    return Bucket(min(capacity, max(0.0, float(saved.tokens))), capacity, rate,
                  min(saved.updated_at, now))


def bucket_rows(buckets: Buckets, keys: Mapping[tuple[str, str], tuple[uuid.UUID, str, str]]
                ) -> tuple[list[Any], ...]:
    """Columns for `save_buckets`."""
    rows = [(keys[(scope, name)], b) for scope, group in (("tenant", buckets.tenants),
                                                          ("resource", buckets.resources))
            for name, b in group.items() if (scope, name) in keys]
    return ([k[0] for k, _ in rows], [k[1] for k, _ in rows], [k[2] for k, _ in rows],
            [b.tokens for _, b in rows], [b.updated_at for _, b in rows])
