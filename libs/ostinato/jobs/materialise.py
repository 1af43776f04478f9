"""The one writer of `RunScheduled`: how a job's row (or a parent run) becomes a run.

`scheduled` is the event's one constructor: every run is created through it, a job's
occurrence (`run_for`, below), a workflow's child (`ostinato.runs.children`), a fan-out's
chunk and completion runs (`ostinato.runs.fanout`) and a DAG node's run (`ostinato.runs.dags`).
`run_for` builds the event with the job's task, pool, payload (with the payload schema version
it was validated against at submission) and its retry, timeout and queue-wait settings as they
were when the run was created (a later change to the job does not change runs already made);
the run id derives from the occurrence, so a second creation of the same occurrence is a
version conflict. `decide_and_append` decides each locked due job
(`ostinato.jobs.decide`) and appends, in the caller's transaction: per fired slot `RunScheduled`
on the run's stream and `OccurrenceFired` on the job's, per skipped range `OccurrencesSkipped`,
and `JobPaused` for an auto-pause. The common decision, one slot fired and nothing else, goes
as columns (`eventlog.columns.append_fired`: one statement for the batch's events and rows).
The scheduler's tick and the reconciler's repairs call it;
trigger, backfill, retry and replay call `run_for` (for a DAG job, trigger and backfill call
`dag_run_for`).

A job whose task is `dag:<DAG id>` (`ostinato.dags.targets`) starts a DAG run per fired slot
instead: `DagRunStarted` (id from the occurrence, the DAG's current version, due at the slot's
due time, `pending`) on its own stream, with `OccurrenceFired` naming it; the scheduler's
`advance_dags` duty starts its root nodes (`ostinato.runs.dags`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

import asyncpg

from ostinato import calendars
from ostinato.clock import Clock
from ostinato.dags import graph, targets
from ostinato.domain import events as ev
from ostinato.domain.ids import run_id_for
from ostinato.eventlog.columns import Fired, append_fired, fires_as_columns
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.jobs.decide import Decision, decide
from ostinato.schedules import from_document
from ostinato.stores import dags as dag_store
from ostinato.stores import runs as run_store
from ostinato.stores.jobs import DueJob
from ostinato.telemetry import metrics, tracing
from ostinato.telemetry.logging import get_logger

WAIT_RECHECK = timedelta(seconds=1)  # how often a job waiting on overlap=queue is looked at
log = get_logger("ostinato.scheduler")


class JobSettings(Protocol):
    """What a run copies from its job (a `JobRow`, `DueJob` or `RepairJob`, or a job with
    some settings taken from an earlier run): read-only attributes."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def task(self) -> str: ...
    @property
    def pool(self) -> str: ...
    @property
    def priority(self) -> str: ...
    @property
    def payload_ref(self) -> uuid.UUID: ...
    @property
    def retry_policy(self) -> Any: ...
    @property
    def timeout_seconds(self) -> float | None: ...
    @property
    def queue_wait_seconds(self) -> float | None: ...
    @property
    def on_queue_wait(self) -> str | None: ...
    @property
    def concurrency_key(self) -> str | None: ...
    @property
    def resource(self) -> str | None: ...
    @property
    def payload_version(self) -> int | None: ...


def scheduled(*, job_id: uuid.UUID, task: str, pool: str, priority: str,
              payload_ref: uuid.UUID, scheduled_for: datetime, trigger: str, due_at: datetime,
              retry: dict[str, Any] | None, timeout_seconds: float | None = None,
              queue_wait_seconds: float | None = None, on_queue_wait: str | None = None,
              replay_of: uuid.UUID | None = None, concurrency_key: str | None = None,
              resource: str | None = None, payload_version: int | None = None,
              parent_run_id: uuid.UUID | None = None, fan_out_index: int | None = None,
              fan_out_seq: int | None = None, dag_run_id: uuid.UUID | None = None,
              dag_node: str | None = None,
              attributes: dict[str, Any] | None = None) -> ev.RunScheduled:
    """The one constructor of `RunScheduled` (a run's first event): what the run is (task,
    pool, priority, payload), when it is due, with which retry policy, and where it comes from
    (`trigger`, and the parent run, fan-out position or DAG node that made it)."""
    return ev.RunScheduled(
        job_id=job_id, task=task, pool=pool, priority=priority, payload_ref=payload_ref,
        scheduled_for=scheduled_for, trigger=trigger, due_at=due_at, retry=retry,
        timeout_seconds=timeout_seconds, queue_wait_seconds=queue_wait_seconds,
        on_queue_wait=on_queue_wait, replay_of=replay_of, concurrency_key=concurrency_key,
        resource=resource, payload_version=payload_version, parent_run_id=parent_run_id,
        fan_out_index=fan_out_index, fan_out_seq=fan_out_seq, dag_run_id=dag_run_id,
        dag_node=dag_node, attributes=attributes or None)


def run_for(job: JobSettings, slot: datetime, *, trigger: str = "schedule",
            due_at: datetime | None = None, run_id: uuid.UUID | None = None,
            replay_of: uuid.UUID | None = None,
            payload_ref: uuid.UUID | None = None,
            attributes: dict[str, Any] | None = None) -> tuple[uuid.UUID, ev.RunScheduled]:
    """(run id, event) for `slot`; the run id derives from the occurrence unless given. The
    run keeps the job's payload version: the version its payload was validated against, even
    when a newer schema of the task has been registered since (a queued run is never read with
    a meaning its submitter did not check)."""
    return run_id or run_id_for(job.id, slot), scheduled(
        job_id=job.id, task=job.task, pool=job.pool, priority=job.priority,
        payload_ref=payload_ref or job.payload_ref, scheduled_for=slot, trigger=trigger,
        due_at=due_at or slot, retry=job.retry_policy, timeout_seconds=job.timeout_seconds,
        queue_wait_seconds=job.queue_wait_seconds, on_queue_wait=job.on_queue_wait,
        replay_of=replay_of, concurrency_key=job.concurrency_key, resource=job.resource,
        payload_version=job.payload_version,
        # searchable attributes: given (a manual run's, a re-run's), else the job's (DueJob and
        # RepairJob carry them; None: it has none)
        attributes=attributes if attributes is not None else getattr(job, "attributes", None),
    )


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


def dag_run_for(job_id: uuid.UUID, tenant_id: uuid.UUID, dag: dag_store.DagCurrent | None,
                slot: datetime, due: datetime, *, trigger: str = "schedule",
                run_id: uuid.UUID | None = None,
                ) -> tuple[uuid.UUID, ev.DagRunStarted | None]:
    """The DAG run an occurrence of a DAG job starts (None: its DAG is not the job's tenant's);
    its id is the occurrence's unless given (a trigger's request key), so the scheduler, a
    backfill and a reconciler repair of the same slot start one at most."""
    run_id = run_id or targets.dag_run_id_for(job_id, slot)
    if dag is None or dag.tenant_id != tenant_id:
        return run_id, None
    order = graph.from_stored(dag.definition).order
    return run_id, ev.DagRunStarted(dag_id=dag.id, dag_version=dag.version, nodes=list(order),
                                    due_at=due, trigger=trigger, job_id=job_id,
                                    scheduled_for=slot)


def _job_events(job: DueJob, head: StreamHead, d: Decision, actor: str,
                epoch: int | None = None, dags: Mapping[uuid.UUID, dag_store.DagCurrent] | None
                = None) -> tuple[list[NewEvent], list[ev.RunScheduled]]:
    tenant, job_id = job.tenant_id, job.id
    events: list[NewEvent] = []
    runs: list[ev.RunScheduled] = []
    fired = [(slot, due, None) for slot, due in d.fire]
    skips = [(r.first, None, r) for r in d.skipped]
    dag_id = dag_of(job.task)
    for slot, due, skip in sorted(fired + skips, key=lambda step: step[0]):  # chronological
        if skip is None and dag_id is not None:
            assert due is not None
            dag_run_id, started = dag_run_for(job.id, tenant, (dags or {}).get(dag_id), slot,
                                              due)
            if started is None:
                events.append(head.next(ev.OccurrencesSkipped(
                    first=slot, last=slot, slots=1, reason="no_dag", next_run_at=d.next_run_at,
                    next_slot=d.next_slot), actor, epoch=epoch))
                log.error("DAG job names no DAG of its tenant", tenant_id=str(tenant),
                          job_id=str(job_id), task=job.task, alert="ostinato_dag_missing")
                continue
            events.append(StreamHead(dag_run_id, tenant).next(started, actor, epoch=epoch,
                                                              traceparent=job.traceparent))
            events.append(head.next(ev.OccurrenceFired(
                scheduled_for=slot, run_id=dag_run_id, next_run_at=d.next_run_at,
                next_slot=d.next_slot), actor, epoch=epoch, traceparent=job.traceparent))
        elif skip is None:
            run_id, run = run_for(job, slot, due_at=due)
            tp = tracing.run_hop("schedule run", job.traceparent, tenant_id=tenant,
                                 job_id=job_id, run_id=run_id)
            runs.append(run)
            events.append(StreamHead(run_id, tenant).next(run, actor, epoch=epoch,
                                                          traceparent=tp))
            events.append(head.next(ev.OccurrenceFired(
                scheduled_for=slot, run_id=run_id, next_run_at=d.next_run_at,
                next_slot=d.next_slot), actor, epoch=epoch, traceparent=tp))
        else:
            events.append(head.next(ev.OccurrencesSkipped(
                first=skip.first, last=skip.last, slots=skip.count, reason=skip.reason,
                next_run_at=d.next_run_at, next_slot=d.next_slot), actor, epoch=epoch))
    if d.pause_reason:
        events.append(head.next(ev.JobPaused(reason=d.pause_reason, auto=True), actor))
    return events, runs


async def decide_and_append(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, due: Sequence[DueJob],
    *, actor: str, waiting: Waiting | None = None, epochs: Mapping[int, int] | None = None,
    heads: Mapping[uuid.UUID, StreamHead] | None = None,
) -> list[ev.RunScheduled]:
    """Decide each locked due job and append the outcome, in the caller's transaction. `heads`:
    job streams the caller has already appended to in this transaction."""
    if not due:
        return []
    now = clock.now()
    excluded = await calendars.excluded_dates(
        conn, {(j.tenant_id, j.calendar) for j in due if j.calendar})
    overlapping = [j.id for j in due if j.overlap != "allow"]
    active = await run_store.active_counts(conn, overlapping) if overlapping else {}
    dag_ids = {d for d in (dag_of(j.task) for j in due) if d is not None}
    dags = await dag_store.current_definitions(conn, list(dag_ids)) if dag_ids else {}
    events: list[NewEvent] = []
    fired: list[Fired] = []
    created: list[ev.RunScheduled] = []
    for job in due:
        decision = decide(
            from_document(job.schedule), job_id=job.id, next_slot=job.next_slot,
            now=now, excluded_dates=excluded.get((job.tenant_id, job.calendar), frozenset()),
            policy=job.resume_policy, active_runs=active.get(job.id, 0),
            consecutive_failures=job.consecutive_failures)
        if decision.wait:
            if waiting is not None:
                waiting.add(job.id, clock.monotonic())
            continue
        epoch = None if epochs is None else epochs.get(job.shard)
        head = heads[job.id] if heads else StreamHead.of(job)
        one = _fired_alone(job, head, decision, epoch)
        if one is not None:  # most decisions: one slot fired, nothing else
            fired.append(one)
            created.append(one.run)
        else:
            job_events, runs = _job_events(job, head, decision, actor, epoch, dags)
            events += job_events
            created += runs
        _log_decision(job, decision)
    await append_fired(store, conn, fired, actor)
    await store.append(conn, events)
    return created


def _fired_alone(job: DueJob, head: StreamHead, d: Decision,
                 epoch: int | None) -> Fired | None:
    """The decision as one fired slot for `append_fired` (the job's head moved on past it), or
    None when it is more (skips, a pause, several slots, a DAG run, side rows): `_job_events`."""
    if len(d.fire) != 1 or d.skipped or d.pause_reason or dag_of(job.task) is not None:
        return None
    slot, due = d.fire[0]
    run_id, run = run_for(job, slot, due_at=due)
    if not fires_as_columns(run):
        return None
    tp = tracing.run_hop("schedule run", job.traceparent, tenant_id=job.tenant_id,
                         job_id=job.id, run_id=run_id)
    head.version += 1
    return Fired(run_id, job.tenant_id, run, head.version, d.next_run_at, d.next_slot, epoch, tp)


def dag_of(task: str | None) -> uuid.UUID | None:
    """The DAG a job's task names (`dag:<id>`), None for a plain task or a malformed name."""
    try:
        return targets.dag_of_task(task)
    except ValueError:
        return None


def _log_decision(job: DueJob, d: Decision) -> None:
    debug = log.is_enabled_for(logging.DEBUG)
    if not (debug or d.skipped or d.pause_reason):
        return  # most decisions: one slot fired, nothing to count or say at info
    ids = {"tenant_id": str(job.tenant_id), "job_id": str(job.id)}
    if debug:  # the ids cost more than the call: skip them unless read
        for slot, _ in d.fire:
            log.debug("run scheduled", **ids, run_id=str(run_id_for(job.id, slot)),
                      scheduled_for=slot.isoformat())
    for r in d.skipped:
        metrics.OCCURRENCES_SKIPPED.labels(reason=r.reason).inc(r.count or 1)
        log.info("occurrences skipped", **ids, first=r.first.isoformat(),
                 last=r.last.isoformat(), slots=r.count, reason=r.reason)
    if d.pause_reason:
        metrics.JOBS_AUTO_PAUSED.inc()
        log.error("job auto-paused", **ids, reason=d.pause_reason, alert="ostinato_job_auto_paused")
