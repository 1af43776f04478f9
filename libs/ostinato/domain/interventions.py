"""Operator interventions on a run, as pure decisions: given the locked run and the request,
the events to append in order, or a refusal saying why (`InvalidState` → 409, `InvalidInput`
→ 422). Every event names who (`by`) and why (`reason`); none creates a new run.

    retry step s    StepRetried{s}                      then reopen
    skip step s     StepSkipped{s, output}              then reopen
    restart from s  RunRestarted{s}                     then reopen
    succeed         RunMarkedSucceeded{output_ref}
    fail            RunMarkedFailed{error}, RunWoken{intervention} (a suspended run only),
                    RunDeadLettered{reason operator}

"reopen" depends on where the run stopped: a dead-lettered run gets `RunReopened` (scheduled
again, a fresh retry budget); a suspended one `RunWoken` (cause intervention), unless it is
paused: it stays suspended, paused at the new position, and its resume wakes it; a run waiting
for dispatch or for its retry needs nothing (its next attempt reads the changed history).

Step interventions take a run that is not running (`lifecycle.STOPPED`: dead-lettered,
suspended, scheduled, queued, waiting for its retry); marking takes the same, and failing not
a run that failed for good already. A run whose cancel was requested stays so.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidInput, InvalidState
from ostinato.domain.lifecycle import STOPPED
from ostinato.domain.states import RunState

S = RunState
MAX_REASON_CHARS = 1000
MAX_NAME_CHARS = 1000
MAX_ERROR_TYPE_CHARS = 200
OPERATOR_FAILED = "operator_failed"


@dataclass(frozen=True, slots=True)
class Target:
    """What deciding an intervention needs of the locked run."""

    run_id: uuid.UUID
    state: RunState
    steps_done: int = 0
    paused: bool = False
    wait_reason: str | None = None  # a suspended run's: timer | signal | child | paused
    wait_seq: int | None = None
    wait_name: str | None = None
    failures: int = 0  # counted failures (the retry policy's): the dead letter's attempts - 1
    job_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """The step recorded at a position (`run_steps`)."""

    seq: int
    name: str
    succeeded: bool


def retry_step(run: Target, seq: int, record: Record | None, undone: Sequence[str], *,
               by: str, reason: str) -> list[ev.Event]:
    """Run the failed step at `seq` again: its record (`record`, None when nothing is recorded
    there) and every later one are set aside. `undone`: kept steps whose completed
    compensation would be set aside (refused)."""
    _check(run, reason, seq, "seq")
    if record is not None and record.succeeded:
        raise InvalidState(f"step {seq} ({record.name}) of run {run.run_id} succeeded: only a "
                           "failed step is retried; restart from it (POST /v1/runs/"
                           f"{run.run_id}/restart) to run it again")
    if record is None and run.state is not S.DEAD_LETTERED:
        raise InvalidState(f"nothing failed at position {seq} of run {run.run_id}: it recorded "
                           f"{run.steps_done} steps and is {run.state}, not dead-lettered")
    _refuse_undone(undone, seq)
    name = record.name if record is not None else None
    return [ev.StepRetried(seq=seq, name=name, set_aside=run.steps_done - seq, by=by,
                           reason=reason), *_reopen(run, "step_retried", by, reason)]


def skip_step(run: Target, seq: int, record: Record | None, name: str | None, output: Any,
              output_ref: uuid.UUID | None, undone: Sequence[str], *, by: str,
              reason: str) -> list[ev.Event]:
    """Record the step at `seq` (a failed record, or the position where the run stopped) as
    succeeded with the operator's `output` (inline, or the blob `output_ref`); later records
    are set aside. `name` is the step's, needed where nothing is recorded and no wait is
    pending."""
    _check(run, reason, seq, "seq")
    if name is not None and not 0 < len(name) <= MAX_NAME_CHARS:
        raise _invalid("name", f"a step name has 1 to {MAX_NAME_CHARS} characters")
    if record is not None:
        if record.succeeded:
            raise InvalidState(f"step {seq} ({record.name}) of run {run.run_id} succeeded: "
                               "there is nothing to skip; restart from it to run it again")
        known: str | None = record.name
    elif (run.state is S.SUSPENDED and run.wait_seq == seq and run.wait_reason != "paused"
          and run.wait_name is not None):
        known = run.wait_name  # the wait the run is suspended at
    else:
        known = None
    if known is not None and name is not None and name != known:
        raise _invalid("name", f"the step at position {seq} is {known!r}, not {name!r}")
    step_name = known or name
    if step_name is None:
        raise _invalid("name", f"nothing is recorded at position {seq}: give the step's name "
                       "(as the workflow calls it)")
    _refuse_undone(undone, seq)
    return [ev.StepSkipped(seq=seq, name=step_name, set_aside=run.steps_done - seq, by=by,
                           reason=reason, output=None if output_ref else output,
                           output_ref=output_ref),
            *_reopen(run, "step_skipped", by, reason)]


def restart(run: Target, from_seq: int, undone: Sequence[str], *, by: str,
            reason: str) -> list[ev.Event]:
    """Run the workflow again from position `from_seq`: the records from there on are set
    aside (`from_seq` = the recorded count: nothing is, the run is only reopened)."""
    _check(run, reason, from_seq, "from_seq")
    _refuse_undone(undone, from_seq)
    return [ev.RunRestarted(from_seq=from_seq, set_aside=run.steps_done - from_seq, by=by,
                            reason=reason), *_reopen(run, "restarted", by, reason)]


def mark_succeeded(run: Target, output_ref: uuid.UUID | None, *, by: str, reason: str,
                   output_bytes: int | None = None) -> list[ev.Event]:
    """End a run that is not running as succeeded, with `output_ref` as its output
    (`output_bytes` long: usage counts it from the event, the blob expires)."""
    _check(run, reason)
    return [ev.RunMarkedSucceeded(output_ref=output_ref, by=by, reason=reason,
                                  output_bytes=output_bytes)]


def mark_failed(run: Target, error_type: str | None, message: str | None, *, by: str,
                reason: str) -> list[ev.Event]:
    """End a run that is not running as failed for good (dead-lettered, reason operator)."""
    _check_reason(reason)
    kind = error_type or OPERATOR_FAILED
    if len(kind) > MAX_ERROR_TYPE_CHARS:
        raise _invalid("error_type", f"an error type has 1 to {MAX_ERROR_TYPE_CHARS} "
                       "characters")
    if run.state is S.DEAD_LETTERED:
        raise InvalidState(f"run {run.run_id} is dead-lettered already (failed for good): "
                           f"triage its dead letter (POST /v1/dead-letters/{run.run_id}/triage)")
    _check(run, reason)
    text = message or reason
    events: list[ev.Event] = [ev.RunMarkedFailed(error_type=kind, message=text, by=by,
                                                 reason=reason)]
    if run.state is S.SUSPENDED:
        events.append(ev.RunWoken(cause="intervention"))  # out of its wait, then failed
    events.append(ev.RunDeadLettered(reason="operator", error_type=kind, message=text,
                                     attempts=run.failures + 1, job_id=run.job_id))
    return events


def _reopen(run: Target, cause: str, by: str, reason: str) -> list[ev.Event]:
    """What takes the run on after a step intervention (see the module's doc)."""
    if run.state is S.DEAD_LETTERED:
        return [ev.RunReopened(cause=cause, by=by, reason=reason)]
    if run.state is S.SUSPENDED and not run.paused:
        return [ev.RunWoken(cause="intervention")]
    return []


def _check(run: Target, reason: str, seq: int | None = None, field: str = "seq") -> None:
    _check_reason(reason)
    if seq is not None and not 0 <= seq <= run.steps_done:
        raise _invalid(field, f"run {run.run_id} recorded {run.steps_done} steps: a position "
                       f"from 0 to {run.steps_done} is needed, not {seq}")
    if run.state in STOPPED:
        return
    if run.state is S.RUNNING:
        raise InvalidState(f"run {run.run_id} is running: an intervention waits until its "
                           "attempt ends (or pause it: it is suspended at its next step)")
    if run.state is S.FAILED:
        raise InvalidState(f"run {run.run_id} is between a failed attempt and its retry or "
                           "dead letter: try again in a moment")
    hint = (f"; re-run it as a new run (POST /v1/runs/{run.run_id}/retry)"
            if run.state is S.CANCELLED else "")
    raise InvalidState(f"run {run.run_id} is {run.state}: a finished run is not changed{hint}")


def _check_reason(reason: str) -> None:
    if not reason.strip() or len(reason) > MAX_REASON_CHARS:
        raise _invalid("reason", f"a reason has 1 to {MAX_REASON_CHARS} characters")


def _refuse_undone(undone: Sequence[str], seq: int) -> None:
    if undone:
        names = ", ".join(sorted(set(undone)))
        raise InvalidState(f"the compensation of step {names} completed at a position from "
                           f"{seq} on: setting it aside would replay a step that was undone; "
                           "restart from before that step, or re-run the run as a new run")


def _invalid(field: str, message: str) -> InvalidInput:
    return InvalidInput(message, errors=[{"field": field, "message": message}])
