"""Gaps: over a sliding window, the slots the schedule definition and its pause history say
should exist (`schedules.expected_slots`) are compared with what was recorded: runs and
recorded skips. Only slots before the job's next slot are judged: the scheduler advances it in
the transaction that decides them, so a slot it has not decided yet (catching up after an
outage) is never taken for an omission. A slot before it with neither is a silent omission: it gets
`OccurrenceMissed` and is repaired by the misfire policy (`run_once`/`catch_up`: a run marked
`repair` for the latest, resp. every, missing slot within `max_lateness`; otherwise a
recorded skip with reason `missed`). Independent of the scheduler's own progress report.

Every finding is an event, an error log line with `alert=ostinato_occurrence_missed`, and
`ostinato_occurrences_missed_total`.
"""


from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.jobs.materialise import dag_of, dag_run_for, run_for
from ostinato.schedules import Schedule, expected_slots, from_document
from ostinato.stores import dags as dag_store
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store
from ostinato.stores.jobs import RecurringJob
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

ACTOR = "reconciler"
log = get_logger("ostinato.reconciler")


def missing_slots(expected: Sequence[datetime], runs: set[datetime],
                  skips: Sequence[tuple[datetime, datetime]]) -> list[datetime]:
    """Expected slots covered by neither a run nor a recorded skip range. Pure."""
    return [slot for slot in expected
            if slot not in runs and not any(first <= slot <= last for first, last in skips)]


def repairs(s: Schedule, missing: Sequence[datetime], now: datetime) -> list[tuple[datetime, str]]:
    """(slot, "run" | "skip") per missing slot, by the schedule's misfire policy. Pure."""
    fresh = [m for m in missing if s.max_lateness is None or now - m <= s.max_lateness]
    if s.misfire == "catch_up":
        runnable = set(fresh[: s.catch_up_max])
    elif s.misfire == "run_once":
        runnable = set(fresh[-1:])
    else:
        runnable = set()
    return [(m, "run" if m in runnable else "skip") for m in missing]


async def check_gaps(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                     window: timedelta, grace: timedelta, page: int = 500) -> int:
    """Find and repair silent omissions in the window; returns how many slots were missing."""
    now = clock.now()
    found, offset = 0, 0
    while True:
        async with pool.acquire() as conn:
            jobs = await job_store.recurring(conn, page, offset)
        for job in jobs:
            found += await _check_job(pool, store, job, now, window, grace)
        if len(jobs) < page:
            return found
        offset += page


async def _check_job(pool: asyncpg.Pool, store: EventStore, job: RecurringJob, now: datetime,
                     window: timedelta, grace: timedelta) -> int:
    s = from_document(job.schedule)
    start = max(now - window, job.created_at)
    end = now - grace
    if job.next_slot is not None:
        end = min(end, job.next_slot)  # the scheduler has not decided later slots yet
    if end <= start:
        return 0
    async with pool.acquire() as conn:
        pauses = [(p.paused_at, p.resumed_at) for p in await job_store.pauses(conn, job.id)]
        expected = expected_slots(s, start, end, paused=pauses)
        if not expected:
            return 0
        runs = await run_store.slots_taken(conn, job.id, start, end)
        skips = [(k.first_slot, k.last_slot)
                 for k in await job_store.skips_between(conn, job.id, start, end)]
    missing = missing_slots(expected, runs, skips)
    if missing:
        await _repair(pool, store, job, s, missing, now)
    return len(missing)


async def _repair(pool: asyncpg.Pool, store: EventStore, job: RecurringJob, s: Schedule,
                  missing: list[datetime], now: datetime) -> None:
    tenant, job_id = job.tenant_id, job.id
    async with pool.acquire() as conn, conn.transaction():
        locked = await job_store.lock_for_repair(conn, job_id)
        assert locked is not None  # jobs are never removed from the read model
        head = StreamHead(job_id, tenant, locked.version)
        events: list[NewEvent] = []
        dag_id = dag_of(locked.task)  # a DAG job's occurrence is a DAG run, not a run
        dags = await dag_store.current_definitions(conn, [dag_id]) if dag_id else {}
        for slot, action in repairs(s, missing, now):
            started = None
            if action == "run" and dag_id is not None:
                dag_run_id, started = dag_run_for(job_id, tenant, dags.get(dag_id), slot, now,
                                                  trigger="repair")
                action = "run" if started is not None else "skip"
            events.append(head.next(ev.OccurrenceMissed(
                scheduled_for=slot, detected_by=ACTOR, repair=action), ACTOR))
            if started is not None:
                events.append(StreamHead(dag_run_id, tenant).next(started, ACTOR))
            elif action == "run":
                run_id, run = run_for(locked, slot, trigger="repair")
                events.append(StreamHead(run_id, tenant).next(run, ACTOR))
            else:
                events.append(head.next(ev.OccurrencesSkipped(
                    first=slot, last=slot, slots=1, reason="missed",
                    next_run_at=locked.next_run_at, next_slot=locked.next_slot), ACTOR))
            alert_missed(tenant, job_id, slot, action)
        await store.append(conn, events)


def alert_missed(tenant_id: uuid.UUID, job_id: uuid.UUID, slot: datetime, repair: str) -> None:
    metrics.OCCURRENCES_MISSED.inc()
    log.error("occurrence missed", tenant_id=str(tenant_id), job_id=str(job_id),
              scheduled_for=slot.isoformat(), repair=repair, alert="ostinato_occurrence_missed")
