"""Generated workflow step sequences, to be run the same way through the real worker-gateway and
through the test harness's `MemoryJournal`: the actions (a step report of each kind, a resent,
stale, early or late report, a signal, the clock moving on), the report each one sends, and the
events of the step model as both sides list them: (event type, position, step name)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
from hypothesis import strategies as st

from ostinato.wire import worker as p

# The events the step model appends to a run's stream (the claim's and the dispatcher's are
# the run lifecycle's, which the harness does not model).
STEP_MODEL_EVENTS = frozenset({
    "StepCompleted", "StepFailed", "TimerFired", "SignalReceived", "SignalDelivered",
    "SignalTimedOut", "ChildStarted", "ChildFinished", "RunSuspended", "RunWoken",
    "StaleWriteRejected",
})
LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)  # due, or past, by either clock
SIGNALS = ("go", "stop")

EventKey = tuple[str, int | None, str | None]


@dataclass(frozen=True)
class Action:
    """One thing that happens to the run: a report (`step`, `failed_step`, `timer_due`,
    `timer_later`, `signal_wait`, `signal_now`, `child`, `start_child`, `repeat`, `stale`,
    `gap`, `late`), a signal sent (`send`), the clock moving past every wait (`wake`), or the
    child the run waits for ending (`finish`)."""

    what: str
    name: str = "s"
    signal: str = "go"
    timeout: float | None = None
    ok: bool = True  # `finish`: the child the run waits for succeeds, else is dead-lettered


REPORTS = ("step", "failed_step", "timer_due", "timer_later", "signal_wait", "signal_now",
           "child", "start_child", "repeat", "stale", "gap", "late")

actions = st.lists(st.one_of(
    st.builds(Action, st.sampled_from(REPORTS), st.sampled_from(["a", "b", "c"]),
              st.sampled_from(SIGNALS), st.sampled_from([None, 60.0])),
    st.builds(Action, st.just("send"), signal=st.sampled_from(SIGNALS)),
    st.just(Action("wake")),
    st.builds(Action, st.just("finish"), ok=st.booleans()),
), min_size=1, max_size=10)


def report(action: Action, run_id: str, token: int, seq: int,
           last: dict[str, Any] | None) -> dict[str, Any]:
    """The step report `action` sends at the run's next position `seq` under `token`; `last`:
    the latest report recorded (a `repeat` resends it, or a first step when there is none)."""
    step: dict[str, Any] = {"run_id": run_id, "fencing_token": token, "seq": seq,
                            "name": action.name, "output": seq}
    match action.what:
        case "failed_step":
            step["error"] = {"type": "declined", "message": "no", "retryable": False}
        case "timer_due":
            step["wait"] = {"kind": "timer", "until": LONG_AGO.isoformat()}
        case "timer_later":
            step["wait"] = {"kind": "timer", "seconds": 3600}
        case "signal_wait":
            step["wait"] = {"kind": "signal", "signal": action.signal,
                            "timeout_seconds": action.timeout}
        case "signal_now":
            step["wait"] = {"kind": "signal", "signal": action.signal, "timeout_seconds": 0}
        case "child" | "start_child":
            step["child"] = {"task": "kid", "payload": {"n": seq},
                             "wait": action.what == "child"}
        case "repeat":
            step = dict(last) if last is not None else step
        case "stale":
            step["fencing_token"] = token - 1
        case "gap":
            step["seq"] = seq + 2
        case "late":
            step["deadline"] = LONG_AGO.isoformat()
    return step


def step_item(body: dict[str, Any]) -> p.StepItem:
    """The report as the SDK would hand it to a journal."""
    return msgspec.json.decode(msgspec.json.encode(body), type=p.StepItem)


def answer(result: p.BatchItemResult) -> tuple[Any, ...]:
    """What the workflow learns from an answer (not the child's run id, which differs)."""
    step = result.step
    return (result.status, result.suspended, result.deadline_passed,
            None if step is None else (step.seq, step.name, step.succeeded, step.error_type))


def event_key(event: Any) -> EventKey:
    return (type(event).__name__, getattr(event, "seq", None), getattr(event, "name", None))


def step_model_events(events: list[Any]) -> list[EventKey]:
    """A run stream's step-model events, as the harness lists them."""
    return [event_key(e) for e in events if type(e).__name__ in STEP_MODEL_EVENTS]
