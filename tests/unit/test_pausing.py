"""The pure decisions of pausing and resuming a workflow run (`ostinato.runs.pausing`): what
each appends for each state, with no servers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidState
from ostinato.runs.pausing import pause_events, resume_events
from tests.helpers.rows import T0, locked_run


def test_a_running_run_is_paused_with_nothing_frozen() -> None:
    [paused] = pause_events(locked_run(), T0, "user:ops", "incident")
    assert paused == ev.RunPaused(by="user:ops", reason="incident", frozen_wake_in=None)


def test_a_sleeping_run_is_paused_with_the_time_its_timer_has_left() -> None:
    run = locked_run(state="suspended", wait_reason="timer", wait_seq=2,
                 wake_at=T0 + timedelta(minutes=5))
    [paused] = pause_events(run, T0, "user:ops", None)
    assert isinstance(paused, ev.RunPaused) and paused.frozen_wake_in == 300.0
    overdue = locked_run(state="suspended", wait_reason="timer", wake_at=T0 - timedelta(seconds=1))
    assert pause_events(overdue, T0, "u", None)[0].frozen_wake_in == 0.0  # type: ignore[attr-defined]


@pytest.mark.parametrize("state", ["scheduled", "queued", "retry_scheduled", "failed",
                                   "succeeded", "dead_lettered", "cancelled"])
def test_only_running_and_suspended_runs_can_be_paused(state: str) -> None:
    with pytest.raises(InvalidState, match="running or suspended"):
        pause_events(locked_run(state=state), T0, "u", None)


def test_pausing_a_paused_run_and_resuming_a_running_one_append_nothing() -> None:
    assert pause_events(locked_run(paused=True), T0, "u", None) == []
    assert resume_events(locked_run(paused=False), T0, "u", None) == []


def test_resume_restores_the_time_left_and_wakes_only_a_run_with_nothing_to_wait_for() -> None:
    frozen = locked_run(state="suspended", paused=True, wait_reason="timer", wait_seq=2,
                    steps_done=2, paused_at=T0, frozen_wake_at=T0 + timedelta(minutes=5))
    later = T0 + timedelta(days=1)
    assert resume_events(frozen, later, "u", "ok") == [
        ev.RunResumed(by="u", reason="ok", wake_at=later + timedelta(minutes=5))]
    signalled = locked_run(state="suspended", paused=True, wait_reason="signal", wait_seq=2,
                       steps_done=3, paused_at=T0)  # its signal was delivered while paused
    assert resume_events(signalled, later, "u", None)[1:] == [ev.RunWoken(cause="resumed")]
    by_pause = locked_run(state="suspended", paused=True, wait_reason="paused", wait_seq=2,
                      steps_done=2, paused_at=T0)
    assert resume_events(by_pause, later, "u", None)[1:] == [ev.RunWoken(cause="resumed")]
    still_running = locked_run(state="running", paused=True, paused_at=T0)
    assert resume_events(still_running, later, "u", None) == [
        ev.RunResumed(by="u", reason=None, wake_at=None)]
