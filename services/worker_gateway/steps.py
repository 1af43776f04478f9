"""Recording workflow steps and reading them back, for the attempt that holds the run's lease.
The rules are the step model's (`ostinato.domain.workflow`: `judge`, `timer_wait`,
`signal_wait`, `child_plan`, `fan_out_plan`); this module turns its verdicts into events and
answers.

Per step, on the run row locked in the request's transaction:

- token current, the run `running`, the step the next position (`seq == steps_done`):
  `StepCompleted` (output inline up to `INLINE_OUTPUT_BYTES`, else in the blob store, kept as
  long as payloads) or `StepFailed`; 200.
- token current and the position already recorded: a resent report whose answer was lost: 200,
  nothing new (the SDK awaits one step at a time, so a recorded position is this step's).
- token current but a position beyond the next: a client bug, 422, nothing recorded.
- any other token, or the run no longer running: `StaleWriteRejected` and 409, as for every
  write under a fencing token.

A step with a `wait` (a timer, a signal) at the next position, token current:

- a timer already due (by the database clock `now`): `TimerFired`, and the answer carries the
  record the workflow goes on with; a signal already sent (the oldest undelivered one of that
  name): `SignalDelivered`, likewise; a signal wait with timeout 0 and no signal:
  `SignalTimedOut`;
- otherwise `RunSuspended` (what it waits for, until when, and the workflow's deadline): the
  attempt ends, its lease is released (`finished`), and the answer says `suspended`; the
  scheduler's wake poll (a timer, a timeout, the deadline) or the signal's arrival
  (`ostinato.runs.signals`) wakes the run later.

A step with a `child` (`ostinato.runs.children`) at the next position, token current: the
child run is created (`RunScheduled` on its stream, `ChildStarted` on the parent's); waited for
(`ctx.child`), the run is suspended as above until the child is final; otherwise the answer
carries the record (the child's run id). A child whose fields are refused gets 422 and nothing;
a run whose cancel was requested starts no child (the answer says `cancel_requested`). A child
that exists already (a resent report) is not created again; waited for and already final, its
outcome is the position's record at once.

A paused run's step is recorded and the run suspended (reason paused, its lease released, the
answer `suspended`); a paused run's wait or child is not recorded, the run suspended likewise.

A published value (`ctx.set`, a step named `set:<name>`) or an update's answer
(`reply:<update id>`) over `MAX_STATE_BYTES` gets 413 and nothing; both stay inline, so the
state and the answers are read without the blob store.

Any item past the workflow's deadline (`StepItem.deadline`, by the database clock) records
nothing; the answer says `deadline_passed` and the workflow fails (`workflow_timed_out`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import msgspec

from ostinato.domain import attributes
from ostinato.domain import events as ev
from ostinato.domain import fanout as fo
from ostinato.domain import workflow as wf
from ostinato.domain.errors import InvalidInput
from ostinato.domain.ids import new_id
from ostinato.domain.states import FINAL, RunState
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.runs import children as kids
from ostinato.runs import fanout
from ostinato.stores.fan_outs import FanOutRow
from ostinato.stores.runs import ChildRun, LockedRun
from ostinato.stores.signals import PendingSignal
from ostinato.stores.steps import StepRow
from ostinato.wire import worker as p
from services.worker_gateway.reports import parse_run_id

_json = msgspec.json.Encoder()


@dataclass
class RecordedSteps:
    results: list[p.BatchItemResult] = field(default_factory=list)
    events: list[NewEvent] = field(default_factory=list)
    blobs: list[tuple[uuid.UUID, uuid.UUID, bytes]] = field(default_factory=list)
    payloads: list[tuple[uuid.UUID, uuid.UUID, bytes]] = field(default_factory=list)  # children's
    finished: list[uuid.UUID] = field(default_factory=list)  # suspended: their leases end


@dataclass(frozen=True)
class Children:
    """What recording child steps needs besides the rows: the rules, the children that exist
    already among those asked for, and the outputs of the final ones."""

    rules: kids.ChildRules = field(default_factory=kids.ChildRules)
    existing: Mapping[uuid.UUID, ChildRun] = field(default_factory=dict)
    outputs: Mapping[uuid.UUID, object] = field(default_factory=dict)
    fan_outs: Mapping[tuple[uuid.UUID, int], FanOutRow] = field(default_factory=dict)


def record_steps(rows: Mapping[uuid.UUID, LockedRun], worker_id: str,
                 items: Sequence[p.StepItem], now: datetime | None = None,
                 pending: Mapping[tuple[uuid.UUID, str], PendingSignal] | None = None,
                 children: Children | None = None,
                 declared: Mapping[uuid.UUID, Mapping[str, str]] | None = None,
                 ) -> RecordedSteps:
    """Pure over the locked rows the worker may see, the database clock `now`, the pending
    signals of the runs that wait for one, the children asked for and the declared search
    attributes of the runs' tenants: the events and answers for its steps."""
    actor = f"worker:{worker_id}"
    done = RecordedSteps()
    heads = {rid: StreamHead.of(r) for rid, r in rows.items()}
    next_seq = {rid: r.steps_done for rid, r in rows.items()}
    for item in items:
        rid = parse_run_id(item.run_id)
        row = rows.get(rid) if rid else None
        if row is None or rid is None:
            done.results.append(_answer(item, 404, "no such run for this tenant"))
            continue
        head = heads[rid]
        kind = kind_of(item)
        verdict = wf.judge(wf.RunAt(row.fencing_token, head.state is RunState.RUNNING,
                                    next_seq[rid], row.paused, row.cancel_requested),
                           wf.Report(item.seq, item.fencing_token, kind, item.deadline), now)
        if verdict is wf.Verdict.STALE:
            event: ev.Event = ev.StaleWriteRejected(
                operation="step", presented_token=item.fencing_token,
                current_token=row.fencing_token, worker_id=worker_id)
            done.results.append(_answer(item, 409, "stale fencing token: this attempt lost its "
                                        f"lease (the run's token is {row.fencing_token})"))
        elif verdict is wf.Verdict.REPEAT:
            done.results.append(_answer(item, 200))  # already recorded
            continue
        elif verdict is wf.Verdict.DEADLINE_PASSED:
            assert item.deadline is not None
            done.results.append(p.BatchItemResult(  # the workflow fails; nothing recorded
                run_id=item.run_id, kind="step", status=200, deadline_passed=True,
                detail=f"the workflow's deadline {item.deadline.isoformat()} has passed"))
            continue
        elif verdict is wf.Verdict.GAP:
            done.results.append(_answer(item, 422, f"step {item.seq} reported before step "
                                        f"{next_seq[rid]}"))
            continue
        elif verdict is wf.Verdict.PAUSE:
            _paused_step(row, head, item, kind, actor, done)
            continue
        elif verdict is wf.Verdict.NOT_STARTED:
            what = "fan-out" if kind is wf.StepKind.FAN_OUT else "child"
            done.results.append(p.BatchItemResult(
                run_id=item.run_id, kind="step", status=200, cancel_requested=True,
                detail=f"the run's cancel was requested: no {what} is started"))
            continue
        elif item.fan_out is not None:
            assert now is not None, "a fan-out needs the database clock"
            if _fan_out_step(row, head, item, item.fan_out, children or Children(), now, actor,
                             done):
                next_seq[rid] = item.seq + 1
            continue
        elif item.child is not None:
            assert now is not None, "a child needs the database clock"
            if _child_step(row, head, item, item.child, children or Children(), now, actor,
                           done):
                next_seq[rid] = item.seq + 1
            continue
        elif item.wait is not None:
            w = item.wait
            if (problem := wf.bad_wait(w.kind, until=w.until, seconds=w.seconds,
                                       signal=w.signal)) is not None:
                done.results.append(_answer(item, 422, problem))
                continue
            assert now is not None, "a wait needs the database clock"
            event, result = _wait_event(row, item, w, now, (pending or {}).get(
                (rid, w.signal or "")))
            done.results.append(result)
            if isinstance(event, ev.RunSuspended):
                done.finished.append(rid)
            else:
                next_seq[rid] = item.seq + 1
        elif kind is wf.StepKind.ATTRIBUTES:
            try:  # checked against the tenant's declarations: a 422 records nothing
                if not isinstance(item.output, dict) or not item.output:
                    raise InvalidInput("attributes: an object of name to value", errors=[])
                values = attributes.normalise(item.output, (declared or {}).get(
                    row.tenant_id, {}), where="attributes")
            except InvalidInput as exc:
                done.results.append(_answer(item, 422, exc.detail))
                continue
            event = ev.AttributesUpserted(seq=item.seq, name=item.name, attempt=row.attempt,
                                          fencing_token=item.fencing_token,
                                          attributes=values or {})
            next_seq[rid] = item.seq + 1
            done.results.append(_answer(item, 200))
        else:
            if kind in (wf.StepKind.STATE, wf.StepKind.REPLY) and (problem := wf.too_large(
                    len(_json.encode(item.output)), f"the {kind} value")) is not None:
                done.results.append(_answer(item, 413, problem))  # kept inline, never a blob
                continue
            event = _step_event(row, item, done.blobs)
            next_seq[rid] = item.seq + 1
            done.results.append(_answer(item, 200))
        done.events.append(head.next(event, actor, epoch=item.fencing_token,
                                     traceparent=row.traceparent))
    return done


def step_blob_values(items: Sequence[p.StepItem]) -> list[tuple[uuid.UUID, bytes]]:
    """The values a batch of step reports may keep as blobs, by run, encoded as `record_steps`
    encodes them: step outputs over the events' inline limit, children's payloads and fan-out
    chunks. What the gateway puts in the object store before the batch's transaction locks
    the runs (those over the store's inline limit); one the transaction does not write (a
    repeat, a refusal) is the collector's after its grace."""
    found: list[tuple[uuid.UUID, bytes]] = []
    for item in items:
        rid = parse_run_id(item.run_id)
        if rid is None or item.error is not None:
            continue
        if item.child is not None:
            found.append((rid, _json.encode(item.child.payload)))
        elif item.fan_out is not None:
            found += [(rid, _json.encode(c)) for c in item.fan_out.chunks]
        elif item.wait is None:
            encoded = _json.encode(item.output)
            if len(encoded) > wf.INLINE_OUTPUT_BYTES:
                found.append((rid, encoded))
    return found


def kind_of(item: p.StepItem) -> wf.StepKind:
    """The step model's kind of a reported step."""
    return wf.kind_of(wait=item.wait.kind if item.wait else None,
                      child_awaited=item.child.wait if item.child else None,
                      fan_out=item.fan_out is not None, name=item.name)


def _paused_step(row: LockedRun, head: StreamHead, item: p.StepItem, kind: wf.StepKind,
                 actor: str, done: RecordedSteps) -> None:
    """A paused run (`ostinato.runs.pausing`): a finished step is recorded, then the run is
    suspended (reason paused) instead of starting what comes next; a wait or a child, not
    started yet, is not recorded."""
    seq = item.seq
    if wf.paused_records_first(kind):
        done.events.append(head.next(_step_event(row, item, done.blobs), actor,
                                     epoch=item.fencing_token, traceparent=row.traceparent))
        seq += 1
    done.events.append(head.next(ev.RunSuspended(
        attempt=row.attempt, fencing_token=item.fencing_token, seq=seq, name=wf.PAUSED,
        reason=wf.PAUSED), actor, epoch=item.fencing_token, traceparent=row.traceparent))
    done.finished.append(row.id)
    done.results.append(_suspended(item))


def _child_step(row: LockedRun, head: StreamHead, item: p.StepItem, spec: p.ChildSpec,
                children: Children, now: datetime, actor: str, done: RecordedSteps) -> bool:
    """Record a child step into `done`; True when its position is recorded now."""
    seq, name, epoch = item.seq, item.name, item.fencing_token
    child_id = kids.child_run_id(row.id, seq)
    existing = children.existing.get(child_id)
    plan = wf.child_plan(awaited=spec.wait, exists=existing is not None,
                         final=existing is not None and RunState(existing.state) in FINAL)
    events: list[NewEvent] = []
    if plan.create:
        request = kids.ChildRequest(task=spec.task, payload=spec.payload, pool=spec.pool,
                                    priority=spec.priority, retry=spec.retry,
                                    timeout_seconds=spec.timeout_seconds, awaited=spec.wait)
        try:
            start = kids.child_started(row, head, seq, name, request, children.rules, now,
                                       actor, epoch)
        except InvalidInput as exc:
            done.results.append(_answer(item, 422, str(exc)))
            return False
        events += start.events
        done.payloads += start.payloads
    elif plan.start_again:
        events.append(head.next(ev.ChildStarted(seq=seq, name=name, child_run_id=child_id,
                                                task=spec.task, awaited=False,
                                                attempt=row.attempt),
                                actor, epoch=epoch, traceparent=row.traceparent))
    if plan.then == "finished":
        assert existing is not None
        outcome = kids.finished(existing, seq, name, children.outputs.get(child_id),
                                done.blobs)
        events.append(head.next(outcome, actor, epoch=epoch, traceparent=row.traceparent))
        done.events += events
        done.results.append(_resumed(item, _child_record(outcome,
                                                         children.outputs.get(child_id))))
        return True
    if plan.then == "suspend":
        events.append(head.next(ev.RunSuspended(
            attempt=row.attempt, fencing_token=epoch, seq=seq, name=name, reason="child",
            deadline_at=item.deadline, child_run_id=child_id), actor, epoch=epoch,
            traceparent=row.traceparent))
        done.events += events
        done.finished.append(row.id)
        done.results.append(_suspended(item))
        return False
    done.events += events
    done.results.append(_resumed(item, p.StepRecord(seq=seq, name=name, succeeded=True,
                                                    output=str(child_id))))
    return True


def _fan_out_step(row: LockedRun, head: StreamHead, item: p.StepItem, spec: p.FanOutSpec,
                  children: Children, now: datetime, actor: str, done: RecordedSteps) -> bool:
    """Start the fan-out at the item's position (`ostinato.runs.fanout`) and suspend the run
    until its chunks are final; True when the position is recorded now. One started already is
    not started again: still going on (the run re-executed meanwhile), the run is suspended
    again; over (its record set aside by an operator), its record is appended again."""
    existing = children.fan_outs.get((row.id, item.seq))
    plan = wf.fan_out_plan(None if existing is None else existing.state)
    if plan == "record_again":
        assert existing is not None
        again = fanout.recorded_again(row, head, existing, actor, item.fencing_token)
        done.events.append(again)
        e = again.event
        assert isinstance(e, ev.FanOutCompleted)
        ok = e.outcome == "succeeded"
        done.results.append(_resumed(item, p.StepRecord(
            seq=e.seq, name=e.name, succeeded=ok, output=fo.summary(e) if ok else None,
            error_type=e.error_type, message=e.message)))
        return True
    if plan == "suspend":
        done.events.append(fanout.suspended(row, head, item.seq, item.name, actor,
                                            item.fencing_token, item.deadline))
    else:
        request = fanout.FanOutRequest(
            task=spec.task, chunks=spec.chunks, max_concurrency=spec.max_concurrency,
            on_complete=spec.on_complete, on_failure=spec.on_failure, pool=spec.pool,
            priority=spec.priority, retry=spec.retry, timeout_seconds=spec.timeout_seconds)
        try:
            moves = fanout.started(row, head, item.seq, item.name, request, children.rules,
                                   now, actor, item.fencing_token, item.deadline)
        except InvalidInput as exc:
            done.results.append(_answer(item, 422, str(exc)))
            return False
        done.events += moves.events
        done.payloads += moves.payloads
    done.finished.append(row.id)
    done.results.append(_suspended(item))
    return False


def _child_record(e: ev.ChildFinished, output: object) -> p.StepRecord:
    ok = e.state == "succeeded"
    return p.StepRecord(seq=e.seq, name=e.name, succeeded=ok, output=output if ok else None,
                        error_type=e.error_type, message=e.message)


def _step_event(row: LockedRun, item: p.StepItem,
                blobs: list[tuple[uuid.UUID, uuid.UUID, bytes]]) -> ev.Event:
    if item.error is not None:
        return ev.StepFailed(seq=item.seq, name=item.name, attempt=row.attempt,
                             fencing_token=item.fencing_token, error_type=item.error.type,
                             message=item.error.message, tries=item.tries,
                             duration_ms=item.duration_ms)
    encoded = _json.encode(item.output)
    output, output_ref = item.output, None
    if len(encoded) > wf.INLINE_OUTPUT_BYTES:
        output, output_ref = None, new_id()
        blobs.append((output_ref, row.tenant_id, encoded))
    return ev.StepCompleted(seq=item.seq, name=item.name, attempt=row.attempt,
                            fencing_token=item.fencing_token, output=output,
                            output_ref=output_ref, tries=item.tries,
                            duration_ms=item.duration_ms, compensable=item.compensable)


def _wait_event(row: LockedRun, item: p.StepItem, wait: p.WaitSpec, now: datetime,
                signal: PendingSignal | None) -> tuple[ev.Event, p.BatchItemResult]:
    seq, name, attempt = item.seq, item.name, row.attempt
    if wait.kind == "timer":
        decided = wf.timer_wait(wait.until, wait.seconds, now)
    else:
        decided = wf.signal_wait(signal is not None, wait.timeout_seconds, now)
    if isinstance(decided, wf.Suspends):
        return (ev.RunSuspended(attempt=attempt, fencing_token=item.fencing_token, seq=seq,
                                name=name, reason=decided.reason,
                                signal=wait.signal if wait.kind == "signal" else None,
                                wake_at=decided.wake_at, deadline_at=item.deadline),
                _suspended(item))
    if decided.event == "TimerFired":
        assert decided.due is not None
        return (ev.TimerFired(seq=seq, attempt=attempt, name=name, due_at=decided.due),
                _resumed(item, p.StepRecord(seq=seq, name=name, succeeded=True,
                                            output={"due_at": decided.due.isoformat()})))
    if decided.event == "SignalDelivered":
        assert signal is not None
        return (ev.SignalDelivered(seq=seq, attempt=attempt, name=name,
                                   signal_id=signal.signal_id, payload_ref=signal.payload_ref,
                                   payload=None if signal.payload_ref else signal.payload),
                _resumed(item, p.StepRecord(seq=seq, name=name, succeeded=True,
                                            output=signal.payload)))
    assert decided.due is not None
    return (ev.SignalTimedOut(seq=seq, attempt=attempt, name=name, deadline=decided.due),
            _resumed(item, p.StepRecord(seq=seq, name=name, succeeded=False,
                                        error_type="signal_timeout",
                                        message=f"no signal {wait.signal!r}")))


def _resumed(item: p.StepItem, record: p.StepRecord) -> p.BatchItemResult:
    return p.BatchItemResult(run_id=item.run_id, kind="step", status=200, step=record)


def _suspended(item: p.StepItem) -> p.BatchItemResult:
    return p.BatchItemResult(run_id=item.run_id, kind="step", status=200, suspended=True)


def step_records(steps: Sequence[StepRow], blobs: Mapping[uuid.UUID, object]) -> p.StepsResponse:
    """The page a resuming workflow reads; outputs kept in the blob store are put back."""
    return p.StepsResponse(steps=[
        p.StepRecord(seq=s.seq, name=s.name, succeeded=s.succeeded,
                     output=blobs.get(s.output_ref) if s.output_ref else s.output,
                     error_type=s.error_type, message=s.message)
        for s in steps])


def _answer(item: p.StepItem, status: int, detail: str | None = None) -> p.BatchItemResult:
    return p.BatchItemResult(run_id=item.run_id, kind="step", status=status, detail=detail)
