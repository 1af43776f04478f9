"""The run lifecycle as events: which state each run event may follow and which it leads to,
and `fold`, the run a stream of events describes.

The state table (`states.TRANSITIONS`) says which moves exist; `RUN_EVENTS` says which event
makes each move. Appending (`ostinato.eventlog.records.StreamHead.next`) checks every run event
against it, so no writer can record a move the table forbids; the `runs` read model is the SQL
form of `fold`, and a property test holds the two together.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ostinato.domain import events as ev
from ostinato.domain.states import FINAL, RunState, can_transition

S = RunState
NON_FINAL: frozenset[RunState] = frozenset(set(RunState) - FINAL)
WAITING: frozenset[RunState] = frozenset({S.SCHEDULED, S.QUEUED, S.RETRY_SCHEDULED})
ANY: frozenset[RunState] = frozenset(RunState)
# Where an operator may change a workflow's recorded steps or decide its outcome: not while an
# attempt runs (`running`, and `failed` until its retry or dead letter is recorded).
STOPPED: frozenset[RunState] = frozenset({S.DEAD_LETTERED, S.SUSPENDED, *WAITING})


@dataclass(frozen=True, slots=True)
class Move:
    """An event's place in the lifecycle: the states it may follow (None: a new stream) and the
    state it leads to (None: the state stays)."""

    after: frozenset[RunState | None]
    to: RunState | None = None


RUN_EVENTS: Mapping[type[ev.Event], Move] = {
    ev.RunScheduled: Move(frozenset({None}), S.SCHEDULED),
    ev.RunQueued: Move(frozenset({S.SCHEDULED, S.RETRY_SCHEDULED}), S.QUEUED),
    ev.RunAmended: Move(frozenset({S.SCHEDULED})),  # a job edit, before the run's dispatch
    ev.RunStarted: Move(frozenset({S.QUEUED}), S.RUNNING),
    ev.RunSucceeded: Move(frozenset({S.RUNNING}), S.SUCCEEDED),
    ev.RunFailed: Move(frozenset({S.RUNNING}), S.FAILED),
    ev.AttemptTimedOut: Move(frozenset({S.RUNNING}), S.FAILED),
    ev.LeaseExpired: Move(frozenset({S.RUNNING}), S.FAILED),
    ev.LeaseReleased: Move(frozenset({S.RUNNING}), S.RETRY_SCHEDULED),
    ev.RetryScheduled: Move(frozenset({S.FAILED}), S.RETRY_SCHEDULED),
    ev.RunDeadLettered: Move(frozenset({S.FAILED, *WAITING}), S.DEAD_LETTERED),
    ev.RunCancelled: Move(frozenset(NON_FINAL), S.CANCELLED),
    ev.RetryDue: Move(frozenset({S.RETRY_SCHEDULED})),
    ev.RunRepublished: Move(frozenset({S.SCHEDULED, S.RETRY_SCHEDULED})),
    ev.QueueWaitExpired: Move(frozenset(WAITING)),
    ev.CancelRequested: Move(frozenset(NON_FINAL)),
    ev.DeadLetterTriaged: Move(frozenset({S.DEAD_LETTERED})),
    ev.DeadLetterReplayed: Move(frozenset({S.DEAD_LETTERED})),
    ev.StaleWriteRejected: Move(frozenset(ANY)),
    ev.StepCompleted: Move(frozenset({S.RUNNING})),
    ev.StepFailed: Move(frozenset({S.RUNNING})),
    ev.AttributesUpserted: Move(frozenset({S.RUNNING})),
    ev.RunSuspended: Move(frozenset({S.RUNNING}), S.SUSPENDED),
    ev.RunWoken: Move(frozenset({S.SUSPENDED}), S.SCHEDULED),
    ev.TimerFired: Move(frozenset({S.RUNNING, S.SUSPENDED})),
    ev.SignalReceived: Move(frozenset(NON_FINAL)),
    ev.SignalDelivered: Move(frozenset({S.RUNNING, S.SUSPENDED})),
    ev.SignalTimedOut: Move(frozenset({S.RUNNING, S.SUSPENDED})),
    ev.ChildStarted: Move(frozenset({S.RUNNING})),
    ev.ChildFinished: Move(frozenset({S.SUSPENDED})),
    ev.ParentNotified: Move(frozenset(FINAL)),
    ev.FanOutStarted: Move(frozenset({S.RUNNING})),
    ev.FanOutProgressed: Move(frozenset(NON_FINAL)),
    ev.FanOutCompleted: Move(frozenset(NON_FINAL)),
    ev.RunStuck: Move(frozenset(ANY)),
    ev.RunPaused: Move(frozenset({S.RUNNING, S.SUSPENDED})),
    ev.RunResumed: Move(frozenset(NON_FINAL)),
    ev.StepRetried: Move(STOPPED),
    ev.StepSkipped: Move(STOPPED),
    ev.RunRestarted: Move(STOPPED),
    ev.RunReopened: Move(frozenset({S.DEAD_LETTERED}), S.SCHEDULED),
    ev.RunMarkedSucceeded: Move(STOPPED, S.SUCCEEDED),
    ev.RunMarkedFailed: Move(frozenset({S.SUSPENDED, *WAITING})),  # RunDeadLettered follows
    ev.RunHeld: Move(frozenset(ANY)),  # retention bookkeeping (docs/RETENTION.md)
    ev.RunReleased: Move(frozenset(ANY)),
}


class UnexpectedRunEvent(Exception):
    """A run event appended where the lifecycle does not allow it: a bug in the writer, refused
    before anything is written."""

    def __init__(self, current: RunState | None, event: ev.Event) -> None:
        super().__init__(f"{type(event).__name__} cannot follow state {current}")
        self.current = current
        self.event = event


def advance(current: RunState | None, event: ev.Event) -> RunState | None:
    """The run's state after `event`; raises UnexpectedRunEvent when the table forbids it.
    An event of a type this release does not know (a newer release's) leaves the state as it
    is: a new event type is one the previous release may ignore (docs/UPGRADES.md)."""
    move = RUN_EVENTS.get(type(event))
    if move is None and ev.is_unknown(event):
        return current
    if move is None or current not in move.after:
        raise UnexpectedRunEvent(current, event)
    return current if move.to is None else move.to


def moves_agree_with_transitions() -> list[str]:
    """Every state change an event makes is a transition of `states.TRANSITIONS` (a test)."""
    return [f"{kind.__name__}: {before} -> {move.to}"
            for kind, move in RUN_EVENTS.items() if move.to is not None
            for before in move.after
            if before is not None and not can_transition(before, move.to)]


@dataclass(frozen=True, slots=True)
class Run:
    """What a run's stream says about it: the columns of the `runs` read model that events
    decide (times aside)."""

    state: RunState | None = None
    version: int = 0
    attempt: int = 0
    fencing_token: int = 0
    worker_id: str | None = None
    pool: str | None = None
    cancel_requested: bool = False
    failures: int = 0
    retry_pending: bool = False  # retry_at is set: the scheduler's retry poll will release it
    output_ref: uuid.UUID | None = None
    logs_ref: uuid.UUID | None = None
    last_error_type: str | None = None
    steps_done: int = 0  # workflow steps recorded (positions 0 .. steps_done - 1)
    waiting_for: str | None = None  # a suspended run's reason: timer | signal | child
    parent_notified: bool = False  # a final child whose parent has been told
    compensable: bool = False  # a workflow with a completed step that registered a compensation
    paused: bool = False  # an operator paused the workflow (RunPaused .. RunResumed)
    task_version: str | None = None  # the handler version of the latest attempt's worker
    pinned: bool = False  # a workflow: only that version may run it
    stuck_version: int | None = None  # the run's version at its last RunStuck


def step(run: Run, event: ev.Event) -> Run:
    """`run` after one more event (checked against the lifecycle)."""
    state = advance(run.state, event)
    r = replace(run, state=state, version=run.version + 1)
    match event:
        case ev.RunScheduled(pool=pool):
            return replace(r, pool=pool)
        case ev.RunQueued(pool=pool):
            return replace(r, pool=pool)
        case ev.RunAmended(pool=pool):
            return replace(r, pool=pool)
        case ev.RunStarted(attempt=attempt, fencing_token=token, worker_id=worker,
                           task_version=version, pinned=pinned):
            return replace(r, attempt=attempt, fencing_token=token, worker_id=worker,
                           task_version=r.task_version if r.pinned else version,
                           pinned=r.pinned or (pinned and version is not None))
        case ev.RunStuck():
            return replace(r, stuck_version=r.version)
        case ev.RunSucceeded(output_ref=output, logs_ref=logs):
            return replace(r, output_ref=output, logs_ref=logs or r.logs_ref)
        case ev.RunFailed(error_type=kind, logs_ref=logs):
            return replace(r, last_error_type=kind, logs_ref=logs or r.logs_ref)
        case ev.AttemptTimedOut(detected_by="worker"):
            return replace(r, last_error_type="attempt_timed_out")
        case ev.AttemptTimedOut(fencing_token=token):
            return replace(r, last_error_type="attempt_timed_out", fencing_token=token + 1)
        case ev.LeaseExpired(fencing_token=token):
            return replace(r, last_error_type="lease_expired", fencing_token=token + 1)
        case ev.LeaseReleased():
            return replace(r, retry_pending=True)
        case ev.RetryScheduled(failures=failures):
            return replace(r, retry_pending=True, failures=failures)
        case ev.RetryDue() | ev.RunRepublished():
            return replace(r, retry_pending=False)
        case ev.RunDeadLettered(attempts=attempts):
            return replace(r, failures=max(r.failures, attempts))
        case ev.CancelRequested():
            return replace(r, cancel_requested=True)
        case ev.StepCompleted(seq=seq, compensable=True):
            return replace(r, steps_done=max(r.steps_done, seq + 1), compensable=True)
        case (ev.StepCompleted(seq=seq) | ev.StepFailed(seq=seq) | ev.TimerFired(seq=seq)
              | ev.SignalDelivered(seq=seq) | ev.SignalTimedOut(seq=seq)
              | ev.ChildStarted(seq=seq, awaited=False) | ev.ChildFinished(seq=seq)
              | ev.FanOutCompleted(seq=seq) | ev.AttributesUpserted(seq=seq)):
            return replace(r, steps_done=max(r.steps_done, seq + 1))
        case ev.ParentNotified():
            return replace(r, parent_notified=True)
        case ev.RunPaused():
            return replace(r, paused=True)
        case ev.RunResumed():
            return replace(r, paused=False)
        case ev.RunSuspended(reason=reason):
            return replace(r, waiting_for=reason)
        case ev.RunWoken():
            return replace(r, waiting_for=None)
        case ev.RunCancelled(output_ref=output):
            return replace(r, output_ref=output or r.output_ref)
        case ev.StepRetried(seq=seq) | ev.RunRestarted(from_seq=seq):
            return _set_aside(r, seq)  # the records from `seq` on are set aside
        case ev.StepSkipped(seq=seq):
            return _set_aside(r, seq + 1)
        case ev.RunReopened():  # a fresh retry budget; a child's parent is told again
            return replace(r, failures=0, retry_pending=False, waiting_for=None,
                           parent_notified=False)
        case ev.RunMarkedSucceeded(output_ref=output):
            return replace(r, output_ref=output)
        case ev.RunMarkedFailed(error_type=kind):
            return replace(r, last_error_type=kind)
    return r


def _set_aside(run: Run, steps_done: int) -> Run:
    """After an intervention changed the recorded steps: a paused suspended run no longer
    waits for what it waited for; it stays suspended by its pause at the new position."""
    paused_here = run.state is S.SUSPENDED and run.paused
    return replace(run, steps_done=steps_done,
                   waiting_for="paused" if paused_here else run.waiting_for)


def fold(events: Iterable[ev.Event]) -> Run:
    """The run its events describe, from the first (`RunScheduled`) on."""
    run = Run()
    for event in events:
        run = step(run, event)
    return run
