"""The run lifecycle as events: the event table agrees with the state table, `fold` follows
it, and `StreamHead.next` (the one way to make an event to append) refuses what it forbids."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings

from ostinato.domain import events as ev
from ostinato.domain.lifecycle import (
    RUN_EVENTS,
    Run,
    UnexpectedRunEvent,
    advance,
    fold,
    moves_agree_with_transitions,
    step,
)
from ostinato.domain.states import BY_OPERATOR, FINAL, TRANSITIONS, RunState
from ostinato.eventlog.records import StreamHead
from tests.helpers.run_stories import T0, run_stories, scheduled

ROOT = Path(__file__).resolve().parents[2]
S = RunState


def _run_event_types() -> set[type[ev.Event]]:
    found, todo = set(), [ev.Event]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if getattr(sub, "stream_type", None) == "run":
                found.add(sub)
    return found


def test_every_run_event_has_a_place_in_the_lifecycle() -> None:
    assert _run_event_types() == set(RUN_EVENTS)


def test_every_state_change_an_event_makes_is_an_allowed_transition() -> None:
    assert moves_agree_with_transitions() == []


def test_every_transition_is_made_by_some_event() -> None:
    made = {(before, move.to) for move in RUN_EVENTS.values() if move.to is not None
            for before in move.after if before is not None}
    allowed = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert made == allowed


def test_a_final_run_takes_only_bookkeeping_events_and_an_operators() -> None:
    for kind, move in RUN_EVENTS.items():
        if FINAL & move.after and move.to is not None:  # leaves a final state
            assert {(s, move.to) for s in FINAL & move.after} <= BY_OPERATOR, kind


def test_one_success_story() -> None:
    started = ev.RunStarted(attempt=1, fencing_token=1, worker_id="w", lease_expires_at=T0)
    out = uuid.uuid4()
    run = fold([scheduled(pool="p"), ev.RunQueued(pool="p"), started,
                ev.RunSucceeded(attempt=1, fencing_token=1, output_ref=out)])
    assert run == Run(state=S.SUCCEEDED, version=4, attempt=1, fencing_token=1, worker_id="w",
                      pool="p", output_ref=out)


def test_an_expired_lease_revokes_the_token_and_the_retry_waits() -> None:
    run = fold([scheduled(), ev.RunQueued(pool="default"),
                ev.RunStarted(attempt=1, fencing_token=1, worker_id="w", lease_expires_at=T0),
                ev.LeaseExpired(attempt=1, fencing_token=1, worker_id="w", expired_at=T0),
                ev.RetryScheduled(retry_at=T0, reason="lease_expired", counts=True, failures=1)])
    assert (run.state, run.fencing_token, run.failures, run.retry_pending,
            run.last_error_type) == (S.RETRY_SCHEDULED, 2, 1, True, "lease_expired")
    assert step(run, ev.RetryDue(pool="default")).retry_pending is False


@pytest.mark.parametrize(("before", "event"), [
    (None, ev.RunQueued(pool="default")),
    (S.SCHEDULED, ev.RunStarted(attempt=1, fencing_token=1, worker_id="w", lease_expires_at=T0)),
    (S.SUCCEEDED, ev.RunCancelled(by="op", reason="requested")),
    (S.QUEUED, scheduled()),
    (S.RUNNING, ev.RetryScheduled(retry_at=T0, reason="x", counts=True, failures=1)),
    (S.DEAD_LETTERED, ev.CancelRequested(by="op")),
])
def test_forbidden_moves_are_refused(before: RunState | None, event: ev.Event) -> None:
    with pytest.raises(UnexpectedRunEvent, match=type(event).__name__):
        advance(before, event)


def test_the_head_numbers_versions_and_refuses_a_forbidden_run_event() -> None:
    head = StreamHead(uuid.uuid4(), uuid.uuid4())
    first = head.next(scheduled(), "test")
    second = head.next(ev.CancelRequested(by="op"), "test")
    assert (first.version, second.version, head.state) == (1, 2, S.SCHEDULED)
    head.next(ev.RunCancelled(by="op", reason="requested"), "test")
    with pytest.raises(UnexpectedRunEvent):
        head.next(ev.RunQueued(pool="default"), "test")
    assert head.version == 3, "a refused event takes no version"


def test_other_streams_are_numbered_without_a_state() -> None:
    head = StreamHead(uuid.uuid4(), uuid.uuid4(), version=7)
    e = head.next(ev.JobPaused(reason="r"), "test")
    assert (e.version, head.version, head.state) == (8, 8, None)


@settings(max_examples=300)
@given(run_stories())
def test_every_story_folds_into_a_state_the_table_reaches(events: list[ev.Event]) -> None:
    head = StreamHead(uuid.uuid4(), uuid.uuid4())
    versions = [head.next(e, "test").version for e in events]
    run = fold(events)
    assert versions == list(range(1, len(events) + 1)) and run.version == len(events)
    assert run.state is head.state


def test_only_the_event_log_makes_events_to_append() -> None:
    """`NewEvent` is made by `StreamHead.next` alone (tests aside): no writer numbers versions
    or skips the lifecycle check by hand."""
    makers = []
    for path in [*(ROOT / "libs").rglob("*.py"), *(ROOT / "services").rglob("*.py")]:
        if "eventlog" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "NewEvent":
                makers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert makers == []
