"""The lists as a person reads them in Chromium (issue 41 items 1-5): the runs list's columns
against the API, ids shown by their differing tail and copied whole with the copy button, times
relative with the absolute one on hover and a UTC/local toggle that is remembered, the jobs list
with a schedule in words and a pause's reason, and a viewer's form refused as its role on an
error page with a way back."""

from __future__ import annotations

import re
from datetime import datetime

import httpx
import pytest

from tests.helpers import ui
from tests.helpers.ui import XSS_NAME, Tab, World, api_get, shown_id

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
world, browser, tab = ui.world, ui.browser, ui.tab


def _row(tab: Tab, run_id: str) -> object:
    return tab.text(f"table.runs tbody tr:has(button.copy[data-copy='{run_id}'])")


async def test_the_runs_list_answers_job_start_duration_attempts_and_error(
        tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto("/ui/runs")
    boom = await api_get(world, f"/v1/runs/{world.boom_run}")
    greet = await api_get(world, f"/v1/runs/{world.greet_run}")
    row = _row(tab, world.boom_run)
    cells = await row.locator("td").all_inner_texts()
    assert cells[0] == shown_id(world.boom_run)
    assert cells[1] == "boom-now"  # the job by its name, not an id
    assert cells[2].startswith("boom") and cells[3] == "dead_lettered"
    assert re.fullmatch(r"\d+ of \d+", cells[4])
    assert boom["last_error"]["type"] == "bad_input"
    error = row.locator("td.error-cell")
    assert (await error.inner_text()).startswith("bad_input: cannot handle 1; ")
    assert XSS_NAME in await error.inner_text()  # the handler's message, as text
    assert tab.dialogs == []
    started = row.locator("td:nth-child(6) time")
    events = (await api_get(world, f"/v1/runs/{world.boom_run}/events"))["items"]
    [start] = [e["occurred_at"] for e in events if e["type"] == "RunStarted"]
    assert datetime.fromisoformat(await started.get_attribute("datetime")) == \
        datetime.fromisoformat(start)  # its RunStarted
    assert re.fullmatch(r"(\d+ (s|min|h|d)( \d+ min)? ago|just now)", await started.inner_text())
    assert (await started.get_attribute("title")).endswith(" UTC")  # absolute on hover
    took = await _row(tab, world.greet_run).locator("td:nth-child(7) .duration").inner_text()
    assert re.fullmatch(r"\d+(\.\d)? (ms|s)", took), took
    assert greet["state"] == "succeeded"
    assert await _row(tab, world.greet_run).locator("td.error-cell").inner_text() == ""
    await tab.shot("runs")
    assert tab.errors == []


async def test_the_runs_list_sorts_by_scheduled_time_both_ways(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto("/ui/runs")
    items = (await api_get(world, "/v1/runs?limit=50"))["items"]
    ids = [i["id"] for i in items]  # newest first, as the list
    shown = [await b.get_attribute("data-copy") for b in
             await tab.text("table.runs tbody tr td:first-child button.copy").all()]
    assert shown == ids
    await tab.page.click("table.runs th a.sort")
    await tab.page.wait_for_url("**order=oldest**")
    shown = [await b.get_attribute("data-copy") for b in
             await tab.text("table.runs tbody tr td:first-child button.copy").all()]
    assert shown == ids[::-1]
    # the sort state is the column header's (axe: aria-sort is not allowed on a link)
    header = tab.page.locator("table.runs th", has=tab.page.locator("a.sort"))
    assert await header.get_attribute("aria-sort") == "ascending"
    assert await tab.text("th a.sort").get_attribute("aria-sort") is None
    assert tab.errors == []


async def test_the_copy_button_copies_the_full_id(tab: Tab, world: World, browser: object) -> None:
    await browser.grant_permissions(["clipboard-read", "clipboard-write"],  # type: ignore[attr-defined]
                                    origin=tab.base)
    await tab.login(world.key)
    await tab.goto("/ui/runs")
    button = _row(tab, world.boom_run).locator("td:first-child button.copy")
    assert await button.get_attribute("title") == f"Copy the full id {world.boom_run}"
    await button.click()
    await tab.text("button.copy.copied").first.wait_for()
    assert await tab.page.evaluate("navigator.clipboard.readText()") == world.boom_run
    job = _row(tab, world.boom_run).locator("td:nth-child(2) button.copy")
    await job.click()
    assert await tab.page.evaluate("navigator.clipboard.readText()") == world.boom_job
    assert tab.errors == []


async def test_times_toggle_between_utc_and_local_and_stay_so(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto("/ui/runs")
    toggle = tab.text("button.zone-toggle")
    assert await toggle.inner_text() == "times: UTC"
    await toggle.click()
    assert await toggle.inner_text() == "times: local"
    assert await toggle.get_attribute("aria-pressed") == "true"
    await tab.goto("/ui/jobs")  # another page: still local (localStorage)
    assert await tab.text("button.zone-toggle").inner_text() == "times: local"
    await tab.text("button.zone-toggle").click()
    assert await tab.text("button.zone-toggle").inner_text() == "times: UTC"
    assert tab.errors == []


async def test_the_jobs_list_says_the_schedule_and_why_a_job_is_paused(
        tab: Tab, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/jobs", headers=world.h(), json={
            "name": "ui-weekdays", "task": "greet",
            "schedule": {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"}})
        assert r.status_code == 201, r.text
        job = r.json()["id"]
    await tab.login(world.key)
    await tab.goto("/ui/jobs")
    row = tab.text(f"table.jobs tbody tr:has(button.copy[data-copy='{job}'])")
    assert await row.locator(".schedule").inner_text() == \
        "at 09:00 Europe/Berlin on Monday to Friday"
    assert await row.locator("td:nth-child(5) time").count() == 1  # its next run
    await row.locator("summary:text('Pause')").click()  # its confirmation, with a reason
    await row.locator("details:has(summary:text('Pause')) input[name=reason]").fill(
        f"quarter close {XSS_NAME}")
    await row.locator("button:text('Pause')").click()
    await tab.text("p.flash").get_by_text("Job paused").wait_for()
    row = tab.text(f"table.jobs tbody tr:has(button.copy[data-copy='{job}'])")
    assert await row.get_attribute("data-status") == "paused"
    assert f"quarter close {XSS_NAME}" in await row.locator(".pause-reason").inner_text()
    assert await row.locator("td:nth-child(5)").inner_text() == "none while paused"
    assert await row.locator("td:nth-child(5) time").count() == 0
    events = (await api_get(world, f"/v1/jobs/{job}/events"))["items"]
    assert [e["data"]["reason"] for e in events if e["type"] == "JobPaused"] == [
        f"quarter close {XSS_NAME}"]
    assert tab.dialogs == [] and tab.errors == []
    await tab.shot("jobs")


async def test_a_viewers_form_is_refused_as_its_role_on_a_page_with_a_way_back(
        tab: Tab, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/keys", json={"name": "ui-lists-viewer", "role": "viewer"},
                           headers=world.h())
        assert r.status_code == 201, r.text
        viewer = r.json()["key"]
    await tab.login(viewer)
    # a form the viewer's page does not offer, as a stale page or a crafted one would send it,
    # with the session's right token: the answer names the role, not the token
    await tab.page.evaluate("""([action, token]) => {
        const form = document.createElement("form");
        form.method = "post"; form.action = action;
        const field = document.createElement("input");
        field.type = "hidden"; field.name = "_csrf"; field.value = token;
        form.appendChild(field); document.body.appendChild(form); form.submit();
    }""", [f"/ui/runs/{world.boom_run}/retry",
           await tab.page.locator("nav input[name=_csrf]").get_attribute("value")])
    await tab.page.wait_for_url(f"**/ui/runs/{world.boom_run}/retry")
    await tab.text("section.problem[data-status='403']").wait_for()
    assert await tab.page.title() == "Not allowed for this key · Ostinato"
    assert await tab.text("section.problem p.error").inner_text() == \
        "a viewer key may not operate (it may: read)"
    assert "CSRF" not in await tab.page.content()
    await tab.text("section.problem a[href='/ui/runs']").click()  # the way back
    await tab.page.wait_for_url("**/ui/runs")
    await tab.shot("viewer-refused")
    runs = (await api_get(world, f"/v1/runs?job_id={world.boom_job}"))["items"]
    assert len(runs) == 1  # nothing was re-run
    for path, status in ((f"/ui/runs/{world.other_run}", 404), ("/ui/runs/not-a-uuid", 404),
                         ("/ui/runs?state=bogus", 422)):
        answer = await tab.goto(path)
        assert answer.status == status, path
        assert await tab.text(f"section.problem[data-status='{status}']").count() == 1, path
        assert await tab.text("section.problem a[href='/ui/runs']").count() == 1, path
