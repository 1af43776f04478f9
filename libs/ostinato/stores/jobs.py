"""The `jobs` read model and its history tables (`occurrence_skips`, `job_pauses`): one job of a
tenant and a page of them for the API; the locked rows writers append from; the scheduler's due
poll; the reconciler's sweep of recurring jobs and of what each already fired, skipped or
paused."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "jobs.sql")


class JobRow(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    task: str
    status: str  # active | paused | deleted | finished
    schedule: dict[str, Any]  # ostinato.schedules document
    payload_ref: uuid.UUID
    pool: str
    priority: str
    idempotency_key: str | None
    traceparent: str | None
    next_run_at: datetime | None
    last_run_at: datetime | None
    runs_created: int
    created_at: datetime
    updated_at: datetime
    version: int
    kind: str
    next_slot: datetime | None
    calendar: str | None
    overlap: str
    resume_policy: str | None
    consecutive_failures: int
    paused_at: datetime | None
    retry_policy: Any
    timeout_seconds: float | None
    queue_wait_seconds: float | None
    on_queue_wait: str | None
    shard: int
    concurrency_key: str | None
    resource: str | None
    payload_version: int | None  # the task's payload schema version its payload was checked at
    request_hash: str | None  # what was asked with its idempotency key (a repeat must match)
    complete_within_seconds: float | None  # completion deadline after each slot
    max_staleness_seconds: float | None  # how old the last success may get (recurring)
    owner: str | None  # the team its alerts are routed to
    last_missing_slot: datetime | None  # the latest LedgerSlotMissing's slot
    last_overdue_slot: datetime | None  # the latest overdue run's slot (CompletionOverdue)


async def by_id(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                job_id: uuid.UUID) -> JobRow | None:
    return one(JobRow, await conn.fetchrow(Q["job_by_id"], job_id, tenant_id))


async def by_idempotency_key(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                             key: str) -> JobRow | None:
    return one(JobRow, await conn.fetchrow(Q["job_by_idempotency_key"], tenant_id, key))


async def page(conn: asyncpg.Connection, tenant_id: uuid.UUID, *, status: str | None,
               after: tuple[datetime | None, uuid.UUID | None], limit: int) -> list[JobRow]:
    """Newest first, strictly after the (created_at, id) cursor `after`."""
    return many(JobRow, await conn.fetch(Q["list_jobs"], tenant_id, status, *after, limit))


class JobHead(msgspec.Struct, frozen=True):
    """A locked job row: enough to append to its stream."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    status: str
    version: int


class DueJob(msgspec.Struct, frozen=True):
    """A due job as the scheduler locked it: what deciding and materialising its slots need."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    task: str
    pool: str
    priority: str
    payload_ref: uuid.UUID
    next_run_at: datetime | None
    next_slot: datetime | None
    schedule: dict[str, Any]
    traceparent: str | None
    version: int
    calendar: str | None
    overlap: str
    resume_policy: str | None
    consecutive_failures: int
    retry_policy: Any
    timeout_seconds: float | None
    queue_wait_seconds: float | None
    on_queue_wait: str | None
    shard: int
    concurrency_key: str | None
    resource: str | None
    payload_version: int | None
    attributes: Any = None  # its searchable attributes (job_attributes), copied to its runs


class RecurringJob(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    schedule: dict[str, Any]
    status: str
    next_slot: datetime | None
    next_run_at: datetime | None
    created_at: datetime
    version: int


class RepairJob(msgspec.Struct, frozen=True):
    """A job the reconciler locked to record a repair: what `run_for` needs, and its head."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    task: str
    pool: str
    priority: str
    payload_ref: uuid.UUID
    next_run_at: datetime | None
    next_slot: datetime | None
    version: int
    retry_policy: Any
    timeout_seconds: float | None
    queue_wait_seconds: float | None
    on_queue_wait: str | None
    concurrency_key: str | None
    resource: str | None
    payload_version: int | None
    attributes: Any = None  # its searchable attributes (job_attributes), copied to its runs


class KeyedJob(msgspec.Struct, frozen=True):
    id: uuid.UUID
    idempotency_key: str
    next_run_at: datetime | None
    request_hash: str | None  # what the key first came with (None: created before 0024)


class Skip(msgspec.Struct, frozen=True):
    first_slot: datetime
    last_slot: datetime
    slots: int | None
    reason: str


class Pause(msgspec.Struct, frozen=True):
    paused_at: datetime
    resumed_at: datetime | None


async def lock(conn: asyncpg.Connection, tenant_id: uuid.UUID,
               job_id: uuid.UUID) -> JobHead | None:
    return one(JobHead, await conn.fetchrow(Q["lock_job"], job_id, tenant_id))


async def any_due(conn: asyncpg.Connection, now: datetime | None) -> bool:
    """Whether any active job is due at `now` (None: the database's now), whatever its shard."""
    return bool(await conn.fetchval(Q["any_due_jobs"], now))


async def claim_due(conn: asyncpg.Connection, now: datetime | None, limit: int,
                    skip: Sequence[uuid.UUID], shards: Sequence[int]) -> list[DueJob]:
    """Lock up to `limit` due jobs of `shards` (oldest first; SKIP LOCKED), leaving out `skip`,
    in the caller's transaction. The poll alone is planned for its parameters, each time: a
    plan cached for any instant and shards (generic) reads the shards' due jobs through the
    wrong index and the candidates by a sequential scan of `jobs` once statistics lag the table
    (100-250 ms a poll over 20,000 due jobs), and planning every statement of the service
    afresh cost more than its idle polls (plan_cache_mode, `ostinato.db.pool.create_pool`).
    What the transaction runs after a poll that found jobs (the lease check, the append) is
    cached again: planned afresh, they cost 0.4 ms of PostgreSQL's planning a poll; the reset
    is one short statement (13 µs of the server's)."""
    await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
    due = many(DueJob, await conn.fetch(Q["claim_due_jobs"], now, limit, list(skip),
                                        list(shards)))
    if due:
        await conn.execute("SET LOCAL plan_cache_mode = DEFAULT")
    return due


async def oldest_due(conn: asyncpg.Connection, now: datetime | None,
                     shards: int) -> datetime | None:
    """The oldest due instant not yet materialised, over `shards` shards (None: nothing due)."""
    return await conn.fetchval(Q["oldest_due"], now, shards)


async def recurring(conn: asyncpg.Connection, limit: int, offset: int) -> list[RecurringJob]:
    return many(RecurringJob, await conn.fetch(Q["recurring_jobs"], limit, offset))


async def lock_for_repair(conn: asyncpg.Connection, job_id: uuid.UUID) -> RepairJob | None:
    return one(RepairJob, await conn.fetchrow(Q["lock_job_for_repair"], job_id))


async def by_idempotency_keys(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                              keys: Sequence[str]) -> list[KeyedJob]:
    return many(KeyedJob, await conn.fetch(Q["jobs_by_idempotency_keys"], tenant_id, list(keys)))


async def skips_between(conn: asyncpg.Connection, job_id: uuid.UUID, start: datetime,
                        end: datetime) -> list[Skip]:
    """Recorded skips of the job overlapping [start, end)."""
    return many(Skip, await conn.fetch(Q["skips_of_job_between"], job_id, start, end))


async def skips_page(conn: asyncpg.Connection, tenant_id: uuid.UUID, job_id: uuid.UUID,
                     after: datetime, limit: int) -> list[Skip]:
    """The job's recorded skips with a first slot after `after`, oldest first."""
    return many(Skip, await conn.fetch(Q["skips_of_job_page"], job_id, tenant_id, after, limit))


async def pauses(conn: asyncpg.Connection, job_id: uuid.UUID) -> list[Pause]:
    return many(Pause, await conn.fetch(Q["pauses_of_job"], job_id))


async def names(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The names of the tenant's jobs among `job_ids` (another tenant's id: absent)."""
    if not job_ids:
        return {}
    return {r["id"]: r["name"] for r in await conn.fetch(Q["job_names"], tenant_id,
                                                           list(job_ids))}


class LastOutcome(msgspec.Struct, frozen=True):
    """A job's latest ended run of its own slots: what the jobs list shows as its outcome."""

    job_id: uuid.UUID
    run_id: uuid.UUID
    state: str
    finished_at: datetime | None
    error_type: str | None


async def last_outcomes(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                        job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, LastOutcome]:
    """Each job's latest ended run, for a page of jobs (one statement)."""
    return await _of_jobs(conn, "jobs_last_outcomes", LastOutcome, tenant_id, job_ids)


class PauseReason(msgspec.Struct, frozen=True):
    """Why a job is paused: its latest JobPaused event (an operator's reason, or auto-paused
    after failures)."""

    job_id: uuid.UUID
    reason: str | None
    auto: bool
    actor: str
    paused_at: datetime


Of = TypeVar("Of", LastOutcome, PauseReason)


async def pause_reasons(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                        job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, PauseReason]:
    """Why each of `job_ids` was last paused (one statement)."""
    return await _of_jobs(conn, "jobs_pause_reasons", PauseReason, tenant_id, job_ids)


async def _of_jobs(conn: asyncpg.Connection, query: str, row: type[Of], tenant_id: uuid.UUID,
                   job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Of]:
    """One row per job of a page's `job_ids` (at most), by job id."""
    if not job_ids:
        return {}
    return {r.job_id: r for r in many(row, await conn.fetch(Q[query], tenant_id, list(job_ids)))}
