"""The step model's published state and update answers (issue 40 item 3): their kinds, names,
caps and where an update stands, as pure decisions; and which appends wake the api's waiters."""

from __future__ import annotations

import uuid

from ostinato.domain import events as ev
from ostinato.domain import workflow as wf
from ostinato.eventlog import ended
from ostinato.eventlog.records import NewEvent


def test_a_set_and_an_answer_are_kinds_of_their_own_recorded_as_steps() -> None:
    assert wf.kind_of(name=wf.state_step("progress")) is wf.StepKind.STATE
    assert wf.kind_of(name=wf.reply_step("0b1c")) is wf.StepKind.REPLY
    assert wf.kind_of(name="progress") is wf.StepKind.STEP
    for kind in (wf.StepKind.STATE, wf.StepKind.REPLY):
        rule = wf.KINDS[kind]
        assert rule.records == ("StepCompleted",) and rule.suspends is None
        assert not rule.starts_runs and wf.paused_records_first(kind)


def test_names_and_sizes_are_capped() -> None:
    assert wf.bad_state_name("progress") is None
    assert wf.bad_state_name("") and wf.bad_state_name("x" * (wf.MAX_STATE_NAME_CHARS + 1))
    assert wf.too_large(wf.MAX_STATE_BYTES, "v") is None
    assert "limit" in (wf.too_large(wf.MAX_STATE_BYTES + 1, "v") or "")


def test_where_an_update_stands() -> None:
    assert wf.update_state(None, run_final=False) is wf.UpdateState.PENDING
    assert wf.update_state(None, run_final=True) is wf.UpdateState.ABANDONED
    assert wf.update_state({"ok": True, "output": 1}, run_final=True) is wf.UpdateState.COMPLETED
    assert wf.update_state({"ok": False, "error": {}}, run_final=False) is \
        wf.UpdateState.REJECTED


def _step(name: str, stream: uuid.UUID) -> NewEvent:
    return NewEvent(stream_id=stream, version=3, tenant_id=uuid.uuid4(), actor="test",
                    event_id=uuid.uuid4(), event=ev.StepCompleted(
                        seq=0, name=name, attempt=1, fencing_token=1, output=1, output_ref=None,
                        tries=1, duration_ms=0.0))


def test_a_published_value_or_an_answer_wakes_the_runs_waiters_and_a_plain_step_does_not(
        ) -> None:
    run = uuid.uuid4()
    assert ended.notices([_step(wf.state_step("progress"), run)]) == [str(run)]
    assert ended.notices([_step(wf.reply_step(uuid.uuid4()), run)]) == [str(run)]
    assert ended.notices([_step("charge", run), _step("patch:fee-v2", run)]) == []
