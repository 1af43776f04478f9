"""The pure parts of chunked fan-out (`ostinato.domain.fanout`, `ostinato.runs.fanout`): window
admission, the completion decision and the failure policy, and the events that start a fan-out
and move it on."""

from __future__ import annotations

import random
import uuid
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ostinato.domain import events as ev
from ostinato.domain import fanout as fo
from ostinato.domain.errors import InvalidInput
from ostinato.eventlog.records import StreamHead
from ostinato.runs import fanout
from ostinato.runs.rules import ChildRules
from ostinato.stores.fan_outs import FanOutRow
from ostinato.stores.runs import ChildRun, LockedRun
from tests.helpers.rows import T0, locked_run


def test_ids_derive_from_parent_position_and_index_only() -> None:
    p = uuid.uuid4()
    assert fo.chunk_run_id(p, 2, 7) == fo.chunk_run_id(p, 2, 7)
    ids = {fo.chunk_run_id(p, 2, i) for i in range(100)} | {fo.chunk_run_id(p, 3, 0),
                                                              fo.chunk_run_id(uuid.uuid4(), 2, 0),
                                                              fo.completion_run_id(p, 2)}
    assert len(ids) == 103
    assert fo.chunk_payload_ref(p, 2, 7) != fo.chunk_run_id(p, 2, 7)


def test_the_first_window_admits_up_to_the_cap() -> None:
    assert fo.admit(fo.Window(total=10, max_concurrency=3)) == range(0, 3)
    assert fo.admit(fo.Window(total=2, max_concurrency=50)) == range(0, 2)
    assert fo.admit(fo.Window(10, 3, admitted=3)) == range(3, 3)  # full
    assert fo.admit(fo.Window(10, 3, admitted=3, succeeded=2)) == range(3, 5)
    assert fo.admit(fo.Window(10, 3, admitted=10, succeeded=9)) == range(10, 10)  # all in


def test_an_end_admits_the_next_chunk_in_index_order() -> None:
    step = fo.advance(fo.Window(10, 3, admitted=3), 1, 0, "fail", True)
    assert step.admitted == range(3, 4) and step.outcome is None
    assert step.window == fo.Window(10, 3, admitted=4, succeeded=1)
    assert step.window.running == 3


def test_all_succeeded_starts_the_completion_once() -> None:
    step = fo.advance(fo.Window(3, 3, admitted=3, succeeded=2), 1, 0, "fail", True)
    assert (step.outcome, step.start_completion, step.admitted) == ("succeeded", True,
                                                                    range(3, 3))
    assert fo.advance(fo.Window(3, 3, admitted=3, succeeded=2), 1, 0, "fail",
                      False).start_completion is False  # no on_complete


@pytest.mark.parametrize(("policy", "outcome", "completion"), [
    ("fail", "failed", False), ("complete", "succeeded", True)])
def test_the_failure_policy_decides_a_fan_out_with_failed_chunks(policy: str, outcome: str,
                                                                 completion: bool) -> None:
    step = fo.advance(fo.Window(4, 2, admitted=4, succeeded=2, failed=1), 0, 1, policy, True)
    assert (step.outcome, step.start_completion) == (outcome, completion)
    assert step.window.failed == 2


def test_a_failure_waits_for_the_others_before_deciding() -> None:
    step = fo.advance(fo.Window(4, 2, admitted=2), 0, 1, "fail", True)
    assert step.outcome is None and step.admitted == range(2, 3)


def test_more_ends_than_children_running_is_refused() -> None:
    with pytest.raises(ValueError):
        fo.advance(fo.Window(4, 2, admitted=2), 2, 1, "fail", True)


@pytest.mark.parametrize(("total", "cap", "policy", "fields"), [
    (0, 5, "fail", ["fan_out.chunks"]),
    (fo.MAX_CHUNKS + 1, 5, "fail", ["fan_out.chunks"]),
    (5, 0, "fail", ["fan_out.max_concurrency"]),
    (5, 5, "retry", ["fan_out.on_failure"]),
    (5, 5, "complete", []),
])
def test_problems_name_their_field(total: int, cap: int, policy: str,
                                   fields: list[str]) -> None:
    assert [f for f, _ in fo.problems(total, cap, policy)] == fields


@settings(max_examples=300, deadline=None)
@given(total=st.integers(1, 300), cap=st.integers(1, 60), seed=st.integers(0, 2**32),
       fail_rate=st.sampled_from([0.0, 0.1, 0.5]), policy=st.sampled_from(["fail", "complete"]))
def test_any_order_of_ends_admits_each_chunk_once_under_the_cap_and_decides_once(
        total: int, cap: int, seed: int, fail_rate: float, policy: str) -> None:
    rng = random.Random(seed)
    first = fo.admit(fo.Window(total, cap))
    window = fo.Window(total, cap, admitted=first.stop)
    running = list(first)
    admitted = list(first)
    decisions = []
    while running:
        rng.shuffle(running)  # children end in any order, a batch of them at a time
        k = rng.randint(1, len(running))
        batch, running = running[:k], running[k:]
        failed = sum(rng.random() < fail_rate for _ in batch)
        step = fo.advance(window, len(batch) - failed, failed, policy, True)
        window = step.window
        running += list(step.admitted)
        admitted += list(step.admitted)
        assert window.running == len(running) <= cap
        if step.outcome is not None:
            decisions.append(step)
    assert sorted(admitted) == list(range(total))
    [decision] = decisions
    assert decision.window.succeeded + decision.window.failed == total
    expected = "succeeded" if decision.window.failed == 0 or policy == "complete" else "failed"
    assert decision.outcome == expected
    assert decision.start_completion == (expected == "succeeded")


# -- the events (ostinato.runs.fanout) ---------------------------------------------------------


def parent(**kw: Any) -> LockedRun:
    return locked_run(task="orders", attempt=1, fencing_token=4, version=5, steps_done=2, **kw)


def test_starting_stores_every_payload_admits_the_cap_and_suspends() -> None:
    run = parent()
    moves = fanout.started(run, StreamHead.of(run), 2, "fan_out:chunk",
                           fanout.FanOutRequest(task="chunk", chunks=[{"i": i} for i in range(7)],
                                                max_concurrency=3, on_complete="done"),
                           ChildRules(), T0, "worker:w", 4)
    assert [ref for ref, _, _ in moves.payloads] == [fo.chunk_payload_ref(run.id, 2, i)
                                                     for i in range(7)]
    assert moves.payloads[6][2] == b'{"i":6}'
    kinds = [type(e.event).__name__ for e in moves.events]
    assert kinds == ["FanOutStarted", "RunScheduled", "RunScheduled", "RunScheduled",
                     "RunSuspended"]
    started = moves.events[0].event
    assert isinstance(started, ev.FanOutStarted)
    assert (started.total, started.admitted, started.max_concurrency) == (7, 3, 3)
    chunks = [e for e in moves.events if isinstance(e.event, ev.RunScheduled)]
    assert [c.stream_id for c in chunks] == [fo.chunk_run_id(run.id, 2, i) for i in range(3)]
    e = chunks[1].event
    assert isinstance(e, ev.RunScheduled)
    assert (e.trigger, e.parent_run_id, e.fan_out_index, e.job_id, e.scheduled_for) == (
        "fan_out", run.id, 1, run.job_id, run.scheduled_for)
    suspended = moves.events[-1].event
    assert isinstance(suspended, ev.RunSuspended) and suspended.reason == "fan_out"
    assert [e.version for e in moves.events if e.stream_id == run.id] == [6, 7]


@pytest.mark.parametrize(("request_", "field"), [
    (fanout.FanOutRequest(task="t", chunks=[]), "fan_out.chunks"),
    (fanout.FanOutRequest(task="t", chunks=[1], pool="gpu"), "fan_out.pool"),
    (fanout.FanOutRequest(task="t", chunks=[1], max_concurrency=0), "fan_out.max_concurrency"),
    (fanout.FanOutRequest(task="t", chunks=["x" * 100]), "fan_out.chunks"),
    (fanout.FanOutRequest(task="t", chunks=[1], retry={"max_attempts": 0}), "fan_out.retry"),
])
def test_a_refused_fan_out_names_the_field(request_: fanout.FanOutRequest, field: str) -> None:
    run = parent()
    with pytest.raises(InvalidInput) as refused:
        fanout.started(run, StreamHead.of(run), 2, "f", request_,
                       ChildRules(max_payload_bytes=50), T0, "worker:w", 4)
    assert [e["field"] for e in refused.value.errors] == [field]


def fan_row(run: LockedRun, **kw: Any) -> FanOutRow:
    values: dict[str, Any] = dict(
        parent_run_id=run.id, seq=2, tenant_id=run.tenant_id, name="fan_out:chunk",
        task="chunk", pool="default", priority="normal", total=5, max_concurrency=2,
        on_failure="fail", on_complete="done", retry=None, timeout_seconds=None, admitted=2,
        succeeded=0, failed=0, failures=[], state="running", completion_run_id=None,
        started_at=T0, finished_at=None)
    return FanOutRow(**(values | kw))


def ended(run: LockedRun, index: int, state: str = "succeeded") -> ChildRun:
    error = None if state == "succeeded" else {"type": "boom", "message": "no"}
    return ChildRun(id=fo.chunk_run_id(run.id, 2, index), tenant_id=run.tenant_id,
                    parent_run_id=run.id, task="chunk", state=state, version=5,
                    traceparent=None, output_ref=None, last_error=error,
                    parent_notified=False, trigger="fan_out")


def waiting() -> LockedRun:
    return parent(state="suspended", wait_reason="fan_out", wait_seq=2, wait_name="f")


def progress(run: LockedRun, fan: FanOutRow, children: list[ChildRun],
             now: datetime = T0) -> list[ev.Event]:
    return [e.event for e in fanout.progressed(run, StreamHead.of(run), fan, children, now,
                                               "scheduler").events]


def test_an_end_is_counted_and_admits_the_next_chunk() -> None:
    run = waiting()
    events = progress(run, fan_row(run), [ended(run, 0)])
    assert events[0] == ev.FanOutProgressed(seq=2, succeeded=1, failed=0, admitted=3)
    assert isinstance(events[1], ev.RunScheduled) and events[1].fan_out_index == 2
    assert len(events) == 2


def test_the_last_end_completes_starts_the_completion_and_wakes_the_parent() -> None:
    run = waiting()
    fan = fan_row(run, admitted=5, succeeded=3)
    events = progress(run, fan, [ended(run, 3), ended(run, 4)])
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["FanOutProgressed", "RunScheduled", "FanOutCompleted", "RunWoken"]
    completion = events[1]
    assert isinstance(completion, ev.RunScheduled)
    assert completion.trigger == "fan_out_complete" and completion.task == "done"
    done = events[2]
    assert isinstance(done, ev.FanOutCompleted)
    assert (done.outcome, done.succeeded, done.failed, done.completion_run_id) == (
        "succeeded", 5, 0, fo.completion_run_id(run.id, 2))


def test_failed_chunks_are_listed_with_their_index_and_fail_the_step_by_policy() -> None:
    run = waiting()
    fan = fan_row(run, admitted=5, succeeded=3)
    events = progress(run, fan, [ended(run, 4, "dead_lettered"), ended(run, 3)])
    progressed, done, woken = events
    assert isinstance(progressed, ev.FanOutProgressed)
    assert progressed.failures == [{"index": 4, "run_id": str(fo.chunk_run_id(run.id, 2, 4)),
                                    "state": "dead_lettered", "error_type": "boom",
                                    "message": "no"}]
    assert isinstance(done, ev.FanOutCompleted)
    assert (done.outcome, done.error_type, done.completion_run_id) == (
        "failed", "fan_out_failed", None)
    assert isinstance(woken, ev.RunWoken)
    complete = progress(run, fan_row(run, admitted=5, succeeded=3, on_failure="complete"),
                        [ended(run, 4, "cancelled"), ended(run, 3)])
    assert [type(e).__name__ for e in complete] == ["FanOutProgressed", "RunScheduled",
                                                    "FanOutCompleted", "RunWoken"]


def test_a_final_parent_admits_nothing_and_a_paused_one_is_not_woken() -> None:
    cancelled = parent(state="cancelled")
    assert progress(cancelled, fan_row(cancelled), [ended(cancelled, 0)]) == []
    paused = parent(state="suspended", wait_reason="fan_out", wait_seq=2, paused=True)
    events = progress(paused, fan_row(paused, admitted=5, succeeded=4), [ended(paused, 4)])
    assert not any(isinstance(e, ev.RunWoken) for e in events)
    assert any(isinstance(e, ev.FanOutCompleted) for e in events)


def test_a_chunk_told_twice_counts_once() -> None:
    run = waiting()
    fan = fan_row(run, admitted=5, succeeded=4)  # one running
    events = progress(run, fan, [ended(run, 4), ended(run, 0)])
    assert events[0] == ev.FanOutProgressed(seq=2, succeeded=1, failed=0, admitted=5)


def test_a_fan_out_over_is_recorded_again_as_it_ended() -> None:
    run = parent()
    fan = fan_row(run, admitted=5, succeeded=4, failed=1, state="failed",
                  failures=[{"index": 3}])
    again = fanout.recorded_again(run, StreamHead.of(run), fan, "worker:w", 4).event
    assert again == ev.FanOutCompleted(seq=2, name="fan_out:chunk", outcome="failed", total=5,
                                       succeeded=4, failed=1, failures=[{"index": 3}],
                                       error_type="fan_out_failed",
                                       message="1 of 5 chunks failed")
    ok = ev.FanOutCompleted(seq=2, name="f", outcome="succeeded", total=1, succeeded=1,
                            failed=0, completion_run_id=fo.completion_run_id(run.id, 2))
    assert fo.summary(ok) == {"total": 1, "succeeded": 1, "failed": 0, "failures": [],
                              "completion_run_id": str(fo.completion_run_id(run.id, 2))}
