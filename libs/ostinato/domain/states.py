"""The run state machine: the one table of allowed transitions, used by every service.

    scheduled ──> queued ──> running ──> succeeded
        │            │          │
        │            │          └──> failed ──> retry_scheduled ──> queued
        │            │                  └─────> dead_lettered
        └────────────┴──────────┴──> cancelled          (from any non-final state)

A workflow run (`ostinato.domain.workflow`) waiting for a timer, a signal or a child leaves its
worker: `running` → `suspended` (no lease, no slot); woken, it is `scheduled` again and goes
through dispatch like any other run.

`failed` is not final: the retry policy follows it with `retry_scheduled` or `dead_lettered`.
A run that waited past its queue-wait deadline (never started) may also go straight from
`scheduled`, `queued` or `retry_scheduled` to `dead_lettered`. A worker releasing its lease
(graceful shutdown) takes `running` to `retry_scheduled` (due at once, no attempt used).

Operator interventions (`ostinato.domain.interventions`) add the moves in `BY_OPERATOR`: a
dead-lettered run reopened (`scheduled` again), and a run that is not running marked
`succeeded`; they are the only exits from a final state.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class RunState(StrEnum):
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRY_SCHEDULED = "retry_scheduled"
    DEAD_LETTERED = "dead_lettered"
    CANCELLED = "cancelled"
    SUSPENDED = "suspended"


S = RunState

FINAL: frozenset[RunState] = frozenset({S.SUCCEEDED, S.DEAD_LETTERED, S.CANCELLED})

# The moves only an operator's intervention makes (RunReopened, RunMarkedSucceeded).
BY_OPERATOR: frozenset[tuple[RunState, RunState]] = frozenset({
    (S.DEAD_LETTERED, S.SCHEDULED), (S.DEAD_LETTERED, S.SUCCEEDED), (S.SUSPENDED, S.SUCCEEDED),
    (S.SCHEDULED, S.SUCCEEDED), (S.QUEUED, S.SUCCEEDED), (S.RETRY_SCHEDULED, S.SUCCEEDED),
})

TRANSITIONS: Mapping[RunState, frozenset[RunState]] = {
    S.SCHEDULED: frozenset({S.QUEUED, S.CANCELLED, S.DEAD_LETTERED, S.SUCCEEDED}),
    S.QUEUED: frozenset({S.RUNNING, S.CANCELLED, S.DEAD_LETTERED, S.SUCCEEDED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.CANCELLED, S.RETRY_SCHEDULED, S.SUSPENDED}),
    S.SUSPENDED: frozenset({S.SCHEDULED, S.CANCELLED, S.SUCCEEDED}),
    S.FAILED: frozenset({S.RETRY_SCHEDULED, S.DEAD_LETTERED, S.CANCELLED}),
    S.RETRY_SCHEDULED: frozenset({S.QUEUED, S.CANCELLED, S.DEAD_LETTERED, S.SUCCEEDED}),
    S.SUCCEEDED: frozenset(),
    S.DEAD_LETTERED: frozenset({S.SCHEDULED, S.SUCCEEDED}),
    S.CANCELLED: frozenset(),
}


class InvalidTransition(Exception):
    def __init__(self, current: RunState, target: RunState) -> None:
        super().__init__(f"a run cannot go from {current} to {target}")
        self.current = current
        self.target = target


def can_transition(current: RunState, target: RunState) -> bool:
    return target in TRANSITIONS[current]


def transition(current: RunState, target: RunState) -> RunState:
    """Return `target` if the move is allowed, else raise InvalidTransition."""
    if not can_transition(current, target):
        raise InvalidTransition(current, target)
    return target


def allowed_from(target: RunState) -> frozenset[RunState]:
    """The states from which `target` may be reached: the guard set for SQL `state = ANY(...)`."""
    return frozenset(s for s, targets in TRANSITIONS.items() if target in targets)
