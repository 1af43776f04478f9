"""The run state machine: every pair of states, accepted exactly when the table allows it."""

import itertools

import pytest

from ostinato.domain.states import (
    BY_OPERATOR,
    FINAL,
    TRANSITIONS,
    InvalidTransition,
    RunState,
    allowed_from,
    can_transition,
    transition,
)

ALLOWED = {
    ("scheduled", "queued"), ("scheduled", "cancelled"), ("scheduled", "dead_lettered"),
    ("queued", "running"), ("queued", "cancelled"), ("queued", "dead_lettered"),
    ("running", "succeeded"), ("running", "failed"), ("running", "cancelled"),
    ("running", "retry_scheduled"),  # a released lease
    ("failed", "retry_scheduled"), ("failed", "dead_lettered"), ("failed", "cancelled"),
    ("retry_scheduled", "queued"), ("retry_scheduled", "cancelled"),
    ("retry_scheduled", "dead_lettered"),  # queue-wait deadline
    ("running", "suspended"),  # a workflow waits for a timer or a signal
    ("suspended", "scheduled"), ("suspended", "cancelled"),
    # operator interventions: a dead letter reopened, a run that is not running marked done
    ("dead_lettered", "scheduled"), ("dead_lettered", "succeeded"), ("suspended", "succeeded"),
    ("scheduled", "succeeded"), ("queued", "succeeded"), ("retry_scheduled", "succeeded"),
}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(RunState, RunState)))
def test_every_pair(current: RunState, target: RunState) -> None:
    if (current.value, target.value) in ALLOWED:
        assert can_transition(current, target)
        assert transition(current, target) is target
    else:
        assert not can_transition(current, target)
        with pytest.raises(InvalidTransition):
            transition(current, target)


def test_final_states_have_no_exit_but_an_operators_and_every_other_can_be_cancelled() -> None:
    for state in RunState:
        if state in FINAL:
            assert {(state, t) for t in TRANSITIONS[state]} <= BY_OPERATOR
        else:
            assert RunState.CANCELLED in TRANSITIONS[state]


def test_allowed_from_inverts_the_table() -> None:
    for target in RunState:
        expected = {RunState(c) for c, t in ALLOWED if t == target.value}
        assert allowed_from(target) == expected
