"""The web UI's action pattern (issue 41 item 3), pure: the posted reason as the API takes it,
the `action_form` and `flash` macros, and which actions a run's page offers in each state
(`services/api/ui/run_offers.py`): what the API would take now, for an operator only. The
browser tests (tests/e2e/test_ui_run_actions.py) drive each one."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput
from ostinato.stores.runs import RunRow
from ostinato.stores.steps import StepRow
from services.api.ui import actions, render, run_offers

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
XSS = "<script>alert(1)</script>"


def test_a_reason_is_stripped_optional_or_required_and_at_most_1000_characters() -> None:
    assert actions.reason_of({"reason": "  window  "}) == "window"
    assert actions.reason_of({"reason": "   "}) is None and actions.reason_of({}) is None
    with pytest.raises(InvalidInput, match="a reason is required") as missing:
        actions.reason_of({"reason": " "}, required=True)
    assert missing.value.errors == [{"field": "reason", "message": "required"}]
    assert actions.reason_of({"reason": "x" * 1000}, required=True) == "x" * 1000
    with pytest.raises(InvalidInput, match="at most 1000 characters, not 1001"):
        actions.reason_of({"reason": "x" * 1001})


def _macros(source: str, **context: Any) -> str:
    return render.ENV.from_string('{% from "macros.html" import action_form, flash %}'
                                  + source).render(**context)


def test_a_flash_set_by_an_action_links_its_audit_entry_and_escapes_its_text() -> None:
    page = _macros("{{ flash(text) }}", text=f"Paused {XSS}{actions.AUDIT_MARK}0195-ab")
    assert page == ("Paused &lt;script&gt;alert(1)&lt;/script&gt; "
                    '<a href="/ui/audit?request_id=0195-ab">See its audit entry</a>')
    assert _macros("{{ flash(text) }}", text="Saved.") == "Saved."  # no action: no link


def test_the_action_form_confirms_what_will_change_and_asks_for_the_reason() -> None:
    page = _macros('{{ action_form("/ui/x", "Pause run", "t0k", confirm, "pause", '
                   'reason="required", cls="danger", fields={"from_seq": 2}) }}',
                   confirm=f"Pause run of job {XSS}: it starts no next step.")
    assert page.startswith('<details class="action danger" id="pause">\n'
                           "<summary>Pause run…</summary>")
    assert '<input type="hidden" name="_csrf" value="t0k">' in page
    assert '<input type="hidden" name="from_seq" value="2">' in page
    assert ('<p class="confirm">Pause run of job &lt;script&gt;alert(1)&lt;/script&gt;: it '
            "starts no next step.</p>") in page
    assert '<label for="pause-reason">Reason (required)</label>' in page
    assert 'maxlength="1000"' in page and " required>" in page
    # no button.danger: ui.js would ask again with window.confirm; the disclosure is the ask
    assert '<button type="submit" class="danger-plain">Pause run</button>' in page
    refused = _macros('{{ action_form("/ui/x", "Go", "t", "Go.", "go", error="bad", '
                      'values={"reason": "why <b>"}) }}')
    assert '<details class="action" id="go" open>' in refused
    assert '<p class="error" role="alert">bad</p>' in refused
    assert 'value="why &lt;b&gt;"' in refused


def _run(**given: Any) -> RunRow:
    values: dict[str, Any] = {f.name: None for f in msgspec.structs.fields(RunRow)}
    values.update({"id": uuid.uuid4(), "job_id": uuid.uuid4(), "state": "running",
                   "steps_done": 2, "paused": False, "compensable": False,
                   "cancel_requested": False, **given})
    return RunRow(**values)


def _step(seq: int, succeeded: bool) -> StepRow:
    return StepRow(seq=seq, name=f"s{seq}", succeeded=succeeded, output=None, output_ref=None,
                   error_type=None if succeeded else "boom", message=None, attempt=1, tries=1,
                   duration_ms=1.0, recorded_at=T0)


def _offered(run: RunRow, role: str = roles.OPERATOR, archived: bool = False,
             steps: list[StepRow] | None = None) -> tuple[list[str], list[list[str]]]:
    ui: Any = SimpleNamespace(session=SimpleNamespace(role=role))
    found = run_offers.offers(ui, run, steps or [], "nightly-report", archived=archived)
    return [o.key for o in found.run], [[o.key for o in line.offers] for line in found.steps]


STEPS = [_step(0, True), _step(1, False)]


@pytest.mark.parametrize(("given", "run_keys", "step_keys"), [
    ({"state": "running"}, ["pause", "signal", "cancel"], []),
    ({"state": "suspended", "wait_reason": "signal", "wait_signal": "go"},
     ["pause", "signal", "cancel", "succeed", "fail"],
     [["restart-0"], ["retry-1", "skip-1", "restart-1"]]),
    # the wait it stopped at (position 2, nothing recorded there): a skip ends it
    ({"state": "suspended", "wait_reason": "signal", "wait_seq": 2, "wait_name": "go"},
     ["pause", "signal", "cancel", "succeed", "fail"],
     [["restart-0"], ["retry-1", "skip-1", "restart-1"], ["skip-2"]]),
    ({"state": "suspended", "wait_reason": "paused", "wait_seq": 2, "wait_name": "s2",
      "paused": True}, ["resume", "signal", "cancel", "succeed", "fail"],
     [["restart-0"], ["retry-1", "skip-1", "restart-1"]]),
    ({"state": "suspended", "paused": True}, ["resume", "signal", "cancel", "succeed", "fail"],
     [["restart-0"], ["retry-1", "skip-1", "restart-1"]]),
    ({"state": "dead_lettered"}, ["rerun", "succeed"],
     [["restart-0"], ["retry-1", "skip-1", "restart-1"]]),
    ({"state": "queued"}, ["signal", "cancel", "succeed", "fail"],
     [["restart-0"], ["retry-1", "skip-1", "restart-1"]]),
    ({"state": "cancelled"}, ["rerun"], []),
    ({"state": "succeeded"}, [], []),
])
def test_a_run_page_offers_what_the_api_would_take_in_its_state(
        given: dict[str, Any], run_keys: list[str], step_keys: list[list[str]]) -> None:
    assert _offered(_run(**given), steps=STEPS) == (run_keys, step_keys)


def test_a_dead_lettered_run_whose_last_step_did_not_fail_may_be_reopened_in_place() -> None:
    ok = [_step(0, True), _step(1, True)]
    assert _offered(_run(state="dead_lettered"), steps=ok) == (
        ["rerun", "succeed", "reopen"], [["restart-0"], ["restart-1"]])
    assert _offered(_run(state="dead_lettered", steps_done=0)) == (
        ["rerun", "succeed", "reopen"], [])  # a task run: retried as the same run


def test_a_viewer_and_an_archived_run_are_offered_nothing() -> None:
    suspended = _run(state="suspended")
    assert _offered(suspended, roles.VIEWER, steps=STEPS) == ([], [])
    assert _offered(suspended, archived=True, steps=STEPS) == ([], [])


def test_each_confirmation_names_the_run_its_job_and_what_will_change() -> None:
    run = _run(state="suspended", wait_reason="signal", wait_signal="go", paused=True,
               paused_at=T0, frozen_wake_at=T0 + timedelta(minutes=5))
    ui: Any = SimpleNamespace(session=SimpleNamespace(role=roles.OPERATOR))
    found = run_offers.offers(ui, run, STEPS, "nightly-report", archived=False)
    said = {o.key: o.confirm for o in found.run}
    tail = render.id_tail(run.id)
    assert said["resume"] == (f"Resume run {tail} of job nightly-report: it goes on where it "
                              "stopped; its timer gets the 5 min it had left.")
    assert said["signal"].endswith("; it waits for signal go now.")
    assert said["cancel"].startswith(f"Cancel run {tail} of job nightly-report: it is "
                                     "cancelled now and will not run")
    steps = {o.key: o for line in found.steps for o in line.offers}
    assert steps["retry-1"].confirm == (
        f"Retry step 1 s1 of run {tail} of job nightly-report: its failed record is set aside "
        "(kept in the history) and its next attempt runs the step again.")
    assert steps["restart-0"].confirm.startswith(
        f"Restart run {tail} of job nightly-report from step 0 s0: its record and the 1 later "
        "ones are set aside")
    assert steps["restart-0"].fields == {"from_seq": 0}
    assert {o.reason for o in steps.values()} == {"required"}  # as the API's interventions
