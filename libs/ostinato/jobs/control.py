"""Job commands that steer existing jobs: delete, pause, resume, trigger now, backfill. Each
validates, then appends to the job's stream in the caller's transaction."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timedelta

import asyncpg

from ostinato import schedules
from ostinato.clock import Clock
from ostinato.dags import targets
from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidInput, InvalidState, NotFound
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.jobs.materialise import run_for
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store

_EPSILON = timedelta(microseconds=1)


async def delete_job(
    conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID, job_id: uuid.UUID,
    actor: str,
) -> None:
    """Stop a job from creating further runs. Runs already created are not touched."""
    async with conn.transaction():
        row = await _lock_job(conn, tenant_id, job_id)
        if row.status == "deleted":
            raise InvalidState(f"job {job_id} is already deleted")
        head = StreamHead(job_id, tenant_id, row.version)
        await store.append(conn, [head.next(ev.JobDeleted(), actor)])



async def pause_job(
    conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID, job_id: uuid.UUID,
    actor: str, reason: str = "paused by user", auto: bool = False,
) -> None:
    """Stop creating runs until resumed; the slots that pass meanwhile are decided at resume."""
    async with conn.transaction():
        row = await _lock_job(conn, tenant_id, job_id)
        if row.status != "active":
            raise InvalidState(f"job {job_id} is {row.status}; only an active job can pause")
        head = StreamHead(job_id, tenant_id, row.version)
        await store.append(conn, [head.next(ev.JobPaused(reason=reason, auto=auto), actor)])


async def resume_job(
    conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID, job_id: uuid.UUID,
    actor: str, misfire: str | None = None,
) -> None:
    """Resume; `misfire` decides the slots missed while paused (None: the schedule's policy).
    The decision is recorded in JobResumed and applied by the scheduler's next plan."""
    async with conn.transaction():
        row = await _lock_job(conn, tenant_id, job_id)
        if row.status != "paused":
            raise InvalidState(f"job {job_id} is {row.status}; only a paused job can resume")
        head = StreamHead(job_id, tenant_id, row.version)
        await store.append(conn, [head.next(ev.JobResumed(misfire=misfire), actor)])


def _not_a_dag_job(task: str) -> None:
    if task.startswith(targets.DAG_TASK_PREFIX):
        raise InvalidState("a DAG job's extra runs are DAG runs: start one with "
                           "POST /v1/dags/{id}/runs (trigger and backfill of DAG jobs are not "
                           "supported yet)")


async def trigger_now(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, *, tenant_id: uuid.UUID,
    job_id: uuid.UUID, actor: str, traceparent: str | None = None,
) -> uuid.UUID:
    """An extra run outside the schedule, marked `manual`; the schedule itself is untouched."""
    async with conn.transaction():
        job = await job_store.by_id(conn, tenant_id, job_id)
        if job is None:
            raise NotFound(f"no job {job_id}")
        if job.status == "deleted":
            raise InvalidState(f"job {job_id} is deleted")
        _not_a_dag_job(job.task)
        run_id, run = run_for(job, clock.now(), trigger="manual")
        await store.append(conn, [StreamHead(run_id, tenant_id).next(
            run, actor, traceparent=traceparent or job.traceparent)])
    return run_id


async def _lock_job(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                    job_id: uuid.UUID) -> job_store.JobHead:
    row = await job_store.lock(conn, tenant_id, job_id)
    if row is None:
        raise NotFound(f"no job {job_id}")
    return row


MAX_BACKFILL_SLOTS = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class BackfillSlot:
    """One slot of a backfill's range and what the backfill does with it: `create` a run,
    leave it alone because it `has_run`, or `skip` it (overlap=skip; recorded as a skip).
    `recorded_skip` is the reason of an earlier recorded skip of the slot, if any."""

    slot: datetime
    action: str  # create | has_run | skip
    recorded_skip: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Backfill:
    """What a backfill did, or with `dry_run` would do: its counts and every slot."""

    start: datetime
    end: datetime
    timezone: str
    dry_run: bool
    slots: list[BackfillSlot]

    @property
    def runs_created(self) -> int:
        return sum(1 for s in self.slots if s.action == "create")

    @property
    def slots_with_runs(self) -> int:
        return sum(1 for s in self.slots if s.action == "has_run")

    @property
    def slots_skipped(self) -> int:
        return sum(1 for s in self.slots if s.action == "skip")


def plan_backfill(slots: list[datetime], existing: set[datetime], *, overlap: str,
                  active: bool, skips: list[job_store.Skip]) -> list[BackfillSlot]:
    """The pure decision per slot: a slot with a run is left alone; overlap=skip creates at most
    one run, and none while a run of the job is active; every other slot gets a run."""
    keep = len(slots) if overlap != "skip" else 0 if active else 1
    out: list[BackfillSlot] = []
    for slot in slots:
        earlier = next((k.reason for k in skips if k.first_slot <= slot <= k.last_slot), None)
        if slot in existing:
            action = "has_run"
        elif keep > 0:
            action, keep = "create", keep - 1
        else:
            action = "skip"
        out.append(BackfillSlot(slot, action, earlier))
    return out


async def backfill(
    conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID, job_id: uuid.UUID,
    start: datetime, end: datetime, actor: str, dry_run: bool = False,
) -> Backfill:
    """Create runs (marked `backfill`) for the job's slots in [start, end) that have none.

    Idempotent: a slot's run id derives from the slot, so repeating the request creates nothing
    new. Overlap: `allow` creates every missing run; `skip` creates at most one, and none while
    a run of the job is active (the rest are recorded as skipped); `queue` is refused, because
    runs queued behind each other are not available for backfills yet. `dry_run` answers the
    same slots and appends nothing, so an operator sees what a backfill will do first.
    """
    if end <= start:
        raise InvalidInput("end must be after start", errors=[
            {"field": "end", "message": "not after start"}])
    async with conn.transaction():
        row = await _lock_job(conn, tenant_id, job_id)
        job = await job_store.by_id(conn, tenant_id, job_id)
        assert job is not None  # locked above
        _not_a_dag_job(job.task)
        s = schedules.from_document(job.schedule)
        if s.overlap == "queue":
            raise InvalidState("backfill of a job with overlap=queue is not supported; "
                               "change the overlap policy or trigger runs one by one")
        if s.start_at is not None and start < s.start_at:
            # A backfill reaches before the job existed: that is its purpose.
            s = dataclasses.replace(s, start_at=start)
        slots = [x for x in schedules.occurrences(s, start - _EPSILON, until=end,
                                                  limit=MAX_BACKFILL_SLOTS + 1) if x < end]
        if len(slots) > MAX_BACKFILL_SLOTS:
            raise InvalidInput(f"the range holds more than {MAX_BACKFILL_SLOTS} slots; "
                               "backfill it in parts", errors=[
                                   {"field": "end", "message": "range too long"}])
        existing = await run_store.slots_taken(conn, job_id, start, end)
        active = bool((await run_store.active_counts(conn, [job_id])).get(job_id))
        plan = plan_backfill(slots, existing, overlap=s.overlap, active=active,
                             skips=await job_store.skips_between(conn, job_id, start, end))
        done = Backfill(start=start, end=end, timezone=s.tz_name, dry_run=dry_run, slots=plan)
        if dry_run:
            return done
        head = StreamHead(job_id, tenant_id, row.version)
        events: list[NewEvent] = []
        for p in plan:
            if p.action == "create":
                run_id, run = run_for(job, p.slot, trigger="backfill")
                events.append(StreamHead(run_id, tenant_id).next(run, actor,
                                                                  traceparent=job.traceparent))
        for p in plan:
            if p.action == "skip":
                events.append(head.next(ev.OccurrencesSkipped(
                    first=p.slot, last=p.slot, slots=1, reason="overlap",
                    next_run_at=job.next_run_at, next_slot=job.next_slot), actor))
        events.append(head.next(ev.BackfillRequested(
            start=start, end=end, runs_created=done.runs_created,
            slots_with_runs=done.slots_with_runs, slots_skipped=done.slots_skipped), actor))
        await store.append(conn, events)
    return done
