"""Recording what workers report about their attempts: completions, failures, releases.

Per item, on the run row locked in the request's transaction:

- token current and the run `running`: the outcome is recorded. A completion becomes
  `RunSucceeded` (or `RunCancelled` keeping the result when a cancel was requested); a failure
  is classified by the job's retry policy and followed by `RetryScheduled` or
  `RunDeadLettered` (`outcomes.after_failure`); a release becomes `LeaseReleased` (back to the
  queue at once, no attempt used). The lease row is deleted.
- token current but the run already past `running`: a retried report of an outcome already
  recorded (the SDK resends when an answer was lost): 200, nothing new.
- any other token: `StaleWriteRejected` with who tried what, and 409.

Events and blobs carry the tenant of the locked run row: a shared worker (admin key) reports for
runs of many tenants in one batch. The caller passes only the rows the worker may see.

A fan-out's chunk run that ends (final: succeeded, dead-lettered, cancelled) is counted by its
parent's fan-out, and the next chunks admitted, in the same transaction
(`tell_chunk_parents`, after the report's events): the parent is locked only if it is free
(the report holds the chunks' rows; the scheduler and a cancel lock a parent before its
children, so waiting could deadlock), its fan-out read afresh under that lock, the progress
appended at the parent's fresh version, and the chunk's `ParentNotified` with it: the
scheduler's poll (`ostinato.runs.children.notify_parents`) never counts that end again. The
parents of the chunks a report ends are locked before its events are appended
(`tell_with_ends`), so a succeeded chunk's `ParentNotified` is written by the statement that
writes its `RunSucceeded`, and its row once. The
ends of a parent that was busy (two reports ending chunks of one parent at once) are told by
the next report that ends one of its chunks, or by that poll, whichever comes first; every
lock here is taken without waiting (SKIP LOCKED), so no two of these transactions wait for
each other.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from ostinato import outcomes
from ostinato.domain import events as ev
from ostinato.domain.ids import new_id
from ostinato.domain.states import RunState
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.policy import retry
from ostinato.runs import children
from ostinato.stores import runs as run_store
from ostinato.stores.runs import ChildRun, LockedRun, ReportedRun
from ostinato.wire import worker as p

ACTOR = "worker-gateway"  # the parent's progress: the gateway's, not the worker's own write
_json = msgspec.json.Encoder()
ENDINGS = (ev.RunSucceeded, ev.RunFailed, ev.AttemptTimedOut, ev.LeaseReleased, ev.RunCancelled,
           ev.RunDeadLettered)


def parse_run_id(raw: str) -> uuid.UUID | None:
    """A run id from the wire; None when it is not a UUID (answered 404 like an unknown run)."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Outcome:
    """A completion, failure or release to record."""

    run_id: uuid.UUID | None  # None when the id did not parse
    raw_run_id: str
    fencing_token: int
    kind: str  # "complete" | "fail" | "release"
    output: Any = None
    error: p.ErrorInfo | None = None
    logs: list[p.LogLine] | None = None


@dataclass
class Recorded:
    results: list[p.BatchItemResult]
    events: list[NewEvent]
    blobs: list[tuple[uuid.UUID, uuid.UUID, bytes, str]]
    finished: list[uuid.UUID]  # runs whose lease ends


def failure_events(row: LockedRun | ReportedRun, o: Outcome, now: datetime, actor: str,
                   logs_ref: uuid.UUID | None = None) -> list[ev.Event]:
    assert o.error is not None
    err = o.error
    if err.type == "attempt_timed_out":
        return outcomes.timed_out(row, now=now, detected_by="worker")
    failure = ev.RunFailed(attempt=row.attempt, fencing_token=o.fencing_token,
                           error_type=err.type, message=err.message, retryable=err.retryable,
                           logs_ref=logs_ref)
    policy = retry.from_document(row.retry_policy)
    after = err.retry_after_seconds
    classification = retry.classify(policy, error_type=err.type, retryable=err.retryable,
                                    classified=err.classified)
    if err.classified and after is not None and classification != "permanent":
        classification = "throttled"  # the handler said when to come back, whatever its type
    return outcomes.after_failure(
        row, failure, error_type=err.type, message=err.message, classification=classification,
        now=now, by=actor, retry_after=None if after is None else timedelta(seconds=after))


def record_outcomes(rows: Mapping[uuid.UUID, ReportedRun], worker_id: str,
                    items: Sequence[Outcome], now: datetime) -> Recorded:
    """Pure over the locked rows (those of runs the worker may report on): the events and
    answers for a batch of reports."""
    actor = f"worker:{worker_id}"
    done = Recorded([], [], [], [])
    heads = {rid: StreamHead.of(r) for rid, r in rows.items()}
    for o in items:
        row = rows.get(o.run_id) if o.run_id else None
        if row is None:
            done.results.append(_answer(o, 404, "no such run for this tenant"))
            continue
        rid, token, tenant_id = row.id, row.fencing_token, row.tenant_id
        head = heads[rid]
        if token == o.fencing_token and head.state is RunState.RUNNING:
            new = _events_for(row, o, now, actor, tenant_id, done.blobs)
            done.finished.append(rid)  # no longer running: a repeat below is answered 200
            done.results.append(_answer(o, 200))
        elif token == o.fencing_token:
            done.results.append(_answer(o, 200))  # already recorded
            continue
        else:
            new = [ev.StaleWriteRejected(operation=o.kind, presented_token=o.fencing_token,
                                         current_token=token, worker_id=worker_id)]
            done.results.append(_answer(
                o, 409, f"stale fencing token: the run's token is now {token}; this attempt "
                        "lost its lease"))
        done.events.extend(head.next(event, actor, epoch=o.fencing_token,
                                     traceparent=row.traceparent) for event in new)
    return done


@dataclass
class ToldWithEnds:
    """Fan-out chunk ends a report tells with the ends themselves (`tell_with_ends`)."""

    parents: dict[uuid.UUID, LockedRun]  # locked by the report's transaction
    events: list[NewEvent]  # each chunk's ParentNotified, the event after its RunSucceeded
    chunks: list[ChildRun]  # the chunks as those two events leave their rows


async def tell_with_ends(conn: asyncpg.Connection, rows: Mapping[uuid.UUID, ReportedRun],
                         events: Sequence[NewEvent]) -> ToldWithEnds:
    """In a report's transaction, before its events are appended: the fan-out chunks that
    `events` end with `RunSucceeded` whose parents are free, those parents locked now, and each
    chunk's `ParentNotified`, to append with its end (`columns.append_succeeded`'s `told`), so
    its row is written once rather than twice. `tell_chunk_parents` then counts them."""
    told = ToldWithEnds({}, [], [])
    if all(row.parent_run_id is None for row in rows.values()):
        return told  # most reports: no run has a parent
    last = {e.stream_id: e for e in events}
    ends = {e.stream_id: (e, row, row.parent_run_id) for e in last.values()
            if type(e.event) is ev.RunSucceeded and (row := rows.get(e.stream_id)) is not None
            and row.parent_run_id is not None and row.trigger == "fan_out"}
    if not ends:
        return told
    told.parents = {p.id: p for p in await run_store.lock_free(
        conn, sorted({parent for _, _, parent in ends.values() if parent is not None}))}
    for e, row, parent in ends.values():
        if parent is None or parent not in told.parents:
            continue
        output_ref = e.event.output_ref if isinstance(e.event, ev.RunSucceeded) else None
        chunk = ChildRun(id=row.id, tenant_id=row.tenant_id, parent_run_id=parent, task=row.task,
                         state="succeeded", version=e.version + 1, traceparent=e.traceparent,
                         output_ref=output_ref, last_error=None, parent_notified=True,
                         trigger=row.trigger)
        woke = children.waits_for(told.parents[parent], chunk)
        told.events.append(StreamHead(row.id, row.tenant_id, e.version, RunState.SUCCEEDED).next(
            ev.ParentNotified(parent_run_id=parent, woke=woke), ACTOR,
            traceparent=e.traceparent))
        told.chunks.append(chunk)
    return told


async def tell_chunk_parents(conn: asyncpg.Connection, store: EventStore,
                             rows: Mapping[uuid.UUID, LockedRun | ReportedRun],
                             finished: Sequence[uuid.UUID],
                             now: datetime | None = None,
                             with_ends: ToldWithEnds | None = None) -> int:
    """In a report's transaction, after its events: the fan-out chunk runs among `finished`
    (runs of `rows` that left `running`) that are final now, and the ends of their parents'
    other chunks that no one told yet, counted by the parents' fan-outs with the next chunks
    admitted (`ostinato.runs.children.tell`; `now`, the gateway's clock as for the report's
    other due times, dates them; None: the database's); returns how many ends were told.
    `with_ends`: the chunks whose `ParentNotified` the report's append wrote with their ends
    (`tell_with_ends`), counted here with the rest. No statement when no run of `finished` has
    a parent; a parent another transaction holds is not waited for: its chunks' ends wait for
    the next report that ends one of its chunks, or the scheduler's poll, whichever comes
    first."""
    ids = [rid for rid in finished if (row := rows.get(rid)) is not None
           and row.parent_run_id is not None]
    if not ids:
        return 0
    ahead = with_ends or ToldWithEnds({}, [], [])
    ended = await run_store.lock_ended_chunks(conn, ids)
    parents = dict(ahead.parents)
    if missing := sorted({c.parent_run_id for c in ended} - parents.keys()):
        parents.update({p.id: p for p in await run_store.lock_free(conn, missing)})
    notified = frozenset(c.id for c in ahead.chunks)
    told = ahead.chunks + [c for c in ended if c.parent_run_id in parents
                           and c.id not in notified]
    if told:
        await children.tell(conn, store, parents, told, actor=ACTOR, now=now, notified=notified)
    return len(told)


def outcome_blob_values(items: Sequence[Outcome]) -> list[tuple[uuid.UUID, bytes]]:
    """The outputs and captured logs a batch may keep as blobs, by run, encoded as
    `record_outcomes` encodes them: what the gateway puts in the object store before the
    batch's transaction locks the runs (those over the inline limit)."""
    found: list[tuple[uuid.UUID, bytes]] = []
    for o in items:
        if o.run_id is None or o.kind == "release":
            continue
        if o.logs:
            found.append((o.run_id, _json.encode(o.logs)))
        if o.output is not None and o.kind != "fail":
            found.append((o.run_id, _json.encode(o.output)))
    return found


def _events_for(row: ReportedRun, o: Outcome, now: datetime, actor: str, tenant_id: uuid.UUID,
                blobs: list[tuple[uuid.UUID, uuid.UUID, bytes, str]]) -> list[ev.Event]:
    if o.kind == "release":
        return [ev.LeaseReleased(attempt=row.attempt, fencing_token=o.fencing_token,
                                 worker_id=actor.removeprefix("worker:"))]
    logs_ref = _blob(blobs, tenant_id, o.logs, "logs") if o.logs else None
    if o.kind == "fail":
        return failure_events(row, o, now, actor, logs_ref)
    output_ref = output_bytes = None
    if o.output is not None:
        output_ref = _blob(blobs, tenant_id, o.output, "output")
        output_bytes = len(blobs[-1][2])  # in the event: usage outlives the blob's retention
    if row.cancel_requested:
        return [ev.RunCancelled(by=actor, reason="requested", output_ref=output_ref,
                                output_bytes=output_bytes)]
    return [ev.RunSucceeded(attempt=row.attempt, fencing_token=o.fencing_token,
                            output_ref=output_ref, logs_ref=logs_ref, output_bytes=output_bytes)]


def _blob(blobs: list[tuple[uuid.UUID, uuid.UUID, bytes, str]], tenant_id: uuid.UUID,
          document: Any, kind: str) -> uuid.UUID:
    blob_id = new_id()
    blobs.append((blob_id, tenant_id, _json.encode(document), kind))
    return blob_id


def _answer(o: Outcome, status: int, detail: str | None = None) -> p.BatchItemResult:
    return p.BatchItemResult(run_id=o.raw_run_id, kind=o.kind,  # type: ignore[arg-type]
                             status=status, detail=detail)
