"""Random but lawful run histories, for property tests (needs hypothesis, a dev dependency).

`run_stories()` walks the lifecycle table (`ostinato.domain.lifecycle.RUN_EVENTS`) from
`RunScheduled`: at each step it draws one of the events the run's current state allows, with
fields a real writer would give it (the next attempt, the current fencing token, ...). What the
walk can reach is exactly what the table allows, so a test over these stories covers every move.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

from ostinato.domain import events as ev
from ostinato.domain.lifecycle import RUN_EVENTS, Run, step

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
_refs = st.one_of(st.none(), st.uuids(version=4))
_workers = st.sampled_from(["worker-a", "worker-b"])


# Moves along the usual path weigh more, so stories reach attempts, retries and outcomes
# instead of ending early in a cancel or a dead letter.
_WEIGHT: dict[type[ev.Event], int] = {
    ev.RunQueued: 6, ev.RunStarted: 6, ev.RunFailed: 3, ev.RetryScheduled: 6, ev.RetryDue: 4,
    ev.AttemptTimedOut: 2, ev.LeaseExpired: 2, ev.LeaseReleased: 2, ev.RunSucceeded: 2,
    ev.RunReopened: 2,
}


def scheduled(job_id: uuid.UUID | None = None, pool: str = "default") -> ev.RunScheduled:
    return ev.RunScheduled(job_id=job_id or uuid.uuid4(), task="t", pool=pool,
                           priority="default", payload_ref=uuid.uuid4(), scheduled_for=T0)


def _event(kind: type[ev.Event], run: Run, draw: st.DrawFn) -> ev.Event:
    attempt, token = run.attempt, run.fencing_token
    later = T0 + timedelta(seconds=draw(st.integers(1, 3600)))
    match kind:
        case ev.RunQueued:
            return ev.RunQueued(pool=draw(st.sampled_from(["default", "long"])))
        case ev.RunStarted:
            return ev.RunStarted(attempt=attempt + 1, fencing_token=token + 1,
                                 worker_id=draw(_workers), lease_expires_at=later,
                                 task_version=draw(st.sampled_from([None, "1", "2"])),
                                 pinned=draw(st.booleans()))
        case ev.RunSucceeded:
            return ev.RunSucceeded(attempt=attempt, fencing_token=token, output_ref=draw(_refs),
                                   logs_ref=draw(_refs))
        case ev.RunFailed:
            return ev.RunFailed(attempt=attempt, fencing_token=token,
                                error_type=draw(st.sampled_from(["boom", "invalid"])),
                                message="m", retryable=draw(st.booleans()),
                                logs_ref=draw(_refs))
        case ev.AttemptTimedOut:
            return ev.AttemptTimedOut(attempt=attempt, fencing_token=token, timeout_seconds=1.0,
                                      detected_by=draw(st.sampled_from(["worker", "reconciler"])))
        case ev.LeaseExpired:
            return ev.LeaseExpired(attempt=attempt, fencing_token=token, worker_id="worker-a",
                                   expired_at=later)
        case ev.LeaseReleased:
            return ev.LeaseReleased(attempt=attempt, fencing_token=token, worker_id="worker-a")
        case ev.RetryScheduled:
            return ev.RetryScheduled(retry_at=later, reason="retryable", counts=True,
                                     failures=draw(st.integers(0, 5)))
        case ev.RetryDue:
            return ev.RetryDue(pool="default")
        case ev.RunAmended:
            return ev.RunAmended(job_id=uuid.uuid4(), definition_version=2,
                                 payload_ref=uuid.uuid4(), priority="bulk",
                                 pool=draw(st.sampled_from(["default", "etl"])))
        case ev.RunRepublished:
            return ev.RunRepublished(reason="lost in transit")
        case ev.RunDeadLettered:
            return ev.RunDeadLettered(reason="exhausted", error_type="boom", message="m",
                                      attempts=draw(st.integers(0, 5)))
        case ev.CancelRequested:
            return ev.CancelRequested(by="operator")
        case ev.RunCancelled:
            return ev.RunCancelled(by="operator", reason="requested", output_ref=draw(_refs))
        case ev.QueueWaitExpired:
            return ev.QueueWaitExpired(deadline=later)
        case ev.DeadLetterTriaged:
            return ev.DeadLetterTriaged(state="acknowledged", comment=None, by="operator")
        case ev.DeadLetterReplayed:
            return ev.DeadLetterReplayed(new_run_id=uuid.uuid4(), request_key="k",
                                         payload_changed=False, by="operator")
        case ev.StaleWriteRejected:
            return ev.StaleWriteRejected(operation="complete", presented_token=max(0, token - 1),
                                         current_token=token, worker_id="worker-b")
        case ev.AttributesUpserted:
            return ev.AttributesUpserted(seq=run.steps_done, name="attributes:upsert",
                                         attempt=attempt, fencing_token=token,
                                         attributes={"stage": draw(st.sampled_from(["a", "b"]))})
        case ev.StepCompleted:
            return ev.StepCompleted(seq=run.steps_done, name=draw(st.sampled_from(["a", "b"])),
                                    attempt=attempt, fencing_token=token,
                                    output=draw(st.none() | st.integers()),
                                    compensable=draw(st.booleans()))
        case ev.StepFailed:
            return ev.StepFailed(seq=run.steps_done, name="a", attempt=attempt,
                                 fencing_token=token, error_type="declined", message="m")
        case ev.RunSuspended:
            reason = draw(st.sampled_from(["timer", "signal", "child"]))
            return ev.RunSuspended(attempt=attempt, fencing_token=token, seq=run.steps_done,
                                   name={"timer": "sleep", "signal": "signal:go",
                                         "child": "child:t"}[reason],
                                   reason=reason, wake_at=later if reason == "timer" else None,
                                   signal="go" if reason == "signal" else None,
                                   child_run_id=uuid.uuid4() if reason == "child" else None)
        case ev.RunWoken:
            return ev.RunWoken(cause="timer")
        case ev.ChildStarted:
            return ev.ChildStarted(seq=run.steps_done, name="child:t", child_run_id=uuid.uuid4(),
                                   task="t", awaited=draw(st.booleans()), attempt=attempt)
        case ev.ChildFinished:
            ok = draw(st.booleans())
            return ev.ChildFinished(seq=run.steps_done, name="child:t",
                                    child_run_id=uuid.uuid4(),
                                    state="succeeded" if ok else "dead_lettered",
                                    output={"n": 1} if ok else None,
                                    error_type=None if ok else "boom",
                                    message=None if ok else "m")
        case ev.FanOutStarted:
            return ev.FanOutStarted(seq=run.steps_done, name="fan_out:t", task="t", total=4,
                                    max_concurrency=2, admitted=2, on_failure="fail",
                                    pool="default", priority="default", attempt=attempt)
        case ev.FanOutProgressed:
            return ev.FanOutProgressed(seq=run.steps_done, succeeded=1, failed=0, admitted=3)
        case ev.FanOutCompleted:
            ok = draw(st.booleans())
            return ev.FanOutCompleted(seq=run.steps_done, name="fan_out:t",
                                      outcome="succeeded" if ok else "failed", total=4,
                                      succeeded=4 if ok else 3, failed=0 if ok else 1,
                                      error_type=None if ok else "fan_out_failed",
                                      message=None if ok else "1 of 4 chunks failed")
        case ev.RunPaused:
            return ev.RunPaused(by="operator", reason="maintenance")
        case ev.RunResumed:
            return ev.RunResumed(by="operator", wake_at=draw(st.none() | st.just(later)))
        case ev.RunStuck:
            return ev.RunStuck(reason="no_worker", detail="no worker serves t v2", since=later)
        case ev.ParentNotified:
            return ev.ParentNotified(parent_run_id=uuid.uuid4(), woke=draw(st.booleans()))
        case ev.TimerFired:
            return ev.TimerFired(seq=run.steps_done, name="sleep", due_at=later)
        case ev.SignalReceived:
            return ev.SignalReceived(signal_id=uuid.uuid4(), name="go", payload={"n": 1})
        case ev.SignalDelivered:
            return ev.SignalDelivered(seq=run.steps_done, name="signal:go",
                                      signal_id=uuid.uuid4(), payload=None)
        case ev.SignalTimedOut:
            return ev.SignalTimedOut(seq=run.steps_done, name="signal:go", deadline=later)
        case ev.StepRetried:
            seq = draw(st.integers(0, run.steps_done))
            return ev.StepRetried(seq=seq, name="a", set_aside=run.steps_done - seq,
                                  by="operator", reason="fixed the bug")
        case ev.StepSkipped:
            seq = draw(st.integers(0, run.steps_done))
            return ev.StepSkipped(seq=seq, name="a", set_aside=run.steps_done - seq,
                                  by="operator", reason="done by hand",
                                  output=draw(st.none() | st.integers()))
        case ev.RunRestarted:
            seq = draw(st.integers(0, run.steps_done))
            return ev.RunRestarted(from_seq=seq, set_aside=run.steps_done - seq, by="operator",
                                   reason="again")
        case ev.RunReopened:
            return ev.RunReopened(cause=draw(st.sampled_from(["step_retried", "restarted"])),
                                  by="operator", reason="fixed")
        case ev.RunMarkedSucceeded:
            return ev.RunMarkedSucceeded(output_ref=draw(_refs), by="operator", reason="done")
        case ev.RunMarkedFailed:
            return ev.RunMarkedFailed(error_type="operator_failed", message="m", by="operator",
                                      reason="give up")
        case ev.RunHeld:
            return ev.RunHeld(reason="legal hold", by="operator")
        case ev.RunReleased:
            return ev.RunReleased(by="operator")
    raise AssertionError(f"no story step for {kind.__name__}")


@st.composite
def run_stories(draw: st.DrawFn, max_events: int = 14) -> list[ev.Event]:
    """A run's events from `RunScheduled` on, each allowed after the ones before it."""
    events: list[ev.Event] = [scheduled()]
    run = step(Run(), events[0])
    for _ in range(draw(st.integers(0, max_events))):
        options = sorted((k for k, move in RUN_EVENTS.items()
                          if run.state in move.after and k is not ev.RunScheduled
                          for _ in range(_WEIGHT.get(k, 1))),
                         key=lambda k: k.__name__)
        if not options:
            break
        event = _event(draw(st.sampled_from(options)), run, draw)
        events.append(event)
        run = step(run, event)
    return events
