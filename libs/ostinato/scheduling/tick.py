"""The scheduler's duty: turn due occurrences into runs (or recorded skips).

One tick locks a small batch of due jobs (`FOR UPDATE SKIP LOCKED` over the partial index on
`next_run_at`), decides each (`decide.py`), and appends in one transaction: per fired slot
`RunScheduled` on the occurrence's run stream (version 1: the run id derives from the
occurrence, so a second creation is a version conflict) and `OccurrenceFired` on the job's
stream; per skipped range `OccurrencesSkipped`; `JobPaused` for an auto-pause. The next slot and
its due instant travel in those job events, so they are stored in the same transaction as the
materialisation. Shard leases with epochs arrive with the fault-tolerance issue; SKIP LOCKED
already keeps concurrent schedulers from sharing a job.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import asyncpg

from ostinato import calendars
from ostinato.clock import Clock
from ostinato.db.sqlstate import TRANSIENT_ERRORS
from ostinato.domain import events as ev
from ostinato.domain.ids import run_id_for
from ostinato.eventlog.readmodels import Q
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import EventStore
from ostinato.jobs.materialise import run_for
from ostinato.leases.shard import SHARDS, ShardLeases, ShardOwnership, hold
from ostinato.schedules import from_document
from ostinato.scheduling.decide import Decision, decide
from ostinato.telemetry import metrics, tracing
from ostinato.telemetry.logging import get_logger

ACTOR = "scheduler"
WAIT_RECHECK = timedelta(seconds=1)  # how often a job waiting on overlap=queue is looked at
log = get_logger("ostinato.scheduler")


class Waiting:
    """Jobs waiting for a previous run (overlap=queue), left out of polls for a moment so they
    cannot crowd the batch. In memory only: forgetting it costs one extra look, nothing more."""

    def __init__(self) -> None:
        self._until: dict[uuid.UUID, float] = {}

    def ids(self, now: float) -> list[uuid.UUID]:
        self._until = {k: v for k, v in self._until.items() if v > now}
        return list(self._until)

    def add(self, job_id: uuid.UUID, now: float) -> None:
        self._until[job_id] = now + WAIT_RECHECK.total_seconds()


def _job_events(job: Mapping[str, Any], d: Decision, actor: str,
                epoch: int | None = None) -> tuple[list[NewEvent], list[ev.RunScheduled]]:
    tenant, job_id = job["tenant_id"], job["id"]
    version = job["version"]
    events: list[NewEvent] = []
    runs: list[ev.RunScheduled] = []
    fired = [(slot, due, None) for slot, due in d.fire]
    skips = [(r.first, None, r) for r in d.skipped]
    for slot, due, skip in sorted(fired + skips, key=lambda step: step[0]):  # chronological
        version += 1
        if skip is None:
            run_id, run = run_for(job, slot, due_at=due)
            with tracing.run_span("schedule run", job["traceparent"], tenant_id=tenant,
                                  job_id=job_id, run_id=run_id) as tp:
                pass  # the span marks the hop; its context is stored on the events below
            runs.append(run)
            events.append(NewEvent(run_id, 1, tenant, run, actor, epoch=epoch, traceparent=tp))
            events.append(NewEvent(job_id, version, tenant, ev.OccurrenceFired(
                scheduled_for=slot, run_id=run_id, next_run_at=d.next_run_at,
                next_slot=d.next_slot), actor, epoch=epoch, traceparent=tp))
        else:
            events.append(NewEvent(job_id, version, tenant, ev.OccurrencesSkipped(
                first=skip.first, last=skip.last, slots=skip.count, reason=skip.reason,
                next_run_at=d.next_run_at, next_slot=d.next_slot), actor, epoch=epoch))
    if d.pause_reason:
        version += 1
        events.append(NewEvent(job_id, version, tenant,
                               ev.JobPaused(reason=d.pause_reason, auto=True), actor))
    return events, runs


async def fire_due(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, batch_size: int = 100,
    actor: str = ACTOR, waiting: Waiting | None = None,
    ownership: ShardOwnership | None = None,
) -> list[ev.RunScheduled]:
    """Decide one batch of due jobs (of the leased shards, when `ownership` is given: writes
    happen only under leases still current in this transaction); returns the runs created."""
    waiting = waiting or Waiting()
    async with pool.acquire() as conn, conn.transaction():
        shards = list(range(SHARDS))  # no ownership (tests, one scheduler): every shard
        if ownership is not None:
            shards = (await hold(conn, ownership, clock)).shards()
            if not shards:
                return []
        due = await conn.fetch(Q["claim_due_jobs"], clock.now(), batch_size,
                               waiting.ids(clock.monotonic()), shards)
        created = await decide_and_append(conn, store, clock, due, actor=actor, waiting=waiting,
                                          epochs=None if ownership is None
                                          else ownership.epochs)
    metrics.RUNS_CREATED.inc(len(created))
    return created


async def decide_and_append(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, due: Sequence[Mapping[str, Any]],
    *, actor: str, waiting: Waiting | None = None, epochs: Mapping[int, int] | None = None,
) -> list[ev.RunScheduled]:
    """Decide each locked due job and append the outcome, in the caller's transaction."""
    if not due:
        return []
    now = clock.now()
    excluded = await calendars.excluded_dates(
        conn, {(j["tenant_id"], j["calendar"]) for j in due if j["calendar"]})
    overlapping = [j["id"] for j in due if j["overlap"] != "allow"]
    active = {r["job_id"]: r["active"] for r in
              await conn.fetch(Q["active_runs_of_jobs"], overlapping)} if overlapping else {}
    events: list[NewEvent] = []
    created: list[ev.RunScheduled] = []
    for job in due:
        decision = decide(
            from_document(job["schedule"]), job_id=job["id"], next_slot=job["next_slot"],
            now=now, excluded_dates=excluded.get((job["tenant_id"], job["calendar"]),
                                                 frozenset()),
            policy=job["resume_policy"], active_runs=active.get(job["id"], 0),
            consecutive_failures=job["consecutive_failures"])
        if decision.wait:
            if waiting is not None:
                waiting.add(job["id"], clock.monotonic())
            continue
        epoch = None if epochs is None else epochs.get(job["shard"])
        job_events, runs = _job_events(job, decision, actor, epoch)
        events += job_events
        created += runs
        _log_decision(job, decision)
    await store.append(conn, events)
    return created


def _log_decision(job: Mapping[str, Any], d: Decision) -> None:
    ids = {"tenant_id": str(job["tenant_id"]), "job_id": str(job["id"])}
    if log.is_enabled_for(logging.DEBUG):  # the ids cost more than the call: skip them unless read
        for slot, _ in d.fire:
            log.debug("run scheduled", **ids, run_id=str(run_id_for(job["id"], slot)),
                      scheduled_for=slot.isoformat())
    for r in d.skipped:
        metrics.OCCURRENCES_SKIPPED.labels(reason=r.reason).inc(r.count or 1)
        log.info("occurrences skipped", **ids, first=r.first.isoformat(),
                 last=r.last.isoformat(), slots=r.count, reason=r.reason)
    if d.pause_reason:
        metrics.JOBS_AUTO_PAUSED.inc()
        log.error("job auto-paused", **ids, reason=d.pause_reason, alert="ostinato_job_auto_paused")


async def release_retries(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                          batch_size: int = 500, actor: str = ACTOR) -> int:
    """Hand runs whose retry is due to the dispatcher (`RetryDue` on `runs.due`)."""
    async with pool.acquire() as conn, conn.transaction():
        rows = await conn.fetch(Q["claim_due_retries"], clock.now(), batch_size)
        await store.append(conn, [
            NewEvent(r["id"], r["version"] + 1, r["tenant_id"], ev.RetryDue(pool=r["pool"]),
                     actor, traceparent=r["traceparent"])
            for r in rows])
    return len(rows)


async def run_scheduler(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, batch_size: int,
    poll_seconds: float, stopping: asyncio.Event, on_created: Callable[[], None],
    leases: ShardLeases | None = None,
) -> None:
    """Fire due occurrences until `stopping` is set: back to back while batches are full,
    otherwise once per `poll_seconds`. With `leases`, only on the shards this instance leases,
    renewed every third of their time to live and handed back on stop. A database error is
    logged and retried, never fatal."""
    waiting = Waiting()
    renew_every = leases.ttl.total_seconds() / 3 if leases else 0.0
    renewed_at = float("-inf")
    while not stopping.is_set():
        try:
            if leases is not None and clock.monotonic() - renewed_at >= renew_every:
                await leases.refresh()
                renewed_at = clock.monotonic()
            with metrics.SCHEDULER_TICK_SECONDS.time():
                created = await fire_due(pool, store, clock, batch_size=batch_size,
                                         waiting=waiting,
                                         ownership=leases.ownership if leases else None)
                retries = await release_retries(pool, store, clock)
        except TRANSIENT_ERRORS as exc:
            log.warning("scheduler tick failed; retrying", error=repr(exc))
            created, retries = [], 0
            await asyncio.sleep(1.0)
        if created or retries:
            on_created()
        if created:
            log.info("runs created", count=len(created))
        if len(created) < batch_size:
            try:
                await asyncio.wait_for(stopping.wait(), poll_seconds)
            except TimeoutError:
                pass
    if leases is not None:
        await leases.release_all()
