"""The pure parts of child runs (`ostinato.runs.children`): the events that start a child, the
fields a child may not have, and a final child's outcome as its parent's step record."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidInput
from ostinato.domain.workflow import INLINE_OUTPUT_BYTES
from ostinato.eventlog.records import StreamHead
from ostinato.runs.children import ChildRequest, ChildRules, child_run_id, child_started, finished
from ostinato.stores.runs import ChildRun, LockedRun
from tests.helpers.rows import T0, locked_run


def parent() -> LockedRun:
    return locked_run(task="orders", attempt=2, fencing_token=7, version=5, steps_done=3)


def start(request: ChildRequest, rules: ChildRules | None = None) -> Any:
    run = parent()
    return run, child_started(run, StreamHead.of(run), 3, "child:mail", request,
                              rules or ChildRules(), T0, "worker:w", 7)


def test_a_child_is_a_run_of_its_parents_job_and_occurrence_with_a_derived_id() -> None:
    run, started = start(ChildRequest(task="mail", payload={"to": 1}))
    assert started.child_id == child_run_id(run.id, 3) == child_run_id(run.id, 3)
    assert child_run_id(run.id, 4) != started.child_id
    scheduled, marker = started.events
    assert scheduled.stream_id == started.child_id and scheduled.version == 1
    e = scheduled.event
    assert isinstance(e, ev.RunScheduled)
    assert (e.job_id, e.scheduled_for, e.parent_run_id, e.trigger, e.task, e.pool) == (
        run.job_id, run.scheduled_for, run.id, "child", "mail", "default")
    assert e.retry is not None and e.retry["max_attempts"] == 3  # the default policy
    assert marker.stream_id == run.id and marker.version == run.version + 1
    assert marker.event == ev.ChildStarted(seq=3, name="child:mail",
                                           child_run_id=started.child_id, task="mail",
                                           awaited=True, attempt=2)
    [(ref, tenant, body)] = started.payloads
    assert ref == e.payload_ref and tenant == run.tenant_id and body == b'{"to":1}'


@pytest.mark.parametrize(("request_", "field"), [
    (ChildRequest(task="t", pool="gpu"), "child.pool"),
    (ChildRequest(task="t", priority="vip"), "child.priority"),
    (ChildRequest(task="t", timeout_seconds=0), "child.timeout_seconds"),
    (ChildRequest(task="t", retry={"max_attempts": 0}), "child.retry"),
    (ChildRequest(task="t", retry={"nonsense": 1}), "child.retry"),
    (ChildRequest(task="t", payload="x" * 100), "child.payload"),
])
def test_a_child_with_a_field_it_may_not_have_is_refused_naming_it(request_: ChildRequest,
                                                                   field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        start(request_, ChildRules(max_payload_bytes=50))
    assert [e["field"] for e in refused.value.errors] == [field]


def test_a_configured_pool_and_class_are_allowed() -> None:
    _, started = start(ChildRequest(task="t", pool="long", priority="bulk"),
                       ChildRules(pools=frozenset({"default", "long"}),
                                  classes=frozenset({"default", "bulk"})))
    e = started.events[0].event
    assert (e.pool, e.priority) == ("long", "bulk")


def child(state: str, last_error: Any = None) -> ChildRun:
    return ChildRun(id=uuid.uuid4(), tenant_id=uuid.uuid4(), parent_run_id=uuid.uuid4(),
                    task="t", state=state, version=6, traceparent=None, output_ref=None,
                    last_error=last_error, parent_notified=False)


def test_a_final_childs_outcome_becomes_the_step_record() -> None:
    blobs: list[tuple[uuid.UUID, uuid.UUID, bytes]] = []
    ok = finished(child("succeeded"), 3, "child:t", {"n": 1}, blobs)
    assert (ok.state, ok.output, ok.output_ref, ok.error_type) == ("succeeded", {"n": 1}, None,
                                                                   None)
    big = finished(child("succeeded"), 3, "child:t", "x" * INLINE_OUTPUT_BYTES, blobs)
    assert big.output is None and big.output_ref == blobs[0][0]  # copied into a step blob
    dead = finished(child("dead_lettered", {"type": "declined", "message": "no"}), 3, "c",
                    None, blobs)
    assert (dead.error_type, dead.message) == ("declined", "no")
    bare = finished(child("dead_lettered"), 3, "c", None, blobs)
    assert bare.error_type == "child_failed" and "dead-lettered" in (bare.message or "")
    gone = finished(child("cancelled"), 3, "c", None, blobs)
    assert gone.error_type == "child_cancelled" and len(blobs) == 1
