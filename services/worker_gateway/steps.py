"""Recording workflow steps (`ostinato.domain.workflow`) and reading them back, for the attempt
that holds the run's lease.

Per step, on the run row locked in the request's transaction:

- token current, the run `running`, the step the next position (`seq == steps_done`):
  `StepCompleted` (output inline up to `INLINE_OUTPUT_BYTES`, else in the blob store, kept as
  long as payloads) or `StepFailed`; 200.
- token current and the position already recorded: a resent report whose answer was lost: 200,
  nothing new (the SDK awaits one step at a time, so a recorded position is this step's).
- token current but a position beyond the next: a client bug, 422, nothing recorded.
- any other token, or the run no longer running: `StaleWriteRejected` and 409, as for every
  write under a fencing token.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from ostinato.domain import events as ev
from ostinato.domain.ids import new_id
from ostinato.domain.states import RunState
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.sdk import protocol as p
from ostinato.stores.runs import LockedRun
from ostinato.stores.steps import StepRow

INLINE_OUTPUT_BYTES = 16 * 1024  # larger step outputs live in the blob store
_json = msgspec.json.Encoder()


@dataclass
class RecordedSteps:
    results: list[p.BatchItemResult] = field(default_factory=list)
    events: list[NewEvent] = field(default_factory=list)
    blobs: list[tuple[uuid.UUID, uuid.UUID, bytes]] = field(default_factory=list)


def parse_run_id(raw: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None


def record_steps(rows: Mapping[uuid.UUID, LockedRun], worker_id: str,
                 items: Sequence[p.StepItem]) -> RecordedSteps:
    """Pure over the locked rows the worker may see: the events and answers for its steps."""
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
        if row.fencing_token != item.fencing_token or head.state is not RunState.RUNNING:
            event: ev.Event = ev.StaleWriteRejected(
                operation="step", presented_token=item.fencing_token,
                current_token=row.fencing_token, worker_id=worker_id)
            done.results.append(_answer(item, 409, "stale fencing token: this attempt lost its "
                                        f"lease (the run's token is {row.fencing_token})"))
        elif item.seq < next_seq[rid]:
            done.results.append(_answer(item, 200))  # already recorded
            continue
        elif item.seq > next_seq[rid]:
            done.results.append(_answer(item, 422, f"step {item.seq} reported before step "
                                        f"{next_seq[rid]}"))
            continue
        else:
            event = _step_event(row, item, done.blobs)
            next_seq[rid] = item.seq + 1
            done.results.append(_answer(item, 200))
        done.events.append(head.next(event, actor, epoch=item.fencing_token,
                                     traceparent=row.traceparent))
    return done


def _step_event(row: LockedRun, item: p.StepItem,
                blobs: list[tuple[uuid.UUID, uuid.UUID, bytes]]) -> ev.Event:
    if item.error is not None:
        return ev.StepFailed(seq=item.seq, name=item.name, attempt=row.attempt,
                             fencing_token=item.fencing_token, error_type=item.error.type,
                             message=item.error.message, tries=item.tries,
                             duration_ms=item.duration_ms)
    encoded = _json.encode(item.output)
    output, output_ref = item.output, None
    if len(encoded) > INLINE_OUTPUT_BYTES:
        output, output_ref = None, new_id()
        blobs.append((output_ref, row.tenant_id, encoded))
    return ev.StepCompleted(seq=item.seq, name=item.name, attempt=row.attempt,
                            fencing_token=item.fencing_token, output=output,
                            output_ref=output_ref, tries=item.tries,
                            duration_ms=item.duration_ms)


def step_records(steps: Sequence[StepRow], blobs: Mapping[uuid.UUID, object]) -> p.StepsResponse:
    """The page a resuming workflow reads; outputs kept in the blob store are put back."""
    return p.StepsResponse(steps=[
        p.StepRecord(seq=s.seq, name=s.name, succeeded=s.succeeded,
                     output=blobs.get(s.output_ref) if s.output_ref else s.output,
                     error_type=s.error_type, message=s.message)
        for s in steps])


def _answer(item: p.StepItem, status: int, detail: str | None = None) -> p.BatchItemResult:
    return p.BatchItemResult(run_id=item.run_id, kind="step", status=status, detail=detail)
