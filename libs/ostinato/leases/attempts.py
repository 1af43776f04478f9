"""Attempt leases (`attempt_leases`): one row per running attempt, with its fencing token and an
expiry computed by the database clock (pass `Clock.db_now()`; None means the database's own
`now()`). The worker-gateway grants, extends and releases them; the reconciler expires them.

The only module that reads the `attempt_leases` table: callers get typed rows, never records.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many

Q = load("ostinato.leases", "leases.sql")


class GrantedLease(msgspec.Struct, frozen=True):
    """A lease a claim granted; `was_live`: it replaced a lease that had not expired yet."""

    run_id: uuid.UUID
    expires_at: datetime
    was_live: bool


class ExtendedLease(msgspec.Struct, frozen=True):
    """A lease a heartbeat extended (its token was current)."""

    run_id: uuid.UUID
    expires_at: datetime


class LeaseToken(msgspec.Struct, frozen=True):
    """The current token of a leased run and the worker holding it."""

    run_id: uuid.UUID
    fencing_token: int
    worker_id: str


async def grant_leases(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID],
                       tenant_ids: Sequence[uuid.UUID], tokens: Sequence[int], worker_id: str,
                       now: datetime | None, ttl: timedelta) -> list[GrantedLease]:
    """A claim: grant (or replace) each run's lease with its new token, all in one statement."""
    return many(GrantedLease, await conn.fetch(
        Q["grant_leases"], run_ids, tenant_ids, tokens, worker_id, now, ttl))


async def extend_leases_if_token(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID],
                                 tokens: Sequence[int], tenant_id: uuid.UUID | None,
                                 now: datetime | None, ttl: timedelta) -> list[ExtendedLease]:
    """A heartbeat: extend only the leases whose token is current (fencing in the statement);
    `tenant_id` None: a shared worker serving every tenant."""
    return many(ExtendedLease, await conn.fetch(
        Q["extend_leases_if_token"], run_ids, tokens, tenant_id, now, ttl))


async def current_tokens(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID],
                         tenant_id: uuid.UUID) -> list[LeaseToken]:
    """The current token of each leased run of a tenant: tells a stale writer from an unknown
    run."""
    return many(LeaseToken, await conn.fetch(Q["current_tokens"], run_ids, tenant_id))


async def leases_of_worker(conn: asyncpg.Connection, worker_id: str,
                           tenant_id: uuid.UUID | None) -> list[LeaseToken]:
    """The leases in `worker_id`'s name, of one tenant (None: of every tenant)."""
    return many(LeaseToken, await conn.fetch(Q["leases_of_worker"], worker_id, tenant_id))


async def step_started(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID],
                       tokens: Sequence[int], seqs: Sequence[int], names: Sequence[str],
                       ages_ms: Sequence[float], now: datetime | None,
                       tenant_id: uuid.UUID | None) -> None:
    """Workflow steps that began executing, kept on their attempts' leases (fenced by token,
    in one statement): what `running_steps` shows while the step runs."""
    await conn.execute(Q["step_started"], run_ids, tokens, seqs, names, ages_ms, now, tenant_id)


class RunningStep(msgspec.Struct, frozen=True):
    """The step a running workflow is executing: its position, name and since when (the
    database clock)."""

    run_id: uuid.UUID
    seq: int
    name: str
    since: datetime


async def running_steps(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                        run_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, RunningStep]:
    """The executing step of each of these runs that has one (running, its attempt said so,
    at a position not recorded yet)."""
    rows = many(RunningStep, await conn.fetch(Q["running_steps"], run_ids, tenant_id))
    return {r.run_id: r for r in rows}


async def release_leases(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID]) -> None:
    """End the leases of runs that reached an outcome (or were repaired)."""
    await conn.execute(Q["release_leases"], run_ids)


class BusySlots(msgspec.Struct, frozen=True):
    """Attempts holding a lease in one pool."""

    pool: str
    busy: int


class StuckLeases(msgspec.Struct, frozen=True):
    """A job's leases expired long ago and not taken over yet (an alert's signal)."""

    tenant_id: uuid.UUID
    tenant: str
    job_id: uuid.UUID
    job: str | None
    owner: str | None
    n: int
    since: datetime


async def busy_slots(conn: asyncpg.Connection) -> list[BusySlots]:
    """Leased attempts per pool: the busy side of worker utilisation."""
    return many(BusySlots, await conn.fetch(Q["busy_slots"]))


async def stuck_leases(conn: asyncpg.Connection, now: datetime | None, after: timedelta,
                       limit: int) -> list[StuckLeases]:
    """Per job, leases expired for longer than `after` (database clock) and still held."""
    return many(StuckLeases, await conn.fetch(Q["stuck_leases"], now, after, limit))


class WatchedLease(msgspec.Struct, frozen=True):
    """A lease the reconciler may take back, with what `policy.liveness.abandoned` judges by:
    its expiry, its worker's last ping and ping interval (None: undeclared or unregistered),
    the latest start of a live gateway instance (None: none live) and the database's `now` of
    the pass."""

    run_id: uuid.UUID
    worker_id: str
    lease_token: int
    expires_at: datetime
    seen_at: datetime | None
    liveness_seconds: float | None
    gateways_since: datetime | None
    now: datetime


async def abandoned_leases(conn: asyncpg.Connection, now: datetime | None,
                           watching_since: datetime | None, dead_after: timedelta,
                           limit: int) -> list[WatchedLease]:
    """The expired leases, and those of pinging workers silent for `dead_after` (or 3 pings)
    counted from `watching_since` (None: none yet) and from the latest start of a live gateway
    instance, oldest expiry first, locked (SKIP LOCKED) in the caller's transaction so one
    reconciler handles each."""
    return many(WatchedLease, await conn.fetch(
        Q["abandoned_leases"], now,
        datetime.max.replace(tzinfo=UTC) if watching_since is None else watching_since,
        dead_after, limit))
