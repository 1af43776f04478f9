"""Attempts and executions kept apart (issue 42): a run's `attempt` counts every claim (a
workflow's wake-ups included, the fencing epoch's count), while the retry policy counts only
failures; "attempt k of max_attempts" comes from the failures, and a dead letter's `attempts`
from them too."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from ostinato import outcomes
from ostinato.domain import events as ev
from ostinato.domain.interventions import Target, mark_failed
from ostinato.domain.states import RunState
from ostinato.policy import retry
from ostinato.stores.runs import LockedRun

NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)


def locked(*, attempt: int, failures: int, max_attempts: int = 2) -> LockedRun:
    return LockedRun(
        id=uuid.uuid4(), tenant_id=uuid.uuid4(), job_id=uuid.uuid4(), task="wf", pool="default",
        priority="default", state="running", attempt=attempt, fencing_token=attempt,
        payload_ref=uuid.uuid4(), scheduled_for=NOW, due_at=NOW, traceparent=None, version=30,
        failures=failures, retry_policy={"max_attempts": max_attempts}, cancel_requested=False,
        timeout_seconds=None, queue_wait_seconds=None, on_queue_wait=None, worker_id="w",
        started_at=NOW, last_error=None, steps_done=4, wait_reason=None, wait_seq=None,
        wait_name=None, wait_signal=None, wake_at=None, deadline_at=None, parent_run_id=None,
        wait_child=None, compensable=False, paused=False, paused_at=None, frozen_wake_at=None)


def test_the_policys_attempt_counts_failures_not_wake_ups_throttles_or_releases() -> None:
    # the run: max_attempts 2, four timer wake-ups and one real failure: six
    # executions, on its 2nd attempt of 2 (it then succeeded, on that attempt)
    assert retry.attempt_of(RunState.RUNNING, failures=1) == 2
    assert retry.attempt_of(RunState.SUCCEEDED, failures=1) == 2
    assert retry.attempt_of(RunState.SUSPENDED, failures=0) == 1  # a wake-up uses none
    assert retry.attempt_of(RunState.SCHEDULED, failures=0) == 1
    assert retry.attempt_of(RunState.RETRY_SCHEDULED, failures=1) == 2  # the next one
    assert retry.attempt_of(RunState.FAILED, failures=1) == 2  # not counted yet
    # a dead letter's last failure is counted already
    assert retry.attempt_of(RunState.DEAD_LETTERED, failures=2) == 2
    assert retry.attempt_of(RunState.DEAD_LETTERED, failures=0) == 1  # never ran (queue wait)
    assert retry.max_attempts_of({"max_attempts": 2}) == 2
    assert retry.max_attempts_of(None) == retry.DEFAULT.max_attempts == 3


def test_a_workflows_exhausting_failure_dead_letters_with_the_policys_count() -> None:
    """Six executions (wake-ups), one counted failure before: the second failure exhausts
    max_attempts 2, and the dead letter says 2 attempts (it said 6: `run.attempt`)."""
    run = locked(attempt=6, failures=1)
    failure = ev.RunFailed(attempt=6, fencing_token=6, error_type="boom", message="m",
                           retryable=True)
    events = outcomes.after_failure(run, failure, error_type="boom", message="m",
                                    classification="retryable", now=NOW, by="worker")
    dead = events[-1]
    assert isinstance(dead, ev.RunDeadLettered) and dead.reason == "exhausted"
    assert dead.attempts == 2
    assert retry.attempt_of(RunState.DEAD_LETTERED, max(run.failures, dead.attempts)) == 2
    # a permanent failure on its first counted attempt, after wake-ups: 1 attempt
    permanent = outcomes.after_failure(locked(attempt=5, failures=0), failure,
                                       error_type="boom", message="m",
                                       classification="permanent", now=NOW, by="worker")[-1]
    assert isinstance(permanent, ev.RunDeadLettered) and permanent.attempts == 1


def test_a_retryable_failure_with_attempts_left_counts_one_whatever_the_executions() -> None:
    run = locked(attempt=5, failures=0, max_attempts=2)
    failure = ev.RunFailed(attempt=5, fencing_token=5, error_type="boom", message="m",
                           retryable=True)
    [_, scheduled] = outcomes.after_failure(run, failure, error_type="boom", message="m",
                                            classification="retryable", now=NOW, by="worker")
    assert isinstance(scheduled, ev.RetryScheduled) and scheduled.failures == 1


def test_an_operators_failure_dead_letters_on_the_attempt_it_ends() -> None:
    """A suspended workflow after one counted failure is on attempt 2 however often it woke:
    the operator's failure ends that attempt."""
    target = Target(run_id=uuid.uuid4(), state=RunState.SUSPENDED, steps_done=3,
                    wait_reason="timer", wait_seq=3, wait_name="sleep", failures=1)
    dead = mark_failed(target, None, None, by="tenant:acme", reason="abandoned")[-1]
    assert isinstance(dead, ev.RunDeadLettered) and dead.attempts == 2
    assert retry.attempt_of(RunState.SUSPENDED, 1) == 2 == retry.attempt_of(
        RunState.DEAD_LETTERED, dead.attempts)
