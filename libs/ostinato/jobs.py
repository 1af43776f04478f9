"""Job commands: submit and delete. Each validates, then appends to the job's stream in the
caller's transaction; the read model follows from the events."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg
import msgspec

from ostinato import schedules
from ostinato.api.models import JobRequest
from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidInput, InvalidState, NotFound, PayloadTooLarge
from ostinato.domain.ids import run_id_for
from ostinato.eventlog.readmodels import Q
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import EventStore, put_blob

_json = msgspec.json.Encoder()


async def submit_job(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, *, tenant_id: uuid.UUID,
    request: JobRequest, pools: Sequence[str], max_payload_bytes: int, actor: str,
    traceparent: str | None = None,
) -> tuple[asyncpg.Record, bool]:
    """Create the job; returns (job row, created). A repeated idempotency key returns the
    first job with created=False and writes nothing."""
    if request.idempotency_key is not None:
        existing = await conn.fetchrow(Q["job_by_idempotency_key"], tenant_id,
                                       request.idempotency_key)
        if existing is not None:
            return existing, False
    if request.pool not in pools:
        raise InvalidInput(f"unknown pool {request.pool!r}; configured pools: {', '.join(pools)}",
                           errors=[{"field": "pool", "message": "unknown pool"}])
    if request.schedule is not None:
        schedules.check_supported(request.schedule)
    size = len(_json.encode(request.payload))
    if size > max_payload_bytes:
        raise PayloadTooLarge(
            f"payload is {size} bytes; the limit is {max_payload_bytes} bytes",
            errors=[{"field": "payload", "message": f"larger than {max_payload_bytes} bytes"}],
        )
    first = schedules.first_occurrence(request.schedule, clock.now())
    job_id = uuid.uuid4()
    try:
        async with conn.transaction():
            payload_ref = await put_blob(conn, tenant_id, request.payload)
            created = ev.JobCreated(
                name=request.name, task=request.task or request.name,
                schedule=schedules.as_document(request.schedule, first), payload_ref=payload_ref,
                pool=request.pool, priority=request.priority, next_run_at=first,
                idempotency_key=request.idempotency_key,
            )
            await store.append(conn, [NewEvent(job_id, 1, tenant_id, created, actor,
                                               traceparent=traceparent)])
    except asyncpg.UniqueViolationError:
        # A concurrent submission with the same idempotency key committed first.
        if request.idempotency_key is None:
            raise
        row = await conn.fetchrow(Q["job_by_idempotency_key"], tenant_id, request.idempotency_key)
        if row is None:
            raise
        return row, False
    row = await conn.fetchrow(Q["job_by_id"], job_id, tenant_id)
    return row, True


async def delete_job(
    conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID, job_id: uuid.UUID,
    actor: str,
) -> None:
    """Stop a job from creating further runs. Runs already created are not touched."""
    async with conn.transaction():
        row = await _lock_job(conn, tenant_id, job_id)
        if row["status"] == "deleted":
            raise InvalidState(f"job {job_id} is already deleted")
        await store.append(conn, [NewEvent(job_id, row["version"] + 1, tenant_id,
                                           ev.JobDeleted(), actor)])



async def pause_job(
    conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID, job_id: uuid.UUID,
    actor: str, reason: str = "paused by user", auto: bool = False,
) -> None:
    """Stop creating runs until resumed; the slots that pass meanwhile are decided at resume."""
    async with conn.transaction():
        row = await _lock_job(conn, tenant_id, job_id)
        if row["status"] != "active":
            raise InvalidState(f"job {job_id} is {row['status']}; only an active job can pause")
        await store.append(conn, [NewEvent(job_id, row["version"] + 1, tenant_id,
                                           ev.JobPaused(reason=reason, auto=auto), actor)])


async def resume_job(
    conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID, job_id: uuid.UUID,
    actor: str, misfire: str | None = None,
) -> None:
    """Resume; `misfire` decides the slots missed while paused (None: the schedule's policy).
    The decision is recorded in JobResumed and applied by the scheduler's next plan."""
    async with conn.transaction():
        row = await _lock_job(conn, tenant_id, job_id)
        if row["status"] != "paused":
            raise InvalidState(f"job {job_id} is {row['status']}; only a paused job can resume")
        await store.append(conn, [NewEvent(job_id, row["version"] + 1, tenant_id,
                                           ev.JobResumed(misfire=misfire), actor)])


async def trigger_now(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, *, tenant_id: uuid.UUID,
    job_id: uuid.UUID, actor: str, traceparent: str | None = None,
) -> uuid.UUID:
    """An extra run outside the schedule, marked `manual`; the schedule itself is untouched."""
    async with conn.transaction():
        job = await conn.fetchrow(Q["job_by_id"], job_id, tenant_id)
        if job is None:
            raise NotFound(f"no job {job_id}")
        if job["status"] == "deleted":
            raise InvalidState(f"job {job_id} is deleted")
        now = clock.now()
        run_id = run_id_for(job_id, now)
        await store.append(conn, [NewEvent(
            run_id, 1, tenant_id,
            ev.RunScheduled(job_id=job_id, task=job["task"], pool=job["pool"],
                            priority=job["priority"], payload_ref=job["payload_ref"],
                            scheduled_for=now, trigger="manual", due_at=now),
            actor, traceparent=traceparent or job["traceparent"])])
    return run_id


async def _lock_job(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                    job_id: uuid.UUID) -> asyncpg.Record:
    row = await conn.fetchrow(Q["lock_job"], job_id, tenant_id)
    if row is None:
        raise NotFound(f"no job {job_id}")
    return row
