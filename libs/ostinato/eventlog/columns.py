"""A hop's batch appended as columns: one statement writes a batch's events with their read
models and outbox row, where `EventStore.append` builds an event, a record and a projection's
row per run (issue 44: handle runs as columns on the hot path).

- `append_queued`, the dispatcher's hop: `RunQueued` for runs it locked;
- `append_fired`, the scheduler's: a due job's one fired slot, `RunScheduled` on the new run's
  stream and `OccurrenceFired` on the job's;
- `append_started`, the gateway's claim: `RunStarted` for each run leased;
- `append_succeeded`, the gateway's report of a batch of completions: `RunSucceeded` each, and
  a fan-out chunk's `ParentNotified` after it when the report tells its parent.

Each writes what `append` and the projector write for the same events: the events as
`append_events` does (in the same order, with the run-end notices of `ended`), the read models
as the events' projections leave them (`project_run_queued` and `sync_run_slots`;
`project_run_scheduled` and `project_occurrence_fired`; `project_run_succeeded` and
`sync_run_slots`), the outbox row as `outbox.messages` builds it. `append_started` runs those
two statements themselves (`append_events`, then `project_run_started`, which also counts the
start-lag histogram), given columns: what it skips is the per-run Python between them.
`tests/integration/test_columnar_append.py` holds each pair of paths to the same rows and a
rebuild from the log to the live ones. The documents are the catalogue's encoder's, so the log
has one encoder.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple, TypeVar

import asyncpg
import msgspec

from ostinato.domain import events as ev
from ostinato.domain.errors import VersionConflict
from ostinato.domain.events import event_type
from ostinato.domain.ids import new_id
from ostinato.eventlog import ended, readmodels
from ostinato.eventlog.outbox import messages, wake_ups
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import EventStore, Q
from ostinato.telemetry import metrics

_json = msgspec.json.Encoder()


class Queued(NamedTuple):
    """A run to queue, as its writer read it under a lock: `version` is its stream's version
    before the event; `traceparent` the one to store on the event (the hop's span's, or the
    run's own)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    version: int
    pool: str
    reason: str
    traceparent: str | None


async def append_queued(store: EventStore, conn: asyncpg.Connection, runs: Sequence[Queued],
                        actor: str) -> None:
    """Append `RunQueued` for each of `runs` (locked by the caller, each able to move to
    queued) in one statement, in the caller's transaction; VersionConflict as `append`."""
    if not runs:
        return
    if not conn.is_in_transaction():
        raise RuntimeError("append_queued must run inside a transaction")
    occurred_at = store.clock.now()
    documents: dict[tuple[str, str], str] = {}
    data, event_ids = [], []
    last: dict[tuple[str, uuid.UUID], tuple[Queued, uuid.UUID, int]] = {}
    for run in runs:
        key = (run.pool, run.reason)
        doc = documents.get(key)
        if doc is None:
            doc = documents[key] = ev.encode_event(ev.RunQueued(*key)).decode()
        data.append(doc)
        event_id = new_id()
        event_ids.append(event_id)
        seen = last.get((run.pool, run.tenant_id))
        last[(run.pool, run.tenant_id)] = (run, event_id, 1 if seen is None else seen[2] + 1)
    # the wake-ups: one per (topic, tenant), the envelope of its last event (outbox.messages)
    told = {(store.topics.ready(pool), tenant_id): (
        NewEvent(r.id, r.version + 1, tenant_id, ev.RunQueued(r.pool, r.reason), actor,
                 traceparent=r.traceparent, event_id=event_id), n)
        for (pool, tenant_id), (r, event_id, n) in last.items()}
    await _execute(conn, Q["append_run_queued"], [r.id for r in runs],
                   [r.version + 1 for r in runs], [r.tenant_id for r in runs], event_ids,
                   [r.pool for r in runs], data, [r.traceparent for r in runs], actor,
                   occurred_at, *wake_ups(told, occurred_at))
    metrics.EVENTS_APPENDED.inc(len(runs))


class Fired(NamedTuple):
    """A due job's one fired slot as the scheduler decided it: the run it creates (`run`, made
    by `jobs.materialise.run_for`) and where the job moves on to. `job_version`: the job
    stream's version after `OccurrenceFired`."""

    run_id: uuid.UUID
    tenant_id: uuid.UUID
    run: ev.RunScheduled
    job_version: int
    next_run_at: datetime | None
    next_slot: datetime | None
    epoch: int | None
    traceparent: str | None


def fires_as_columns(run: ev.RunScheduled) -> bool:
    """Whether a run's creation can go through `append_fired`: one that writes nothing beside
    its row (no searchable attributes, no workflow id: `readmodels._side_rows`)."""
    return not run.attributes and run.workflow_id is None


async def append_fired(store: EventStore, conn: asyncpg.Connection, fired: Sequence[Fired],
                       actor: str) -> None:
    """Append each fired slot's `RunScheduled` (version 1 of the new run) and `OccurrenceFired`
    (the job's, at `job_version`; one a job) in one statement, in the caller's transaction;
    VersionConflict as `append` (the run or the job written meanwhile)."""
    if not fired:
        return
    if not conn.is_in_transaction():
        raise RuntimeError("append_fired must run inside a transaction")
    occurred_at = store.clock.now()
    encode = ev.encode_event
    event_ids = [new_id() for _ in fired]
    last: dict[uuid.UUID, tuple[int, int]] = {}  # tenant -> (its last run's index, runs)
    for i, f in enumerate(fired):
        seen = last.get(f.tenant_id)
        last[f.tenant_id] = (i, 1 if seen is None else seen[1] + 1)
    # the wake-ups on runs.due: one a tenant, its last run's `RunScheduled` (outbox.messages)
    told = {(store.topics.due, tenant_id): (NewEvent(
        fired[i].run_id, 1, tenant_id, fired[i].run, actor, epoch=fired[i].epoch,
        traceparent=fired[i].traceparent, event_id=event_ids[i]), n)
        for tenant_id, (i, n) in last.items()}
    runs = [f.run for f in fired]
    await _execute(
        conn, Q["append_run_fired"], [f.run_id for f in fired], [f.tenant_id for f in fired],
        event_ids, [encode(r).decode() for r in runs], [new_id() for _ in fired],
        [encode(ev.OccurrenceFired(scheduled_for=f.run.scheduled_for, run_id=f.run_id,
                                   next_run_at=f.next_run_at, next_slot=f.next_slot)).decode()
         for f in fired],
        [f.job_version for f in fired], [f.epoch for f in fired],
        [f.traceparent for f in fired], [f.next_run_at for f in fired],
        [f.next_slot for f in fired], [r.job_id for r in runs], [r.task for r in runs],
        [r.pool for r in runs], [r.priority for r in runs], [r.payload_ref for r in runs],
        [r.scheduled_for for r in runs], [r.trigger for r in runs], [r.due_at for r in runs],
        [None if r.retry is None else _json.encode(r.retry).decode() for r in runs],
        [r.timeout_seconds for r in runs], [r.queue_wait_seconds for r in runs],
        [r.on_queue_wait for r in runs], [r.replay_of for r in runs],
        [r.concurrency_key for r in runs], [r.resource for r in runs],
        [r.parent_run_id for r in runs], [r.payload_version for r in runs],
        actor, occurred_at, *wake_ups(told, occurred_at))
    metrics.EVENTS_APPENDED.inc(2 * len(fired))


async def append_started(store: EventStore, conn: asyncpg.Connection,
                         events: Sequence[NewEvent]) -> None:
    """Append `events`, every one a `RunStarted` made by `StreamHead.next` on a locked run, in
    the caller's transaction; VersionConflict as `append`. Two statements, each given columns:
    the log's `append_events` and the projector's own `project_run_started` (the start-lag
    histogram is counted in one place)."""
    if not events:
        return
    occurred_at = store.clock.now()
    started = _all_of(ev.RunStarted, conn, events)
    encode = ev.encode_event
    n = len(events)
    ids, versions, traces = ([e.stream_id for e in events], [e.version for e in events],
                             [e.traceparent for e in events])
    await _execute(
        conn, Q["append_events"], ids, versions, ["run"] * n, [e.tenant_id for e in events],
        [e.event_id for e in events], ["RunStarted"] * n, [encode(d).decode() for d in started],
        [e.actor for e in events], [e.epoch for e in events], traces, occurred_at,
        *messages(store.topics, events, occurred_at), ended.notices(events))
    await conn.execute(
        readmodels.Q["project_run_started"], ids, [d.attempt for d in started],
        [d.fencing_token for d in started], [d.worker_id for d in started], [occurred_at] * n,
        versions, traces, [d.task_version for d in started], [d.pinned for d in started])
    metrics.EVENTS_APPENDED.inc(n)


async def append_succeeded(store: EventStore, conn: asyncpg.Connection,
                           events: Sequence[NewEvent], told: Sequence[NewEvent] = ()) -> None:
    """Append `events`, every one a `RunSucceeded` made by `StreamHead.next` on a locked run,
    in one statement, in the caller's transaction; VersionConflict as `append`. `told`: some of
    those runs' `ParentNotified`, each the event after its run's `RunSucceeded` (a fan-out
    chunk whose parent the transaction holds), written in the same statement and the same
    write of the run's row."""
    if not events:
        return
    occurred_at = store.clock.now()
    done = _all_of(ev.RunSucceeded, conn, events)
    after = _told_after(conn, events, told)
    encode = ev.encode_event
    await _execute(
        conn, Q["append_run_succeeded"], [e.stream_id for e in events],
        [e.version for e in events], [e.tenant_id for e in events],
        [e.event_id for e in events], [encode(d).decode() for d in done],
        [e.actor for e in events], [e.epoch for e in events], [e.traceparent for e in events],
        [d.output_ref for d in done], [d.logs_ref for d in done],
        occurred_at, *messages(store.topics, [*events, *told], occurred_at),
        ended.notices(events),
        [t and t.event_id for t in after], [t and encode(t.event).decode() for t in after],
        [t and t.actor for t in after], [t and t.epoch for t in after],
        [t and t.traceparent for t in after])
    metrics.EVENTS_APPENDED.inc(len(events) + len(told))


def _told_after(conn: asyncpg.Connection, events: Sequence[NewEvent],
                told: Sequence[NewEvent]) -> list[NewEvent | None]:
    """`told` aligned with `events`: each run's `ParentNotified` or None; a told event that is
    not its run's next after the `RunSucceeded` is refused before anything is written."""
    if not told:
        return [None] * len(events)
    _all_of(ev.ParentNotified, conn, told)
    by_run = {t.stream_id: t for t in told}
    after = [by_run.pop(e.stream_id, None) for e in events]
    for e, t in zip(events, after, strict=True):
        if t is not None and t.version != e.version + 1:
            raise ValueError(f"ParentNotified of run {e.stream_id} must follow its RunSucceeded"
                             f" (version {e.version + 1}, not {t.version})")
    if by_run:
        raise ValueError(f"ParentNotified of runs without a RunSucceeded here: {sorted(by_run)}")
    return after


E = TypeVar("E", bound=ev.Event)


def _all_of(kind: type[E], conn: asyncpg.Connection, events: Sequence[NewEvent]) -> list[E]:
    """The events' payloads, each checked to be a `kind` (what the statement writes), inside a
    transaction (the caller's, so all commit or none do)."""
    if not conn.is_in_transaction():
        raise RuntimeError("a columnar append must run inside a transaction")
    found: list[E] = []
    for e in events:
        if type(e.event) is not kind:
            raise TypeError(f"this append writes {kind.__name__}, not {event_type(e.event)}")
        found.append(e.event)  # type: ignore[arg-type]
    return found


# A statement's parts run in no promised order: a run created twice may meet its row's key
# before its first event's; either is the version conflict `append` reports.
_CONFLICTS = frozenset({"events_pkey", "runs_pkey"})


async def _execute(conn: asyncpg.Connection, statement: str, *args: object) -> None:
    try:
        await conn.execute(statement, *args)
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name in _CONFLICTS:
            raise VersionConflict(
                "the stream was changed concurrently; re-read it and try again") from exc
        raise
