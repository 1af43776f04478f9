"""The step model's published state and update answers (issue 40 item 3): their kinds, names,
caps and where an update stands, as pure decisions."""

from __future__ import annotations

from ostinato.domain import workflow as wf


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
