"""The workflow step model, both sides of it, as pure functions over values: the one home of
what a step is and what reporting one means (docs/WORKFLOW_STEPS.md follows one step through).

A workflow is an ordinary run whose handler calls steps in order. Step `seq` (0-based, its
position in the workflow) is identified by its name and its occurrence among the steps of that
name (`charge#2`: the second step named charge). Before the workflow goes past a step, the
step's outcome is appended to the run's stream (`StepCompleted` / `StepFailed`, or the record
of its kind: `KINDS`).

The client side (the SDK, the harness, the pre-deploy check): when the run executes again (a
crash, a lease expiry, a retry), each step asks `decide`:

- recorded at its position with its name: `Replay`, the recorded outcome, without running;
- nothing recorded there yet: `Execute`, the first unrecorded step runs;
- recorded under another name: `Diverged`, the code no longer makes the recorded sequence (a
  non-determinism error, never a silent reinterpretation of the history).

The server side (the worker-gateway, the scheduler's wake-ups, the in-memory journal of the test
harness): `judge` says what a step report means in the run's state (record, repeat, refuse,
pause, not start), and `timer_wait`, `signal_wait`, `child_plan`, `fan_out_plan` what a step of
that kind does at its position (end at once with its record, or suspend the run); `wake`,
`child_ended` and `fan_out_wakes` what the wake-ups append. Callers build the events; these say
which.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

# A step's output, a child's output or a signal's payload larger than this (encoded JSON) is
# kept in the blob store and referenced from its event, so the history stays small.
INLINE_OUTPUT_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class StepId:
    name: str
    occurrence: int  # 1-based among the workflow's steps of this name

    def __str__(self) -> str:
        return f"{self.name}#{self.occurrence}"


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """A step outcome as the run's stream holds it."""

    seq: int
    name: str
    succeeded: bool
    output: Any = None
    output_ref: uuid.UUID | None = None  # output kept in the blob store (too large to inline)
    error_type: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Replay:
    step: RecordedStep


@dataclass(frozen=True, slots=True)
class Execute:
    seq: int
    id: StepId


@dataclass(frozen=True, slots=True)
class Diverged:
    seq: int
    recorded: StepId
    met: StepId

    def message(self) -> str:
        return (f"non-deterministic workflow: at step position {self.seq} the history recorded "
                f"step {self.recorded} but the code now runs step {self.met}")


class StepCounter:
    """Gives each step met in one execution its position and occurrence number."""

    __slots__ = ("_names", "seq")

    def __init__(self) -> None:
        self.seq = 0
        self._names: Counter[str] = Counter()

    def next(self, name: str) -> tuple[int, StepId]:
        seq = self.seq
        self.seq += 1
        self._names[name] += 1
        return seq, StepId(name, self._names[name])

    def would_be(self, name: str) -> StepId:
        """The id a step named `name` would have taken at the position just given out to a step
        of another name: how a recorded step is named in a divergence message."""
        return StepId(name, self._names[name] + 1)

    def last(self, name: str) -> StepId:
        """The id the latest step named `name` took."""
        return StepId(name, self._names[name])


def decide(counter: StepCounter, name: str,
           recorded: RecordedStep | None) -> Replay | Execute | Diverged:
    """What the next step, named `name`, does given the step recorded at its position (None:
    none yet); advances `counter`."""
    seq, met = counter.next(name)
    if recorded is None:
        return Execute(seq, met)
    if recorded.seq != seq:
        raise ValueError(f"step {met} at position {seq} was given the record of position "
                         f"{recorded.seq}")
    if recorded.name != name:
        return Diverged(seq, counter.would_be(recorded.name), met)
    return Replay(recorded)


PATCH_PREFIX = "patch:"
ATTRIBUTES_STEP: Final = "attributes:upsert"  # the name ctx.upsert_attributes records under


def patch_step(patch_id: str) -> str:
    """The step name a patch marker is recorded under."""
    return f"{PATCH_PREFIX}{patch_id}"


def decide_patch(counter: StepCounter, patch_id: str, recorded: RecordedStep | None) -> bool:
    """Whether the code after patch marker `patch_id` takes its new path (`ctx.patched`), given
    the step recorded at the marker's position; advances `counter` only over a marker:

    - the marker recorded there: True (decided at the first execution, replayed since);
    - nothing recorded there yet: True, and the marker is to be recorded at this position (the
      run reached this point under the new code);
    - another step recorded there: False, and the position stays the recorded step's (the run
      went past this point under the old code, which had no marker).
    """
    if recorded is not None and recorded.name != patch_step(patch_id):
        return False
    counter.next(patch_step(patch_id))
    return True


# -- the step kinds ----------------------------------------------------------------------------

class StepKind(StrEnum):
    """What a workflow position holds; a `StepItem` carries its kind in which of `wait`, `child`
    and `fan_out` it sets (`kind_of`)."""

    STEP = "step"  # ctx.step: the function ran, its outcome is the record
    PATCH = "patch"  # ctx.patched: a marker, recorded as a step named `patch:<id>`
    TIMER = "timer"  # ctx.sleep, ctx.sleep_until
    SIGNAL = "signal"  # ctx.wait_for_signal
    CHILD = "child"  # ctx.child: a child run, waited for
    START_CHILD = "start_child"  # ctx.start_child: a child run, not waited for
    FAN_OUT = "fan_out"  # ctx.fan_out: chunk runs in a window, waited for
    ATTRIBUTES = "attributes"  # ctx.upsert_attributes: searchable attributes set (a step
    #   named `attributes:upsert`), recorded as AttributesUpserted
    STATE = "state"  # ctx.set: a named value published, recorded as a step named `set:<name>`
    REPLY = "reply"  # an update's answer, recorded as a step named `reply:<update id>`


@dataclass(frozen=True, slots=True)
class KindRule:
    """One row of the table: how a step of this kind is recorded and what it waits on."""

    records: tuple[str, ...]  # the events that can record the position (one of them does)
    suspends: str | None  # RunSuspended's reason while it cannot end at once; None: never waits
    starts_runs: bool  # it creates runs: not started once the run's cancel is requested
    woken_by: tuple[str, ...]  # the RunWoken causes of a wait's end (besides the deadline)


KINDS: Final[Mapping[StepKind, KindRule]] = {
    StepKind.STEP: KindRule(("StepCompleted", "StepFailed"), None, False, ()),
    StepKind.PATCH: KindRule(("StepCompleted",), None, False, ()),
    StepKind.TIMER: KindRule(("TimerFired",), "timer", False, ("timer",)),
    StepKind.SIGNAL: KindRule(("SignalDelivered", "SignalTimedOut"), "signal", False,
                              ("signal", "signal_timeout")),
    StepKind.CHILD: KindRule(("ChildFinished",), "child", True, ("child",)),
    StepKind.START_CHILD: KindRule(("ChildStarted",), None, True, ()),
    StepKind.FAN_OUT: KindRule(("FanOutCompleted",), "fan_out", True, ("fan_out",)),
    StepKind.ATTRIBUTES: KindRule(("AttributesUpserted",), None, False, ()),
    StepKind.STATE: KindRule(("StepCompleted",), None, False, ()),
    StepKind.REPLY: KindRule(("StepCompleted",), None, False, ()),
}
PAUSED: Final = "paused"  # RunSuspended's reason for a paused run: no wait, its resume wakes it
WAIT_REASONS: Final = frozenset(r.suspends for r in KINDS.values() if r.suspends)


def kind_of(*, wait: str | None = None, child_awaited: bool | None = None,
            fan_out: bool = False, name: str = "") -> StepKind:
    """The kind of a reported step: `wait` its wait's kind (timer, signal), `child_awaited`
    None for no child, `fan_out` whether it starts one; `name` tells a patch marker."""
    if fan_out:
        return StepKind.FAN_OUT
    if child_awaited is not None:
        return StepKind.CHILD if child_awaited else StepKind.START_CHILD
    if wait is not None:
        return StepKind.TIMER if wait == "timer" else StepKind.SIGNAL
    if name.startswith(STATE_PREFIX):
        return StepKind.STATE
    if name.startswith(REPLY_PREFIX):
        return StepKind.REPLY
    if name == ATTRIBUTES_STEP:
        return StepKind.ATTRIBUTES
    return StepKind.PATCH if name.startswith(PATCH_PREFIX) else StepKind.STEP


# -- published state and updates ------------------------------------------------------------
# `ctx.set(name, value)` takes a position like any step and records the value there (a step
# named `set:<name>`): replayed, a set already recorded is not sent again, and the latest
# value of each name is the one at the highest position. An update is a request delivered on
# the reserved signal channel `UPDATE_SIGNAL` (durable, idempotent, woken like a signal); the
# workflow takes it at a wait of its choosing (`ctx.next_update`) and its answer takes a
# position named `reply:<update id>`.

STATE_PREFIX: Final = "set:"
REPLY_PREFIX: Final = "reply:"
UPDATE_SIGNAL: Final = "$update"  # signal names starting with "$" are the engine's own
MAX_STATE_NAME_CHARS: Final = 200
MAX_STATE_BYTES: Final = INLINE_OUTPUT_BYTES  # a value or an answer, encoded JSON


def state_step(name: str) -> str:
    """The step name a published value `name` is recorded under."""
    return f"{STATE_PREFIX}{name}"


def reply_step(update_id: object) -> str:
    """The step name the answer to update `update_id` is recorded under."""
    return f"{REPLY_PREFIX}{update_id}"


def bad_state_name(name: str) -> str | None:
    """Why a state (or update) name is refused; None: it is well formed."""
    if not name or len(name) > MAX_STATE_NAME_CHARS:
        return f"a name has 1 to {MAX_STATE_NAME_CHARS} characters"
    return None


def too_large(size: int, what: str) -> str | None:
    """Why a value of `size` encoded bytes is refused (413); None: it fits."""
    if size > MAX_STATE_BYTES:
        return f"{what} is {size} bytes encoded; the limit is {MAX_STATE_BYTES}"
    return None


class UpdateState(StrEnum):
    PENDING = "pending"  # not answered yet, the run not final
    COMPLETED = "completed"  # answered with an output
    REJECTED = "rejected"  # answered with an error (an unknown name, a handler's failure)
    ABANDONED = "abandoned"  # the run ended without answering it


def update_state(answer: Mapping[str, Any] | None, run_final: bool) -> UpdateState:
    """Where an update stands: its recorded answer (`{"ok": bool, ...}`) if any, and whether
    its run is final."""
    if answer is not None:
        return UpdateState.COMPLETED if answer.get("ok") else UpdateState.REJECTED
    return UpdateState.ABANDONED if run_final else UpdateState.PENDING


# -- the server side: what a step report means -----------------------------------------------

class Verdict(StrEnum):
    """What a step report does to the run, before its kind is looked at (`judge`)."""

    STALE = "stale"  # 409 and StaleWriteRejected: another attempt's token or the run not running
    REPEAT = "repeat"  # 200, nothing new: a resent report of a recorded position
    DEADLINE_PASSED = "deadline_passed"  # 200, nothing recorded: the workflow fails (timed out)
    GAP = "gap"  # 422, nothing recorded: a position beyond the next (a client bug)
    PAUSE = "pause"  # a plain step recorded then, or a wait not begun, and the run suspended
    NOT_STARTED = "not_started"  # 200 cancel_requested: a run whose cancel was asked starts none
    RECORD = "record"  # the position is the kind's to take (`timer_wait`, `child_plan`, ...)


STATUS: Final[Mapping[Verdict, int]] = {Verdict.STALE: 409, Verdict.GAP: 422}  # else 200


@dataclass(frozen=True, slots=True)
class RunAt:
    """The run as the step report finds it (locked, in the report's transaction)."""

    fencing_token: int
    running: bool
    next_seq: int  # the positions recorded so far (`steps_done`, plus this batch's)
    paused: bool = False
    cancel_requested: bool = False


@dataclass(frozen=True, slots=True)
class Report:
    """One step report: its position, its attempt's token, its kind, the workflow's deadline."""

    seq: int
    fencing_token: int
    kind: StepKind = StepKind.STEP
    deadline: datetime | None = None


def judge(run: RunAt, report: Report, now: datetime | None) -> Verdict:
    """What `report` means for `run` by the database clock `now`, in this order: fencing first,
    then a repeat (whose answer was lost: the SDK awaits one step at a time, so a recorded
    position is this step's), the deadline, a gap, a pause, a cancel."""
    if report.fencing_token != run.fencing_token or not run.running:
        return Verdict.STALE
    if report.seq < run.next_seq:
        return Verdict.REPEAT
    if report.deadline is not None and now is not None and report.deadline <= now:
        return Verdict.DEADLINE_PASSED
    if report.seq > run.next_seq:
        return Verdict.GAP
    if run.paused:
        return Verdict.PAUSE
    if run.cancel_requested and KINDS[report.kind].starts_runs:
        return Verdict.NOT_STARTED
    return Verdict.RECORD


def paused_records_first(kind: StepKind) -> bool:
    """A paused run's report: a finished step (it never waits) is recorded before the run is
    suspended; a wait, a child or a fan-out, not begun yet, is not."""
    return KINDS[kind].suspends is None and not KINDS[kind].starts_runs


@dataclass(frozen=True, slots=True)
class Ends:
    """The step's record is appended at once (`event`); the workflow goes on."""

    event: str
    due: datetime | None = None  # a timer's due instant; a signal timeout's deadline


@dataclass(frozen=True, slots=True)
class Suspends:
    """`RunSuspended` (`reason`): the attempt ends and its lease is released; `wake_at`, when
    set, is when the scheduler's wake poll ends the wait (a timer, a signal's timeout)."""

    reason: str
    wake_at: datetime | None = None


def bad_wait(kind: str, *, until: datetime | None, seconds: float | None,
             signal: str | None) -> str | None:
    """Why a wait is refused (422, nothing recorded); None: it is well formed."""
    if kind == "timer" and (until is None) == (seconds is None):
        return "a timer wait needs exactly one of until and seconds"
    if kind == "signal" and not signal:
        return "a signal wait needs the signal's name"
    return None


def timer_wait(until: datetime | None, seconds: float | None, now: datetime) -> Ends | Suspends:
    """A timer at its position: due already (by the database clock), `TimerFired`; else the run
    sleeps until it is."""
    due = until or now + timedelta(seconds=seconds or 0.0)
    if due <= now:
        return Ends("TimerFired", due)
    return Suspends("timer", due)


def signal_wait(sent: bool, timeout_seconds: float | None, now: datetime) -> Ends | Suspends:
    """A signal wait at its position: a signal of that name sent already (the oldest undelivered
    one), `SignalDelivered`; none and a timeout of 0, `SignalTimedOut`; else the run waits,
    until its timeout when it has one."""
    if sent:
        return Ends("SignalDelivered")
    if timeout_seconds == 0:
        return Ends("SignalTimedOut", now)
    return Suspends("signal", None if timeout_seconds is None
                    else now + timedelta(seconds=timeout_seconds))


@dataclass(frozen=True, slots=True)
class ChildPlan:
    """A child step at its position: whether its run is created (`RunScheduled` on the child's
    stream and `ChildStarted`), whether `ChildStarted` is appended again (a started child's
    position set aside and reported again), and then `record` (ChildStarted or ChildFinished is
    the record: the workflow goes on) or `suspend` (RunSuspended, reason child)."""

    create: bool
    start_again: bool
    then: str  # "started" | "finished" | "suspend"


def child_plan(*, awaited: bool, exists: bool, final: bool) -> ChildPlan:
    """A child exists already when the report is resent or its position reported again; its id
    derives from the parent and the position, so it is never created twice."""
    again = exists and not awaited
    if not awaited:
        return ChildPlan(not exists, again, "started")
    if exists and final:
        return ChildPlan(False, False, "finished")
    return ChildPlan(not exists, False, "suspend")


def fan_out_plan(existing_state: str | None) -> str:
    """A fan-out at its position: none yet, `start` (FanOutStarted, the first window's runs,
    RunSuspended); one still running (the run executed again meanwhile), `suspend` again; one
    over (its record set aside by an operator), `record_again` (its FanOutCompleted)."""
    if existing_state is None:
        return "start"
    return "suspend" if existing_state == "running" else "record_again"


# -- the wake-ups (the scheduler, a signal's arrival) ---------------------------------------

def wake(wait_reason: str, wait_due: bool) -> tuple[str | None, str]:
    """A suspended run whose time came (the scheduler's wake poll): (the event recording its
    position or None, the RunWoken cause). Its own wait due: a timer fires, a signal wait times
    out; only the workflow's deadline due: woken with nothing recorded (it then fails)."""
    if not wait_due:
        return None, "deadline"
    if wait_reason == "timer":
        return "TimerFired", "timer"
    return "SignalTimedOut", "signal_timeout"


def waits_on(*, state: str, wait_reason: str | None, waited: object, reason: str,
             what: object) -> bool:
    """Whether a run (`state`, suspended for `wait_reason` on `waited`: a child's run id, a
    signal's name) waits on `what` for `reason` (child, signal)."""
    return state == "suspended" and wait_reason == reason and waited == what


def ended_wait(waiting: bool, paused: bool) -> tuple[bool, bool]:
    """What a child's end or a signal's arrival appends to its run: (record the position,
    RunWoken). A paused run gets the record only: its resume wakes it."""
    return waiting, waiting and not paused


def fan_out_wakes(*, state: str, wait_reason: str | None, wait_seq: int | None, seq: int,
                  paused: bool) -> bool:
    """Whether a fan-out's end (FanOutCompleted at `seq`) wakes its parent."""
    return (waits_on(state=state, wait_reason=wait_reason, waited=wait_seq, reason="fan_out",
                     what=seq) and not paused)


def child_error(state: str, last_error: object, child_id: object) -> tuple[str, str]:
    """A child that did not succeed, as its parent's failed step record: (type, message)."""
    if state == "cancelled":
        return "child_cancelled", f"child run {child_id} was cancelled"
    error = last_error if isinstance(last_error, dict) else {}
    return (error.get("type") or "child_failed",
            error.get("message") or f"child run {child_id} was dead-lettered")
