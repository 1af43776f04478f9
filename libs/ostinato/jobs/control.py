"""Job commands that steer existing jobs: delete, pause, resume, trigger now, backfill. Each
validates, then appends to the job's stream in the caller's transaction."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from ostinato import schedules
from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidInput, InvalidState, NotFound
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.jobs.materialise import dag_of, dag_run_for, run_for
from ostinato.stores import attributes as attribute_store
from ostinato.stores import dags as dag_store
from ostinato.stores import jobs as job_store
from ostinato.stores import ledger as ledger_store
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


TRIGGER_NAMESPACE = uuid.UUID("5e1d7c2a-93b4-4f0e-8a6d-1c2f3b4a5d6e")


def triggered_id_for(job_id: uuid.UUID, request_key: str) -> uuid.UUID:
    """The run (or a DAG job's DAG run) a trigger with `request_key` makes: the same key on the
    same job always names the same one, so a resent trigger starts nothing new."""
    return uuid.uuid5(TRIGGER_NAMESPACE, f"job/{job_id}/trigger/{request_key}")


@dataclasses.dataclass(frozen=True, slots=True)
class Triggered:
    """What a trigger made: a plain job's run or a DAG job's DAG run (the other is None), and
    whether it was made now (False: the same request key again)."""

    run_id: uuid.UUID | None
    dag_run_id: uuid.UUID | None
    created: bool


async def _job_dag(conn: asyncpg.Connection, job: job_store.JobRow,
                   ) -> dag_store.DagCurrent | None:
    """A DAG job's DAG as it is now (None: a plain job); 409 when it is not the job's tenant's."""
    dag_id = dag_of(job.task)
    if dag_id is None:
        return None
    dag = (await dag_store.current_definitions(conn, [dag_id])).get(dag_id)
    if dag is None or dag.tenant_id != job.tenant_id:
        raise InvalidState(f"job {job.id} names DAG {dag_id}, which does not exist")
    return dag


async def _attributes_of(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                         job_id: uuid.UUID) -> dict[str, Any] | None:
    """The job's searchable attributes, which its runs inherit."""
    return (await attribute_store.of_jobs(conn, tenant_id, [job_id])).get(job_id)


async def trigger_now(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, *, tenant_id: uuid.UUID,
    job_id: uuid.UUID, actor: str, traceparent: str | None = None,
    request_key: str | None = None,
) -> Triggered:
    """An extra run outside the schedule, marked `manual`; the schedule itself is untouched. A
    DAG job (task `dag:<id>`) starts a DAG run instead, `pending` until the scheduler's advance
    duty starts its roots. The id derives from the instant, or from `request_key` when given:
    the same key again makes nothing and answers the first (`created` False)."""
    async with conn.transaction():
        job = await job_store.by_id(conn, tenant_id, job_id)
        if job is None:
            raise NotFound(f"no job {job_id}")
        if job.status == "deleted":
            raise InvalidState(f"job {job_id} is deleted")
        dag = await _job_dag(conn, job)
        now = clock.now()
        given = None if request_key is None else triggered_id_for(job_id, request_key)
        trace = traceparent or job.traceparent
        if dag is not None:
            dag_run_id, started = dag_run_for(job_id, tenant_id, dag, now, now,
                                              trigger="manual", run_id=given)
            assert started is not None  # the DAG is the tenant's: checked above
            if given is not None and await dag_store.run_by_id(conn, tenant_id,
                                                               dag_run_id) is not None:
                return Triggered(None, dag_run_id, created=False)
            await store.append(conn, [StreamHead(dag_run_id, tenant_id).next(
                started, actor, traceparent=trace)])
            return Triggered(None, dag_run_id, created=True)
        run_id, run = run_for(job, now, trigger="manual", run_id=given,
                              attributes=await _attributes_of(conn, tenant_id, job_id))
        if given is not None and await run_store.by_id(conn, tenant_id, run_id) is not None:
            return Triggered(run_id, None, created=False)
        try:
            await store.append(conn, [StreamHead(run_id, tenant_id).next(run, actor,
                                                                         traceparent=trace)])
        except asyncpg.UniqueViolationError as exc:  # the transaction is rolled back
            if exc.constraint_name != "runs_job_slot":
                raise
            raise InvalidState(f"job {job_id} already has a run at {now.isoformat()} (a "
                               "manual run is dated by its instant): trigger again") from None
    return Triggered(run_id, None, created=True)


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
    leave it alone because it `has_run`, lies among runs retention `removed` (their slots
    survive as ranges: a run made here could be an occurrence's second) or is `upcoming` (at or
    after the job's next slot: the scheduler's), or `skip` it (overlap=skip; recorded as a
    skip). `recorded_skip` is the reason of an earlier recorded skip of the slot, if any."""

    slot: datetime
    action: str  # create | has_run | removed | upcoming | skip
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
        return sum(1 for s in self.slots if s.action in ("has_run", "removed"))

    @property
    def slots_skipped(self) -> int:
        return sum(1 for s in self.slots if s.action == "skip")


def plan_backfill(slots: list[datetime], existing: set[datetime], *, overlap: str,
                  active: bool, skips: list[job_store.Skip],
                  next_slot: datetime | None = None,
                  removed: Sequence[tuple[datetime, datetime]] = ()) -> list[BackfillSlot]:
    """The pure decision per slot: a slot with a run is left alone; so is one inside a range
    [first, last] of slots whose runs retention removed (`ledger_carried`: which slots of the
    range had runs is not kept, so every one counts as taken: never two runs for a slot); a
    slot at or after the job's next slot is `upcoming`, the scheduler's to fire (a run made
    here would be made again by it, misfire policy and all); overlap=skip creates at most one
    run, and none while a run of the job is active; every other slot gets a run."""
    keep = len(slots) if overlap != "skip" else 0 if active else 1
    out: list[BackfillSlot] = []
    for slot in slots:
        earlier = next((k.reason for k in skips if k.first_slot <= slot <= k.last_slot), None)
        if slot in existing:
            action = "has_run"
        elif any(first <= slot <= last for first, last in removed):
            action = "removed"
        elif next_slot is not None and slot >= next_slot:
            action = "upcoming"
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
    """Create runs (marked `backfill`) for the job's slots in [start, end) that have none; a
    DAG job's slot gets its occurrence's DAG run instead (one a slot already has is `has_run`).

    Idempotent: a slot's run (or DAG run) id derives from the slot, so repeating the request
    creates nothing new. Overlap: `allow` creates every missing run; `skip` creates at most
    one, and none while a run of the job is active (the rest are recorded as skipped); `queue`
    is refused, because runs queued behind each other are not available for backfills yet.
    `dry_run` answers the same slots and appends nothing, so an operator sees what a backfill
    will do first.
    """
    if end <= start:
        raise InvalidInput("end must be after start", errors=[
            {"field": "end", "message": "not after start"}])
    async with conn.transaction():
        row = await _lock_job(conn, tenant_id, job_id)
        job = await job_store.by_id(conn, tenant_id, job_id)
        assert job is not None  # locked above
        dag = await _job_dag(conn, job)
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
        removed = [(c.first_slot, c.last_slot) for c in
                   await ledger_store.carried_between(conn, tenant_id, job_id, start, end)]
        active = bool((await run_store.active_counts(conn, [job_id])).get(job_id))
        plan = plan_backfill(slots, existing, overlap=s.overlap, active=active,
                             skips=await job_store.skips_between(conn, job_id, start, end),
                             next_slot=job.next_slot, removed=removed)
        done = Backfill(start=start, end=end, timezone=s.tz_name, dry_run=dry_run, slots=plan)
        if dry_run:
            return done
        head = StreamHead(job_id, tenant_id, row.version)
        events: list[NewEvent] = []
        attrs = await _attributes_of(conn, tenant_id, job_id)
        for p in plan:
            if p.action == "create" and dag is not None:  # the occurrence's own DAG run
                dag_run_id, started = dag_run_for(job_id, tenant_id, dag, p.slot, p.slot,
                                                  trigger="backfill")
                assert started is not None  # the DAG is the tenant's: checked above
                events.append(StreamHead(dag_run_id, tenant_id).next(
                    started, actor, traceparent=job.traceparent))
            elif p.action == "create":
                run_id, run = run_for(job, p.slot, trigger="backfill", attributes=attrs)
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
