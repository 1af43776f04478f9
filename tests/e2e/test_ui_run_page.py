"""A run's page read as a person reads it (issue 41 item 2), in a real headless Chromium against
the services as processes (tests/helpers/ui.py): a workflow of more than 20 events (steps, a
timer, a signal, a child) shows its timeline in sentences, each opening to its JSON, its
waterfall of executions, steps and waits placed as the API's events say, and, while it waits,
why in words; under the strict CSP with no console error."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime

import httpx
import pytest

from ostinato.sdk import Worker, WorkflowContext, workflow
from tests.helpers import ui
from tests.helpers.ui import Tab, World, api_get, one_run, until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
world, browser, tab = ui.world, ui.browser, ui.tab


async def _charge(amount: int) -> dict[str, int]:
    await asyncio.sleep(0.05)  # a step that takes a moment, so its bar has a width
    return {"charged": amount}


def _ship(order: str) -> str:
    return f"shipped {order}"


@workflow("ui.story")
async def story(ctx: WorkflowContext, payload: dict) -> dict:
    charged = await ctx.step("charge", _charge, payload["amount"])
    await ctx.sleep(0.3)
    review = await ctx.wait_for_signal("review")
    shipped = await ctx.step("ship", _ship, payload["order"])
    child = await ctx.child("greet", {"who": review["by"]})
    return {"charged": charged, "shipped": shipped, "child": child}


async def test_a_workflows_page_tells_its_timeline_in_words_and_draws_its_waterfall(
        tab: Tab, world: World) -> None:
    worker = Worker(world.cluster.gateway_url, world.key, [story], concurrency=2,
                    claim_wait_seconds=1, shutdown_grace_seconds=5)
    running = asyncio.create_task(worker.run())
    try:
        async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
            r = await api.post("/v1/jobs", json={"name": "story", "task": "ui.story",
                                                 "payload": {"amount": 412, "order": "A-17"}},
                               headers=world.h())
            assert r.status_code == 201, r.text
            run = await one_run(api, world.h(), r.json()["id"])

            async def waits_for_review() -> bool:
                got = (await api.get(f"/v1/runs/{run}", headers=world.h())).json()
                return got["state"] == "suspended" and "review" in (got["waiting_reason"] or "")
            await until(waits_for_review, "the workflow waits for its signal")
            await tab.login(world.key)
            await tab.goto(f"/ui/runs/{run}")
            # why it waits, in words; the live region keeps the page current
            now = await tab.text("table.kv tr.now td").inner_text()
            assert now.startswith("waiting for signal review"), now
            r = await api.post(f"/v1/runs/{run}/signals/review", json={"by": "ops:ana"},
                               params={"reason": "looks right"}, headers=world.h())
            assert r.status_code == 202, r.text

            async def succeeded() -> bool:
                got = (await api.get(f"/v1/runs/{run}", headers=world.h())).json()
                return got["state"] == "succeeded"
            await until(succeeded, "the workflow ends")
    finally:
        await worker.stop()
        await running
    events = (await api_get(world, f"/v1/runs/{run}/events?limit=500"))["items"]
    assert len(events) >= 20, [e["type"] for e in events]

    await tab.goto(f"/ui/runs/{run}")
    rows = tab.text("table.events tbody tr")
    await rows.first.wait_for()
    assert await rows.count() == len(events)
    assert await tab.text("table.events tbody tr td:nth-child(2)").all_inner_texts() == [
        e["type"] for e in events]
    told = await tab.text("table.events tbody tr td:nth-child(4) summary").all_inner_texts()
    said = "\n".join(told)
    for sentence in ("started on worker", "step charge succeeded in",
                     "sleeping until", "slept until", "waiting for signal review",
                     "signal review received from tenant:acme: looks right",
                     "resumed on worker",
                     "step ship succeeded in", "child run", "succeeded in"):
        assert sentence in said, (sentence, told)
    assert "{" not in said and "None" not in said  # words, not data
    # a row opens to its event's JSON, as the API has it
    signal = next(i for i, e in enumerate(events) if e["type"] == "SignalReceived")
    row = rows.nth(signal)
    assert not await row.locator("details pre").is_visible()
    await row.locator("summary").click()
    shown = await row.locator("details pre").inner_text()
    assert '"by": "ops:ana"' in shown and '"type": "SignalReceived"' in shown

    # the waterfall: a lane per execution, step and wait, as the events say, in start order
    labels = await tab.text("table.waterfall tbody tr td:first-child").all_inner_texts()
    steps = [f"step {e['data']['seq']} {e['data']['name']}" for e in events
             if e["type"] == "StepCompleted"]
    assert [x for x in labels if x.startswith("execution")] == [
        f"execution {n}" for n in range(1, 1 + sum(e["type"] == "RunStarted" for e in events))]
    assert [x for x in labels if x.startswith("step")] == steps
    waits = [x for x in labels if not x.startswith(("execution", "step"))]
    assert len(waits) == sum(e["type"] == "RunSuspended" for e in events)
    assert [w.split(" ")[0] for w in waits] == ["sleep", "signal", "child"], waits
    assert waits[1] == "signal review"
    bars = await tab.page.eval_on_selector_all(
        "table.waterfall rect.wf-bar",
        "els => els.map(e => [e.getAttribute('x'), e.getAttribute('width')])")
    starts = [float(x.rstrip("%")) for x, _ in bars]
    assert starts == sorted(starts)
    assert all(0 < float(w.rstrip("%")) and float(x.rstrip("%")) + float(w.rstrip("%")) <= 100.001
               for x, w in bars)
    # the steps' lanes sit where their events put them: charge before the sleep, ship after
    at = {label: float(x.rstrip("%")) for label, (x, _) in zip(labels, bars, strict=True)}
    sleep = next(v for k, v in at.items() if k.startswith("sleep"))
    assert at[steps[0]] < sleep < at[steps[1]]
    # placed on the run's span, from its first event to its last: the first claim's offset is
    # its start lag
    first, last, claimed = (datetime.fromisoformat(e["occurred_at"]) for e in (
        events[0], events[-1], next(e for e in events if e["type"] == "RunStarted")))
    assert at["execution 1"] == pytest.approx(
        100 * (claimed - first).total_seconds() / (last - first).total_seconds(), abs=0.01)
    # nothing broke the CSP (an inline style or script is a console error) or the page
    await tab.text("section.waterfall").scroll_into_view_if_needed()
    await tab.shot("run-waterfall")
    assert tab.errors == []
    assert re.search(r"\d+ lanes over", await tab.text("section.waterfall p").inner_text())
