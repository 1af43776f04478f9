"""An operator's actions on a run's page (issue 41 item 3), driven in a real headless Chromium
against the services as processes (tests/helpers/ui.py): pause and resume, a signal with a JSON
payload, retrying and skipping a failed step, restarting from one, marking a run succeeded or
failed. Each form names what will change before it is sent, takes a reason, and after it the
page flashes the result with a link to the action's audit entry; the effect is checked through
the HTTP API, and the reason in the run's events and the audit row. A viewer is offered none
of it and a viewer's forged POST is refused as its role; a payload that is not JSON is caught
in the browser and again by the server (the form back with the error, nothing sent); axe finds
no serious violation with the forms open."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from ostinato.sdk import PermanentError, Worker, WorkflowContext, workflow
from tests.helpers import axe, ui
from tests.helpers.ui import Tab, World, api_get, audit_entry, one_run, shown_id, until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
world, browser, tab = ui.world, ui.browser, ui.tab

PAID: dict[str, int] = {}  # payment attempts by order


def _prepare(order: str) -> str:
    return f"prepared {order}"


def _pay(order: str, decline: str) -> str:
    PAID[order] = PAID.get(order, 0) + 1
    if decline == "always" or (decline == "once" and PAID[order] == 1):
        raise PermanentError(f"card declined for {order}", type="card_declined")
    return f"paid {order}"


@workflow("ui.actions.order")
async def order(ctx: WorkflowContext, payload: dict) -> dict:
    prepared = await ctx.step("prepare", _prepare, payload["order"])
    paid = await ctx.step("pay", _pay, payload["order"], payload.get("decline", "never"))
    return {"prepared": prepared, "paid": paid}


@workflow("ui.actions.gate")
async def gate(ctx: WorkflowContext, payload: dict) -> dict:
    prepared = await ctx.step("prepare", _prepare, payload["order"])
    go = await ctx.wait_for_signal("go")
    return {"prepared": prepared, "go": go}


CHECKED: dict[str, int] = {}  # executions of `strict` by order


@workflow("ui.actions.strict")
async def strict(ctx: WorkflowContext, payload: dict) -> dict:
    """Fails between its steps on its first execution (nothing recorded failed)."""
    prepared = await ctx.step("prepare", _prepare, payload["order"])
    CHECKED[payload["order"]] = CHECKED.get(payload["order"], 0) + 1
    if CHECKED[payload["order"]] == 1:
        raise PermanentError("a check outside any step failed", type="check_failed")
    return {"prepared": prepared}


@pytest.fixture(scope="module")
async def worker(world: World) -> AsyncIterator[None]:
    """A worker of this module's workflows, beside the world's."""
    w = Worker(world.cluster.gateway_url, world.key, [order, gate, strict], concurrency=4,
               claim_wait_seconds=1, shutdown_grace_seconds=5)
    running = asyncio.create_task(w.run())
    try:
        yield
    finally:
        await w.stop()
        await running


async def _run(world: World, name: str, task: str, payload: dict[str, Any],
               state: str, waits: str | None = None) -> str:
    """A new job's run, once it is `state` (and, suspended, waits for signal `waits`)."""
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/jobs", json={"name": name, "task": task, "payload": payload},
                           headers=world.h())
        assert r.status_code == 201, r.text
        run = await one_run(api, world.h(), r.json()["id"])
    await _until_state(world, run, state, waits)
    return run


async def _until_state(world: World, run: str, state: str, waits: str | None = None) -> Any:
    async def there() -> Any:
        got = await api_get(world, f"/v1/runs/{run}")
        return got if got["state"] == state and (
            waits is None or waits in (got.get("waiting_reason") or "")) else None
    return await until(there, f"run {run} is {state}")


async def _events(world: World, run: str) -> list[dict[str, Any]]:
    return (await api_get(world, f"/v1/runs/{run}/events?limit=500"))["items"]


async def act(tab: Tab, key: str, reason: str | None,
              fill: dict[str, str] | None = None) -> str:
    """Open the action `key` on the run's page, fill in its fields by name, send it."""
    return await ui.act(tab, f"details#{key}", reason,
                        fill={f"[name={name}]": value for name, value in (fill or {}).items()})


async def test_pause_and_resume_a_run_with_a_reason_and_the_audit_entry_linked(
        tab: Tab, world: World, worker: None) -> None:
    run = await _run(world, "gate-pause", "ui.actions.gate", {"order": "P-1"}, "suspended",
                     "go")
    await tab.login(world.key)
    await tab.goto(f"/ui/runs/{run}")
    assert not await tab.text("details#resume").count()  # not paused: no resume offered
    confirm = await act(tab, "pause", "maintenance window")
    assert confirm.startswith(f"Pause run {shown_id(run)} of job gate-pause: its wait is "
                              "frozen"), confirm
    assert "until resumed" in confirm
    assert (await tab.text("p.flash").inner_text()).startswith("Paused")
    got = await api_get(world, f"/v1/runs/{run}")
    assert got["paused"] is True and got["state"] == "suspended"
    paused = [e for e in await _events(world, run) if e["type"] == "RunPaused"]
    assert [e["data"]["reason"] for e in paused] == ["maintenance window"]
    # the page says it is paused, by whom and why; resume is offered, pause no more
    row = await tab.text("table.kv tr.paused td").inner_text()
    assert row.startswith("by tenant:acme") and row.endswith(": maintenance window"), row
    assert not await tab.text("details#pause").count()
    await audit_entry(tab, world, "run.pause", "maintenance window")

    await tab.goto(f"/ui/runs/{run}")
    confirm = await act(tab, "resume", "window over")
    assert confirm.startswith(f"Resume run {shown_id(run)} of job gate-pause"), confirm
    assert (await api_get(world, f"/v1/runs/{run}"))["paused"] is False
    resumed = [e for e in await _events(world, run) if e["type"] == "RunResumed"]
    assert [e["data"]["reason"] for e in resumed] == ["window over"]
    await audit_entry(tab, world, "run.resume", "window over")
    assert tab.errors == [] and tab.dialogs == []


async def test_a_signal_with_a_json_payload_is_checked_in_the_browser_and_on_the_server(
        tab: Tab, world: World, worker: None) -> None:
    run = await _run(world, "gate-signal", "ui.actions.gate", {"order": "S-1"}, "suspended",
                     "go")
    await tab.login(world.key)
    await tab.goto(f"/ui/runs/{run}")
    box = tab.page.locator("details#signal")
    await box.locator("summary").click()
    assert "it waits for signal go now" in await box.locator("p.confirm").inner_text()
    assert await box.locator("input[name=name]").input_value() == "go"  # the awaited one
    payload, send = box.locator("textarea[name=payload]"), box.locator("button[type=submit]")
    await payload.fill('{"by": ')
    error = box.locator("p.json-error")
    assert (await error.inner_text()).startswith("Not JSON")
    assert await send.is_disabled()
    await payload.fill('{"by": "ops:ana"}')
    assert await error.inner_text() == "" and not await send.is_disabled()

    # a payload that is not JSON, sent anyway (a browser without script): the form again
    await payload.fill("{not json")
    await tab.page.evaluate("() => document.querySelectorAll('button[disabled]')"
                            ".forEach(b => { b.disabled = false; })")
    async with tab.page.expect_navigation() as nav:
        await send.click()
    answer = await nav.value
    assert answer.status == 422
    box = tab.page.locator("details#signal[open]")
    assert "the payload is not JSON" in await box.locator("p.error").inner_text()
    assert await box.locator("textarea[name=payload]").input_value() == "{not json"
    assert not [e for e in await _events(world, run) if e["type"] == "SignalReceived"]

    await box.locator("textarea[name=payload]").fill('{"by": "ops:ana"}')
    await box.locator("input[name=reason]").fill("approved on the phone")
    async with tab.page.expect_navigation():
        await box.locator("button[type=submit]").click()
    assert (await tab.text("p.flash").inner_text()).startswith("Signal go sent")
    await _until_state(world, run, "succeeded")
    [received] = [e for e in await _events(world, run) if e["type"] == "SignalReceived"]
    assert (received["data"]["name"], received["data"]["payload"], received["data"]["reason"]
            ) == ("go", {"by": "ops:ana"}, "approved on the phone")
    await audit_entry(tab, world, "run.signal", "approved on the phone")
    # the 422 answer is the browser's one console line (a failed load), and nothing else
    assert [e for e in tab.errors if "status of 422" not in e] == [] and tab.dialogs == []


async def test_a_failed_step_is_retried_and_another_skipped_from_the_page(
        tab: Tab, world: World, worker: None) -> None:
    once = await _run(world, "order-once", "ui.actions.order",
                      {"order": "R-1", "decline": "once"}, "dead_lettered")
    always = await _run(world, "order-always", "ui.actions.order",
                        {"order": "K-1", "decline": "always"}, "dead_lettered")
    await tab.login(world.key)
    await tab.goto(f"/ui/runs/{once}")
    steps = await tab.text("table.step-actions tbody tr").all_inner_texts()
    assert [s.split("\t")[:3] for s in steps] == [["0", "prepare", "succeeded"],
                                                   ["1", "pay", "failed"]]
    assert not await tab.text("details#retry-0").count()  # a succeeded step is not retried
    # a required reason: the browser asks for it before anything is sent
    await tab.text("details#retry-1 summary").click()
    await tab.text("details#retry-1 button[type=submit]").click()
    assert await tab.page.evaluate(
        "() => !document.querySelector('#retry-1-reason').validity.valid")
    await tab.text("details#retry-1 summary").click()  # closed again
    confirm = await act(tab, "retry-1", "card limit raised")
    assert confirm.startswith(f"Retry step 1 pay of run {shown_id(once)} of job order-once: "
                              "its failed record is set aside"), confirm
    await _until_state(world, once, "succeeded")
    retried = [e for e in await _events(world, once) if e["type"] == "StepRetried"]
    assert [(e["data"]["seq"], e["data"]["reason"]) for e in retried] == [
        (1, "card limit raised")]
    assert PAID["R-1"] == 2
    await audit_entry(tab, world, "run.step_retry", "card limit raised")

    await tab.goto(f"/ui/runs/{always}")
    confirm = await act(tab, "skip-1", "paid by bank transfer",
                        {"output": '"paid by hand"'})
    assert "recorded as succeeded with the output below" in confirm
    await _until_state(world, always, "succeeded")
    result = await api_get(world, f"/v1/runs/{always}/result?wait=0s")
    assert result["output"]["paid"] == "paid by hand", result
    skipped = [e for e in await _events(world, always) if e["type"] == "StepSkipped"]
    assert [(e["data"]["output"], e["data"]["reason"]) for e in skipped] == [
        ("paid by hand", "paid by bank transfer")]
    await audit_entry(tab, world, "run.step_skip", "paid by bank transfer")
    assert tab.errors == [] and tab.dialogs == []


async def test_restart_mark_succeeded_and_mark_failed_from_the_page(
        tab: Tab, world: World, worker: None) -> None:
    failing = await _run(world, "order-restart", "ui.actions.order",
                         {"order": "T-1", "decline": "always"}, "dead_lettered")
    await tab.login(world.key)
    await tab.goto(f"/ui/runs/{failing}")
    assert not await tab.text("details#fail").count()  # dead-lettered already
    await act(tab, "restart-0", "replay from the start")
    await until(lambda: _count(world, failing, "RunDeadLettered", 2), "it fails again")
    restarted = [e for e in await _events(world, failing) if e["type"] == "RunRestarted"]
    assert [(e["data"]["from_seq"], e["data"]["reason"]) for e in restarted] == [
        (0, "replay from the start")]
    assert PAID["T-1"] == 2
    await _until_state(world, failing, "dead_lettered")

    await tab.goto(f"/ui/runs/{failing}")
    confirm = await act(tab, "succeed", "settled by hand", {"output": '{"paid": "by hand"}'})
    assert confirm.startswith(f"Mark run {shown_id(failing)} of job order-restart succeeded")
    await _until_state(world, failing, "succeeded")
    result = await api_get(world, f"/v1/runs/{failing}/result?wait=0s")
    assert result["output"] == {"paid": "by hand"}, result
    await audit_entry(tab, world, "run.succeed", "settled by hand")

    waiting = await _run(world, "gate-fail", "ui.actions.gate", {"order": "F-1"}, "suspended",
                         "go")
    await tab.goto(f"/ui/runs/{waiting}")
    await act(tab, "fail", "customer withdrew", {"error_type": "withdrawn"})
    await _until_state(world, waiting, "dead_lettered")
    marked = [e["data"] for e in await _events(world, waiting) if e["type"] == "RunMarkedFailed"]
    assert [(m["error_type"], m["message"], m["reason"]) for m in marked] == [
        ("withdrawn", "customer withdrew", "customer withdrew")]
    await audit_entry(tab, world, "run.fail", "customer withdrew")
    assert tab.errors == [] and tab.dialogs == []


async def test_a_wait_is_skipped_and_a_dead_lettered_run_reopened_from_the_page(
        tab: Tab, world: World, worker: None) -> None:
    waiting = await _run(world, "gate-skip", "ui.actions.gate", {"order": "W-1"}, "suspended",
                         "go")
    await tab.login(world.key)
    await tab.goto(f"/ui/runs/{waiting}")
    lines = await tab.text("table.step-actions tbody tr").all_inner_texts()
    assert [x.split("\t")[:3] for x in lines] == [["0", "prepare", "succeeded"],
                                                    ["1", "signal:go", "waiting (signal)"]]
    confirm = await act(tab, "skip-1", "approved in the meeting", {"output": '{"by": "board"}'})
    assert confirm.startswith(f"Skip the wait signal:go (position 1) of run {shown_id(waiting)}")
    await _until_state(world, waiting, "succeeded")
    result = await api_get(world, f"/v1/runs/{waiting}/result?wait=0s")
    assert result["output"]["go"] == {"by": "board"}, result
    await audit_entry(tab, world, "run.step_skip", "approved in the meeting")

    failed = await _run(world, "strict-reopen", "ui.actions.strict", {"order": "O-1"},
                        "dead_lettered")
    await tab.goto(f"/ui/runs/{failed}")
    confirm = await act(tab, "reopen", "the check is fixed")
    assert confirm.startswith(f"Reopen run {shown_id(failed)} of job strict-reopen: it is "
                              "scheduled again"), confirm
    await _until_state(world, failed, "succeeded")
    assert CHECKED["O-1"] == 2
    kinds = [e["type"] for e in await _events(world, failed)]
    assert kinds.count("StepCompleted") == 1  # prepare kept, not run again
    assert "RunRestarted" in kinds and "RunReopened" in kinds
    await audit_entry(tab, world, "run.restart", "the check is fixed")
    assert tab.errors == [] and tab.dialogs == []


async def _count(world: World, run: str, kind: str, n: int) -> bool:
    return sum(e["type"] == kind for e in await _events(world, run)) >= n


async def test_a_viewer_is_offered_no_action_and_its_forged_post_is_refused_as_its_role(
        tab: Tab, world: World, worker: None) -> None:
    run = await _run(world, "gate-viewer", "ui.actions.gate", {"order": "V-1"}, "suspended",
                     "go")
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/keys", json={"name": "run-actions-viewer", "role": "viewer"},
                           headers=world.h())
        assert r.status_code == 201, r.text
        viewer = r.json()["key"]
    await tab.login(viewer)
    await tab.goto(f"/ui/runs/{run}")
    await tab.text("table.kv").wait_for()
    assert not await tab.text("section.run-actions").count()
    assert not await tab.text("details.action").count()
    await tab.page.evaluate("""([action, token]) => {
        const form = document.createElement("form");
        form.method = "post"; form.action = action;
        for (const [name, value] of [["_csrf", token], ["reason", "forged"]]) {
            const field = document.createElement("input");
            field.type = "hidden"; field.name = name; field.value = value;
            form.appendChild(field);
        }
        document.body.appendChild(form); form.submit();
    }""", [f"/ui/runs/{run}/pause",
           await tab.page.locator("nav input[name=_csrf]").get_attribute("value")])
    await tab.page.wait_for_url(f"**/ui/runs/{run}/pause")
    await tab.text("section.problem[data-status='403']").wait_for()
    assert await tab.text("section.problem p.error").inner_text() == \
        "a viewer key may not operate (it may: read)"
    assert (await api_get(world, f"/v1/runs/{run}"))["paused"] is False
    refused = (await api_get(world, f"/v1/audit?action=run.pause&target_id={run}"))["items"]
    assert [(e["outcome"], e["role"]) for e in refused] == [("refused", "viewer")]


@pytest.mark.skipif(not axe.available(), reason=f"{axe.SOURCE} is missing (make assets: "
                                                "infra/axe.sh)")
async def test_the_run_page_with_its_forms_open_has_no_serious_accessibility_violation(
        tab: Tab, world: World, worker: None) -> None:
    waiting = await _run(world, "gate-axe", "ui.actions.gate", {"order": "A-1"}, "suspended",
                         "go")
    failed = await _run(world, "order-axe", "ui.actions.order",
                        {"order": "A-2", "decline": "always"}, "dead_lettered")
    await tab.login(world.key)
    found = []
    for run, shot in ((waiting, "run-actions-waiting"), (failed, "run-actions-failed")):
        await tab.goto(f"/ui/runs/{run}")
        await tab.page.evaluate(
            "() => document.querySelectorAll('details.action').forEach(d => { d.open = true; })")
        await tab.text("details.action[open] p.confirm").first.wait_for()
        await tab.shot(shot)
        found.extend(await axe.violations(tab.page, f"operator /ui/runs/{run} (forms open)"))
    assert found == [], "\n".join(map(str, found))
    assert tab.errors == []
