"""Chunked fan-out (`ctx.fan_out`): the events that start one and move it on.

- Start (the worker-gateway, in the transaction recording the parent's step at `seq`):
  `FanOutStarted`, every chunk's payload in the blob store (ids derived from parent, position
  and index), `RunScheduled` for the first `max_concurrency` chunks (trigger `fan_out`,
  `parent_run_id` the parent, ids derived likewise) and `RunSuspended` (reason fan_out).
- Progress (`ostinato.runs.children.tell`, in the transaction that records children's ends
  with `ParentNotified`): one `FanOutProgressed` per parent and batch (the ends counted, the
  failed ones listed), `RunScheduled` for the chunks admitted into the room freed; after the
  last end, `FanOutCompleted` (the position's record), the completion run's `RunScheduled`
  (once: its id is derived) when the policy says so, and `RunWoken` (cause fan_out).

Who tells: the worker-gateway, in the transaction of the report that ends the chunk
(`services.worker_gateway.reports.tell_chunk_parents`), when it can lock the parent without
waiting; otherwise, and for every end no report made, the scheduler's `notify_parents` poll.
Every way a chunk run ends (succeeded, dead-lettered after its retries or by an operator,
cancelled, marked succeeded) makes it final, and a final child is in that poll
(`runs_children_done`) until its parent is told: so each end is counted once, by the
transaction that also admits the next chunk, and the window holds under any crash.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from ostinato.domain import events as ev
from ostinato.domain import fanout as fo
from ostinato.domain import workflow as wf
from ostinato.domain.errors import InvalidInput
from ostinato.domain.states import FINAL, RunState
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.jobs import materialise
from ostinato.policy import retry
from ostinato.runs.rules import ChildRules, settings
from ostinato.stores.fan_outs import FanOutRow
from ostinato.stores.runs import ChildRun, LockedRun

_json = msgspec.json.Encoder()
Blob = tuple[uuid.UUID, uuid.UUID, bytes]


@dataclass(frozen=True, slots=True)
class FanOutRequest:
    """A parent's step asking for a fan-out (the SDK's FanOutSpec, validated here)."""

    task: str
    chunks: Sequence[Any]
    max_concurrency: int = 50
    on_complete: str | None = None
    on_failure: str = "fail"
    pool: str | None = None
    priority: str | None = None
    retry: Any = None
    timeout_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class ChunkSpec:
    """What every chunk run of one fan-out shares."""

    task: str
    pool: str
    priority: str
    retry: dict[str, Any] | None
    timeout_seconds: float | None

    @classmethod
    def of(cls, row: FanOutRow) -> ChunkSpec:
        return cls(row.task, row.pool, row.priority, row.retry_document, row.timeout_seconds)


@dataclass
class Moves:
    events: list[NewEvent] = field(default_factory=list)
    payloads: list[Blob] = field(default_factory=list)


def chunk_scheduled(parent: LockedRun, spec: ChunkSpec, seq: int, index: int, now: datetime,
                    actor: str) -> NewEvent:
    """Pure: chunk `index`'s run, on its own (derived) stream."""
    scheduled = materialise.scheduled(
        job_id=parent.job_id, task=spec.task, pool=spec.pool, priority=spec.priority,
        payload_ref=fo.chunk_payload_ref(parent.id, seq, index),
        scheduled_for=parent.scheduled_for, trigger="fan_out", due_at=now, retry=spec.retry,
        timeout_seconds=spec.timeout_seconds, parent_run_id=parent.id, fan_out_index=index,
        fan_out_seq=seq)
    return StreamHead(fo.chunk_run_id(parent.id, seq, index), parent.tenant_id).next(
        scheduled, actor, traceparent=parent.traceparent)


def started(parent: LockedRun, head: StreamHead, seq: int, name: str, request: FanOutRequest,
            rules: ChildRules, now: datetime, actor: str, epoch: int,
            deadline: datetime | None = None) -> Moves:
    """Pure: what starting the fan-out at `seq` appends and stores; raises InvalidInput naming
    the fields refused."""
    pool, priority, policy, errors = settings(parent, request.pool, request.priority,
                                              request.retry, request.timeout_seconds, rules,
                                              "fan_out")
    errors += [{"field": f, "message": m} for f, m in
               fo.problems(len(request.chunks), request.max_concurrency, request.on_failure)]
    bodies = [_json.encode(c) for c in request.chunks]
    if any(len(b) > rules.max_payload_bytes for b in bodies):
        errors.append({"field": "fan_out.chunks",
                       "message": f"a chunk larger than {rules.max_payload_bytes} bytes"})
    if errors:
        raise InvalidInput("; ".join(f"{e['field']}: {e['message']}" for e in errors), errors)
    spec = ChunkSpec(request.task, pool, priority, retry.to_document(policy),
                     request.timeout_seconds)
    first = fo.admit(fo.Window(len(bodies), request.max_concurrency))
    moves = Moves(payloads=[(fo.chunk_payload_ref(parent.id, seq, i), parent.tenant_id, b)
                            for i, b in enumerate(bodies)])
    moves.events.append(head.next(ev.FanOutStarted(
        seq=seq, name=name, task=request.task, total=len(bodies),
        max_concurrency=request.max_concurrency, admitted=first.stop,
        on_failure=request.on_failure, on_complete=request.on_complete, pool=pool,
        priority=priority, retry=spec.retry, timeout_seconds=spec.timeout_seconds,
        attempt=parent.attempt), actor, epoch=epoch, traceparent=parent.traceparent))
    moves.events += [chunk_scheduled(parent, spec, seq, i, now, actor) for i in first]
    moves.events.append(suspended(parent, head, seq, name, actor, epoch, deadline))
    return moves


def recorded_again(parent: LockedRun, head: StreamHead, fan: FanOutRow, actor: str,
                   epoch: int) -> NewEvent:
    """Pure: the `FanOutCompleted` of a fan-out that is over, appended again at its position
    when an operator set its record aside (retry a step, restart): the chunks are not run
    again (their ids are taken), the record is the one they produced."""
    ok = fan.state == "succeeded"
    return head.next(ev.FanOutCompleted(
        seq=fan.seq, name=fan.name, outcome=fan.state, total=fan.total,
        succeeded=fan.succeeded, failed=fan.failed, failures=fan.listed_failures,
        completion_run_id=fan.completion_run_id,
        error_type=None if ok else "fan_out_failed",
        message=None if ok else f"{fan.failed} of {fan.total} chunks failed"),
        actor, epoch=epoch, traceparent=parent.traceparent)


def suspended(parent: LockedRun, head: StreamHead, seq: int, name: str, actor: str,
              epoch: int, deadline: datetime | None) -> NewEvent:
    return head.next(ev.RunSuspended(attempt=parent.attempt, fencing_token=epoch, seq=seq,
                                     name=name, reason="fan_out", deadline_at=deadline),
                     actor, epoch=epoch, traceparent=parent.traceparent)


def progressed(parent: LockedRun, head: StreamHead, fan: FanOutRow, ended: Sequence[ChildRun],
               now: datetime, actor: str) -> Moves:
    """Pure: the parent's fan-out after these chunk runs' ends (their `ParentNotified` is the
    caller's): counts, failures listed, chunks admitted, and at the end the record, the
    completion run and the wake-up. Nothing for a parent that is final (cancelled: its
    remaining chunks are never admitted) or a fan-out already over."""
    moves = Moves()
    if fan.state != "running" or RunState(parent.state) in FINAL:
        return moves
    window = fan.window
    ended = list(ended)[:window.running]  # a chunk told twice (reopened) counts once
    if not ended:
        return moves
    failed = [c for c in ended if c.state != "succeeded"]
    listed = fan.listed_failures
    room = max(0, fo.FAILURES_LISTED - len(listed))
    new_failures = _failures(parent.id, fan, failed[:room])
    step = fo.advance(window, len(ended) - len(failed), len(failed), fan.on_failure,
                      fan.on_complete is not None)
    trace = parent.traceparent
    moves.events.append(head.next(ev.FanOutProgressed(
        seq=fan.seq, succeeded=len(ended) - len(failed), failed=len(failed),
        admitted=step.window.admitted, failures=new_failures), actor, traceparent=trace))
    spec = ChunkSpec.of(fan)
    moves.events += [chunk_scheduled(parent, spec, fan.seq, i, now, actor)
                     for i in step.admitted]
    if step.outcome is None:
        return moves
    w = step.window
    failures = listed + new_failures
    completion = None
    if step.start_completion:
        assert fan.on_complete is not None
        completion = fo.completion_run_id(parent.id, fan.seq)
        ref = fo.completion_payload_ref(parent.id, fan.seq)
        moves.payloads.append((ref, parent.tenant_id, _json.encode({
            "parent_run_id": str(parent.id), "total": w.total, "succeeded": w.succeeded,
            "failed": w.failed, "failures": failures})))
        moves.events.append(StreamHead(completion, parent.tenant_id).next(materialise.scheduled(
            job_id=parent.job_id, task=fan.on_complete, pool=fan.pool, priority=fan.priority,
            payload_ref=ref, scheduled_for=parent.scheduled_for, trigger="fan_out_complete",
            due_at=now, retry=spec.retry, parent_run_id=parent.id, fan_out_seq=fan.seq),
            actor, traceparent=trace))
    ok = step.outcome == "succeeded"
    moves.events.append(head.next(ev.FanOutCompleted(
        seq=fan.seq, name=fan.name, outcome=step.outcome, total=w.total,
        succeeded=w.succeeded, failed=w.failed, failures=failures,
        completion_run_id=completion,
        error_type=None if ok else "fan_out_failed",
        message=None if ok else f"{w.failed} of {w.total} chunks failed"),
        actor, traceparent=trace))
    if wf.fan_out_wakes(state=parent.state, wait_reason=parent.wait_reason,
                        wait_seq=parent.wait_seq, seq=fan.seq, paused=parent.paused):
        moves.events.append(head.next(ev.RunWoken(cause="fan_out"), actor, traceparent=trace))
    return moves


def _failures(parent_id: uuid.UUID, fan: FanOutRow,
              failed: Sequence[ChildRun]) -> list[dict[str, Any]]:
    """The failed chunks as listed: index (found among the admitted ids, only when some
    failed), run id, final state and last error."""
    if not failed:
        return []
    index = {fo.chunk_run_id(parent_id, fan.seq, i): i for i in range(fan.admitted)}
    listed = []
    for c in failed:
        error = c.last_error if isinstance(c.last_error, dict) else {}
        listed.append({"index": index.get(c.id), "run_id": str(c.id), "state": c.state,
                       "error_type": error.get("type") or ("cancelled" if c.state ==
                                                            "cancelled" else "failed"),
                       "message": error.get("message")})
    return sorted(listed, key=lambda f: f["index"] if f["index"] is not None else -1)
