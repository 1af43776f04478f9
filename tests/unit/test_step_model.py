"""The step model's server-side decisions (`ostinato.domain.workflow`), exhaustively and without
servers: the table of step kinds, what a step report means in every run state (`judge`), what a
timer, a signal wait, a child and a fan-out do at their position, and what the wake-ups append.
The gateway, the scheduler and the harness's journal call these; their own tests show the
events, these show the rules."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from ostinato.domain import workflow as wf
from ostinato.domain.workflow import (
    KINDS,
    Ends,
    Report,
    RunAt,
    StepKind,
    Suspends,
    Verdict,
    judge,
)

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SOON = NOW + timedelta(seconds=30)


# -- the table -----------------------------------------------------------------------------------

def test_every_kind_has_one_row_and_the_rows_agree_with_what_they_name() -> None:
    assert set(KINDS) == set(StepKind)
    assert wf.WAIT_REASONS == {"timer", "signal", "child", "fan_out"}
    assert wf.PAUSED not in wf.WAIT_REASONS  # a paused run waits on nothing of its own
    for kind, rule in KINDS.items():
        assert rule.records, kind  # every position is recorded by some event
        # a kind that waits is woken by something; one that never waits by nothing
        assert bool(rule.woken_by) == (rule.suspends is not None), kind
    assert {k for k, r in KINDS.items() if r.starts_runs} == {
        StepKind.CHILD, StepKind.START_CHILD, StepKind.FAN_OUT}


@pytest.mark.parametrize(("fields", "kind"), [
    ({}, StepKind.STEP),
    ({"name": "patch:fee-v2"}, StepKind.PATCH),
    ({"name": "set:progress"}, StepKind.STATE),
    ({"name": "reply:0b1c"}, StepKind.REPLY),
    ({"wait": "timer"}, StepKind.TIMER),
    ({"wait": "signal"}, StepKind.SIGNAL),
    ({"child_awaited": True}, StepKind.CHILD),
    ({"child_awaited": False}, StepKind.START_CHILD),
    ({"fan_out": True}, StepKind.FAN_OUT),
    ({"fan_out": True, "child_awaited": True, "wait": "timer"}, StepKind.FAN_OUT),
    ({"child_awaited": True, "wait": "timer"}, StepKind.CHILD),
])
def test_a_reported_step_has_the_kind_of_the_part_it_carries(fields: dict[str, object],
                                                              kind: StepKind) -> None:
    assert wf.kind_of(**fields) is kind  # type: ignore[arg-type]


# -- judge: every run state × every report ---------------------------------------------------------

def expected(*, token_ok: bool, running: bool, offset: int, deadline_passed: bool, paused: bool,
             cancel: bool, kind: StepKind) -> Verdict:
    """The documented precedence, written out as a table walk (not by calling `judge`)."""
    if not token_ok or not running:
        return Verdict.STALE
    if offset < 0:
        return Verdict.REPEAT
    if deadline_passed:
        return Verdict.DEADLINE_PASSED
    if offset > 0:
        return Verdict.GAP
    if paused:
        return Verdict.PAUSE
    if cancel and kind in (StepKind.CHILD, StepKind.START_CHILD, StepKind.FAN_OUT):
        return Verdict.NOT_STARTED
    return Verdict.RECORD


CASES = list(itertools.product([True, False], [True, False], [-1, 0, 1], [None, True, False],
                               [True, False], [True, False], list(StepKind)))


@pytest.mark.parametrize(("token_ok", "running", "offset", "deadline", "paused", "cancel",
                          "kind"), CASES)
def test_judge_answers_every_combination_of_run_state_and_report(
        token_ok: bool, running: bool, offset: int, deadline: bool | None, paused: bool,
        cancel: bool, kind: StepKind) -> None:
    run = RunAt(fencing_token=7, running=running, next_seq=3, paused=paused,
                cancel_requested=cancel)
    due = None if deadline is None else (NOW - timedelta(seconds=1) if deadline else SOON)
    report = Report(seq=3 + offset, fencing_token=7 if token_ok else 6, kind=kind, deadline=due)
    assert judge(run, report, NOW) is expected(
        token_ok=token_ok, running=running, offset=offset, deadline_passed=bool(deadline),
        paused=paused, cancel=cancel, kind=kind)


def test_a_newer_token_is_as_stale_as_an_older_one_and_the_deadline_is_inclusive() -> None:
    run = RunAt(fencing_token=7, running=True, next_seq=0)
    assert judge(run, Report(0, 8), NOW) is Verdict.STALE
    assert judge(run, Report(0, 7, deadline=NOW), NOW) is Verdict.DEADLINE_PASSED
    assert judge(run, Report(0, 7, deadline=NOW), None) is Verdict.RECORD  # no clock, no check


def test_the_statuses_are_409_for_stale_422_for_a_gap_and_200_otherwise() -> None:
    assert {v: wf.STATUS.get(v, 200) for v in Verdict} == {
        Verdict.STALE: 409, Verdict.GAP: 422, Verdict.REPEAT: 200,
        Verdict.DEADLINE_PASSED: 200, Verdict.PAUSE: 200, Verdict.NOT_STARTED: 200,
        Verdict.RECORD: 200}


def test_a_paused_run_records_only_a_finished_step_before_it_is_suspended() -> None:
    # a published value and an update's answer are finished records too (issue 40 item 3)
    records_first = {StepKind.STEP, StepKind.PATCH, StepKind.STATE, StepKind.REPLY}
    if hasattr(StepKind, "ATTRIBUTES"):  # ctx.upsert_attributes (issue 40 item 4)
        records_first.add(StepKind.ATTRIBUTES)
    assert {k for k in StepKind if wf.paused_records_first(k)} == records_first


# -- the kinds at their position -----------------------------------------------------------------

def test_a_timer_due_by_the_database_clock_fires_else_the_run_sleeps_until_it() -> None:
    assert wf.timer_wait(NOW, None, NOW) == Ends("TimerFired", NOW)
    assert wf.timer_wait(None, 0, NOW) == Ends("TimerFired", NOW)
    assert wf.timer_wait(NOW - timedelta(hours=1), None, NOW) == Ends(
        "TimerFired", NOW - timedelta(hours=1))
    assert wf.timer_wait(None, 30, NOW) == Suspends("timer", SOON)
    assert wf.timer_wait(SOON, None, NOW) == Suspends("timer", SOON)


def test_a_signal_wait_takes_a_sent_signal_times_out_at_zero_or_waits_until_its_timeout() -> None:
    assert wf.signal_wait(True, 0, NOW) == Ends("SignalDelivered")
    assert wf.signal_wait(True, None, NOW) == Ends("SignalDelivered")
    assert wf.signal_wait(False, 0, NOW) == Ends("SignalTimedOut", NOW)
    assert wf.signal_wait(False, 30, NOW) == Suspends("signal", SOON)
    assert wf.signal_wait(False, None, NOW) == Suspends("signal", None)  # waits for ever


@pytest.mark.parametrize(("kind", "until", "seconds", "signal", "problem"), [
    ("timer", None, None, None, "exactly one of until and seconds"),
    ("timer", NOW, 5.0, None, "exactly one of until and seconds"),
    ("timer", NOW, None, None, None),
    ("timer", None, 5.0, None, None),
    ("signal", None, None, None, "the signal's name"),
    ("signal", None, None, "", "the signal's name"),
    ("signal", None, None, "approve", None),
])
def test_a_malformed_wait_is_refused_naming_what_it_lacks(
        kind: str, until: datetime | None, seconds: float | None, signal: str | None,
        problem: str | None) -> None:
    said = wf.bad_wait(kind, until=until, seconds=seconds, signal=signal)
    assert (said is None) if problem is None else (said is not None and problem in said)


@pytest.mark.parametrize(("awaited", "exists", "final", "plan"), [
    (True, False, False, wf.ChildPlan(True, False, "suspend")),
    (True, False, True, wf.ChildPlan(True, False, "suspend")),  # final without existing: moot
    (True, True, False, wf.ChildPlan(False, False, "suspend")),
    (True, True, True, wf.ChildPlan(False, False, "finished")),
    (False, False, False, wf.ChildPlan(True, False, "started")),
    (False, True, False, wf.ChildPlan(False, True, "started")),
    (False, True, True, wf.ChildPlan(False, True, "started")),
])
def test_a_child_is_created_once_and_waited_for_only_when_awaited(
        awaited: bool, exists: bool, final: bool, plan: wf.ChildPlan) -> None:
    assert wf.child_plan(awaited=awaited, exists=exists, final=final) == plan


def test_a_fan_out_starts_once_suspends_while_running_and_is_recorded_again_when_over() -> None:
    assert wf.fan_out_plan(None) == "start"
    assert wf.fan_out_plan("running") == "suspend"
    assert wf.fan_out_plan("succeeded") == "record_again"
    assert wf.fan_out_plan("failed") == "record_again"


# -- the wake-ups --------------------------------------------------------------------------------

def test_the_wake_poll_fires_a_timer_times_out_a_signal_or_wakes_for_the_deadline() -> None:
    assert wf.wake("timer", True) == ("TimerFired", "timer")
    assert wf.wake("signal", True) == ("SignalTimedOut", "signal_timeout")
    for reason in ("timer", "signal", "child", "fan_out"):
        assert wf.wake(reason, False) == (None, "deadline")


def test_a_run_waits_on_exactly_what_it_was_suspended_for() -> None:
    def waits(**kw: object) -> bool:
        args: dict[str, object] = {"state": "suspended", "wait_reason": "signal",
                                   "waited": "approve", "reason": "signal",
                                   "what": "approve"} | kw
        return wf.waits_on(**args)  # type: ignore[arg-type]

    assert waits()
    assert not waits(state="running") and not waits(state="queued")
    assert not waits(wait_reason="timer") and not waits(wait_reason=None)
    assert not waits(what="reject") and not waits(reason="child")


def test_a_waited_end_records_and_wakes_a_paused_run_is_only_recorded() -> None:
    assert wf.ended_wait(True, False) == (True, True)
    assert wf.ended_wait(True, True) == (True, False)
    assert wf.ended_wait(False, False) == (False, False)
    assert wf.ended_wait(False, True) == (False, False)


def test_a_fan_outs_end_wakes_only_its_unpaused_parent_waiting_at_that_position() -> None:
    base = {"state": "suspended", "wait_reason": "fan_out", "wait_seq": 4, "seq": 4,
            "paused": False}
    assert wf.fan_out_wakes(**base)  # type: ignore[arg-type]
    for change in ({"paused": True}, {"wait_seq": 3}, {"wait_reason": "child"},
                   {"state": "cancelled"}):
        assert not wf.fan_out_wakes(**(base | change))  # type: ignore[arg-type]


@pytest.mark.parametrize(("state", "error", "kind", "message"), [
    ("cancelled", {"type": "x", "message": "y"}, "child_cancelled", "child run C was cancelled"),
    ("dead_lettered", {"type": "declined", "message": "no"}, "declined", "no"),
    ("dead_lettered", None, "child_failed", "child run C was dead-lettered"),
    ("dead_lettered", "not a document", "child_failed", "child run C was dead-lettered"),
])
def test_a_child_that_did_not_succeed_is_its_parents_failed_step(
        state: str, error: object, kind: str, message: str) -> None:
    assert wf.child_error(state, error, "C") == (kind, message)


def test_the_counter_names_the_latest_step_of_a_name() -> None:
    counter = wf.StepCounter()
    for name in ("a", "b", "a"):
        counter.next(name)
    assert str(counter.last("a")) == "a#2" and str(counter.would_be("a")) == "a#3"
    assert str(counter.last("c")) == "c#0"
