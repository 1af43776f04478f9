"""Operator interventions as pure decisions (`ostinato.domain.interventions`): for every state,
pause flag, position and record, either the exact events (each lawful from the run's state, the
first naming who and why) or a refusal of the right kind naming the field or the state."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from ostinato.domain import events as ev
from ostinato.domain import interventions as rules
from ostinato.domain.errors import InvalidInput, InvalidState
from ostinato.domain.interventions import Record, Target
from ostinato.domain.lifecycle import STOPPED, advance
from ostinato.domain.states import RunState

S = RunState
RUN = uuid.uuid4()
JOB = uuid.uuid4()
BY, WHY = "tenant:acme", "the card provider fixed its outage"
FAILED = Record(seq=2, name="pay", succeeded=False)
DONE = Record(seq=2, name="pay", succeeded=True)


def target(state: RunState, *, steps_done: int = 3, paused: bool = False,
           **waits: Any) -> Target:
    return Target(run_id=RUN, state=state, steps_done=steps_done, paused=paused, failures=3,
                  job_id=JOB, **waits)


def kinds(events: list[ev.Event]) -> list[str]:
    return [ev.event_type(e) for e in events]


def lawful(state: RunState, events: list[ev.Event]) -> RunState | None:
    current: RunState | None = state
    for e in events:
        current = advance(current, e)  # raises on a move the lifecycle forbids
    return current


def reopening(state: RunState, paused: bool) -> list[str]:
    if state is S.DEAD_LETTERED:
        return ["RunReopened"]
    if state is S.SUSPENDED and not paused:
        return ["RunWoken"]
    return []


# Every decision over a run in any state, with a valid request, at the failed position 2.
DECISIONS: dict[str, Callable[[Target], list[ev.Event]]] = {
    "retry": lambda t: rules.retry_step(t, 2, FAILED, [], by=BY, reason=WHY),
    "skip": lambda t: rules.skip_step(t, 2, FAILED, None, {"paid": 1}, None, [], by=BY,
                                      reason=WHY),
    "restart": lambda t: rules.restart(t, 1, [], by=BY, reason=WHY),
    "succeed": lambda t: rules.mark_succeeded(t, None, by=BY, reason=WHY),
    "fail": lambda t: rules.mark_failed(t, None, None, by=BY, reason=WHY),
}


@pytest.mark.parametrize(("name", "state", "paused"),
                         list(itertools.product(DECISIONS, RunState, (False, True))))
def test_every_intervention_in_every_state_is_lawful_or_refused(
        name: str, state: RunState, paused: bool) -> None:
    run = target(state, paused=paused)
    refused = state not in STOPPED or (name == "fail" and state is S.DEAD_LETTERED)
    if refused:
        with pytest.raises(InvalidState) as caught:
            DECISIONS[name](run)
        assert str(RUN) in caught.value.detail
        return
    events = DECISIONS[name](run)
    after = lawful(state, events)
    first = events[0]
    assert (first.by, first.reason) == (BY, WHY)  # type: ignore[attr-defined]
    if name in ("retry", "skip", "restart"):
        assert kinds(events)[1:] == reopening(state, paused)
        assert after is (S.SCHEDULED if state is S.DEAD_LETTERED
                         or (state is S.SUSPENDED and not paused) else state)
    elif name == "succeed":
        assert kinds(events) == ["RunMarkedSucceeded"] and after is S.SUCCEEDED
    else:
        woken = ["RunWoken"] if state is S.SUSPENDED else []
        assert kinds(events) == ["RunMarkedFailed", *woken, "RunDeadLettered"]
        assert after is S.DEAD_LETTERED


def test_a_running_run_is_refused_with_what_to_do() -> None:
    with pytest.raises(InvalidState, match="running: an intervention waits"):
        rules.restart(target(S.RUNNING), 0, [], by=BY, reason=WHY)
    with pytest.raises(InvalidState, match="try again"):
        rules.restart(target(S.FAILED), 0, [], by=BY, reason=WHY)
    with pytest.raises(InvalidState, match="re-run it as a new run"):
        rules.restart(target(S.CANCELLED), 0, [], by=BY, reason=WHY)


def test_retrying_sets_the_failed_record_and_later_ones_aside() -> None:
    [retried, reopened] = rules.retry_step(target(S.DEAD_LETTERED, steps_done=5), 2, FAILED,
                                           [], by=BY, reason=WHY)
    assert retried == ev.StepRetried(seq=2, name="pay", set_aside=3, by=BY, reason=WHY)
    assert reopened == ev.RunReopened(cause="step_retried", by=BY, reason=WHY)


def test_a_step_that_stopped_the_run_unrecorded_is_retried_only_from_a_dead_letter() -> None:
    [retried, _] = rules.retry_step(target(S.DEAD_LETTERED), 3, None, [], by=BY, reason=WHY)
    assert retried == ev.StepRetried(seq=3, name=None, set_aside=0, by=BY, reason=WHY)
    for state in STOPPED - {S.DEAD_LETTERED}:
        with pytest.raises(InvalidState, match="nothing failed at position 3"):
            rules.retry_step(target(state), 3, None, [], by=BY, reason=WHY)


def test_a_succeeded_step_is_neither_retried_nor_skipped() -> None:
    with pytest.raises(InvalidState, match="restart from it"):
        rules.retry_step(target(S.DEAD_LETTERED), 2, DONE, [], by=BY, reason=WHY)
    with pytest.raises(InvalidState, match="nothing to skip"):
        rules.skip_step(target(S.DEAD_LETTERED), 2, DONE, None, 1, None, [], by=BY,
                        reason=WHY)


@pytest.mark.parametrize("seq", [-1, 4, 100])
def test_a_position_beyond_the_next_is_invalid_input(seq: int) -> None:
    run = target(S.DEAD_LETTERED, steps_done=3)
    for decide, field in [
        (lambda: rules.retry_step(run, seq, None, [], by=BY, reason=WHY), "seq"),
        (lambda: rules.skip_step(run, seq, None, "x", 1, None, [], by=BY, reason=WHY), "seq"),
        (lambda: rules.restart(run, seq, [], by=BY, reason=WHY), "from_seq"),
    ]:
        with pytest.raises(InvalidInput) as caught:
            decide()
        assert caught.value.errors[0]["field"] == field


@pytest.mark.parametrize("reason", ["", "   ", "x" * 1001])
def test_every_intervention_needs_a_reason_of_1_to_1000_characters(reason: str) -> None:
    run = target(S.DEAD_LETTERED)
    for decide in (lambda: rules.retry_step(run, 2, FAILED, [], by=BY, reason=reason),
                   lambda: rules.restart(run, 0, [], by=BY, reason=reason),
                   lambda: rules.mark_succeeded(run, None, by=BY, reason=reason),
                   lambda: rules.mark_failed(target(S.SUSPENDED), None, None, by=BY,
                                             reason=reason)):
        with pytest.raises(InvalidInput) as caught:
            decide()
        assert caught.value.errors[0]["field"] == "reason"


def test_skipping_takes_the_recorded_or_waited_name_and_asks_for_one_otherwise() -> None:
    ref = uuid.uuid4()
    [skipped, _] = rules.skip_step(target(S.DEAD_LETTERED, steps_done=4), 2, FAILED, None,
                                   "ignored: in the blob", ref, [], by=BY, reason=WHY)
    assert skipped == ev.StepSkipped(seq=2, name="pay", set_aside=2, by=BY, reason=WHY,
                                     output=None, output_ref=ref)
    with pytest.raises(InvalidInput, match="is 'pay', not 'charge'"):
        rules.skip_step(target(S.DEAD_LETTERED), 2, FAILED, "charge", 1, None, [], by=BY,
                        reason=WHY)
    waiting = target(S.SUSPENDED, wait_reason="signal", wait_seq=3, wait_name="signal:go")
    [skipped, woken] = rules.skip_step(waiting, 3, None, None, {"ok": 1}, None, [], by=BY,
                                       reason=WHY)
    assert (skipped.name, skipped.output, woken) == ("signal:go", {"ok": 1},  # type: ignore
                                                     ev.RunWoken(cause="intervention"))
    with pytest.raises(InvalidInput) as caught:
        rules.skip_step(target(S.DEAD_LETTERED), 3, None, None, 1, None, [], by=BY,
                        reason=WHY)
    assert caught.value.errors[0]["field"] == "name"
    [skipped, _] = rules.skip_step(target(S.DEAD_LETTERED), 3, None, "fetch", [1], None, [],
                                   by=BY, reason=WHY)
    assert skipped == ev.StepSkipped(seq=3, name="fetch", set_aside=0, by=BY, reason=WHY,
                                     output=[1])


def test_a_paused_suspended_run_stays_suspended_until_its_resume() -> None:
    run = target(S.SUSPENDED, paused=True, wait_reason="timer", wait_seq=3, wait_name="sleep")
    assert kinds(rules.restart(run, 0, [], by=BY, reason=WHY)) == ["RunRestarted"]
    with pytest.raises(InvalidInput):  # a paused wait's name is not the step's
        rules.skip_step(target(S.SUSPENDED, paused=True, wait_reason="paused", wait_seq=3,
                               wait_name="paused"), 3, None, None, 1, None, [], by=BY,
                        reason=WHY)


def test_setting_aside_a_completed_compensation_of_a_kept_step_is_refused() -> None:
    with pytest.raises(InvalidState, match="compensation of step car, hotel"):
        rules.retry_step(target(S.DEAD_LETTERED, steps_done=5), 2, FAILED, ["hotel", "car"],
                         by=BY, reason=WHY)
    with pytest.raises(InvalidState, match="compensation of step hotel"):
        rules.restart(target(S.DEAD_LETTERED), 1, ["hotel"], by=BY, reason=WHY)


def test_failing_records_the_operators_error_then_the_dead_letter() -> None:
    events = rules.mark_failed(target(S.RETRY_SCHEDULED), "abandoned", "customer left",
                               by=BY, reason=WHY)
    assert events == [
        ev.RunMarkedFailed(error_type="abandoned", message="customer left", by=BY, reason=WHY),
        ev.RunDeadLettered(reason="operator", error_type="abandoned", message="customer left",
                           attempts=4, job_id=JOB)]
    [failed, _] = rules.mark_failed(target(S.QUEUED), None, None, by=BY, reason=WHY)
    assert failed == ev.RunMarkedFailed(error_type="operator_failed", message=WHY, by=BY,
                                        reason=WHY)
    with pytest.raises(InvalidInput) as caught:
        rules.mark_failed(target(S.QUEUED), "x" * 201, None, by=BY, reason=WHY)
    assert caught.value.errors[0]["field"] == "error_type"
    with pytest.raises(InvalidState, match="triage its dead letter"):
        rules.mark_failed(target(S.DEAD_LETTERED), None, None, by=BY, reason=WHY)


def test_succeeding_keeps_the_output_reference() -> None:
    ref = uuid.uuid4()
    assert rules.mark_succeeded(target(S.DEAD_LETTERED), ref, by=BY, reason=WHY) == [
        ev.RunMarkedSucceeded(output_ref=ref, by=BY, reason=WHY)]


def test_the_fold_follows_a_retried_step_and_a_reopened_dead_letter() -> None:
    from ostinato.domain.lifecycle import fold
    from tests.helpers.run_stories import T0, scheduled

    story: list[ev.Event] = [
        scheduled(), ev.RunQueued(pool="default"),
        ev.RunStarted(attempt=1, fencing_token=1, worker_id="w", lease_expires_at=T0),
        ev.StepCompleted(seq=0, name="charge", attempt=1, fencing_token=1),
        ev.StepFailed(seq=1, name="pay", attempt=1, fencing_token=1, error_type="x",
                      message="m"),
        ev.RunFailed(attempt=1, fencing_token=1, error_type="x", message="m", retryable=False),
        ev.RunDeadLettered(reason="permanent", error_type="x", message="m", attempts=1)]
    dead = fold(story)
    assert (dead.state, dead.steps_done, dead.failures) == (S.DEAD_LETTERED, 2, 1)
    events = rules.retry_step(target(S.DEAD_LETTERED, steps_done=2), 1,
                              Record(1, "pay", False), [], by=BY, reason=WHY)
    run = fold([*story, *events])
    assert (run.state, run.steps_done, run.failures, run.version) == (S.SCHEDULED, 1, 0, 9)
    paused = fold([*story[:4], ev.RunPaused(by=BY),
                   ev.RunSuspended(attempt=1, fencing_token=1, seq=1, name="sleep",
                                   reason="timer", wake_at=T0),
                   ev.RunRestarted(from_seq=0, set_aside=1, by=BY, reason=WHY)])
    assert (paused.state, paused.waiting_for, paused.steps_done) == (S.SUSPENDED, "paused", 0)
