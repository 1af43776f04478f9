"""The web UI in a real headless Chromium (Debian's, driven by Playwright), against the five
services as processes: login, the pages, filters, live updates, pause/resume, CSRF, escaping,
tenant isolation. OSTINATO_UI_SCREENSHOTS=<dir> saves a screenshot of each page there."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.helpers import ui
from tests.helpers.ui import XSS_NAME, Tab, World, api_get, one_run, shown_id, until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
# the UI fixtures, for this module: its own cluster, browser and a fresh tab per test
world, browser, tab = ui.world, ui.browser, ui.tab


async def test_login_refuses_a_wrong_key_and_accepts_the_tenants(tab: Tab, world: World) -> None:
    r = await tab.goto("/ui/runs")
    assert "/ui/login" in tab.page.url  # no session: the login form
    assert r.status == 200
    await tab.page.fill("#api_key", "ost_not-a-key")
    async with tab.page.expect_response("**/ui/login") as refused:
        await tab.page.click("form.login button[type=submit]")
    assert (await refused.value).status == 401
    await tab.text("p.error").get_by_text("Unknown API key").wait_for()
    assert await tab.page.context.cookies() == [] or all(
        c["name"] != "ostinato_session" for c in await tab.page.context.cookies())

    await tab.login(world.key)
    assert await tab.text("nav .who b").inner_text() == "acme"
    [cookie] = [c for c in await tab.page.context.cookies() if c["name"] == "ostinato_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert world.key not in cookie["value"]
    await tab.page.click("nav form button")  # log out
    await tab.page.wait_for_url("**/ui/login")
    await tab.goto(f"/ui/runs/{world.greet_run}")
    assert "/ui/login" in tab.page.url  # the old session is gone
    # the old cookie itself no longer opens anything either
    r = await tab.page.request.get(f"{tab.base}/ui/runs", headers={
        "Cookie": f"ostinato_session={cookie['value']}"}, max_redirects=0)
    assert r.status == 303 and "/ui/login" in r.headers["location"]


async def test_every_page_loads_without_console_errors(tab: Tab, world: World) -> None:
    await tab.goto("/ui/login")
    await tab.shot("login")
    await tab.login(world.key)
    pages = [
        ("overview", "/ui/overview", "section.pool-card"),
        ("runs", "/ui/runs", "table.runs"),
        ("run", f"/ui/runs/{world.greet_run}", "table.events"),
        ("jobs", "/ui/jobs", "table.jobs"),
        ("job", f"/ui/jobs/{world.cron_job}", "table.upcoming"),
        ("dead-letters", "/ui/dead-letters", "table.letters"),
        ("dead-letter", f"/ui/dead-letters/{world.boom_run}", "details.replay summary"),
        ("operations", "/ui/operations", "h1"),
        ("pools", "/ui/pools", "table.classes"),
        ("workers", "/ui/workers", "table.workers"),
        ("keys", "/ui/keys", "table.keys"),
    ]
    for name, path, selector in pages:
        r = await tab.goto(path)
        assert r.status == 200, (path, r.status)
        await tab.text(selector).wait_for()
        await tab.page.wait_for_load_state("networkidle")
        await tab.shot(name)
    assert tab.errors == []


async def test_a_filter_narrows_the_runs_list(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto("/ui/runs")
    rows = tab.text("table.runs tbody tr")
    await rows.first.wait_for()
    everything = await rows.count()
    assert everything >= 2
    await tab.page.select_option("#f-state", "dead_lettered")
    await tab.page.click("form.filters button[type=submit]")
    await tab.page.wait_for_url("**state=dead_lettered**")
    dead = (await api_get(world, "/v1/runs?state=dead_lettered"))["items"]
    assert 1 <= await rows.count() == len(dead) < everything
    assert shown_id(world.boom_run) in " ".join(await rows.all_inner_texts())
    await tab.goto("/ui/runs?task=greet")
    assert await rows.count() >= 1
    for text in await rows.all_inner_texts():
        assert "greet" in text and "boom" not in text
    await tab.goto("/ui/runs?since=2999-01-01T00:00:00")  # a time range with nothing in it
    await tab.text("p.empty").get_by_text("No runs match").wait_for()
    await tab.goto(f"/ui/runs?job_id={world.boom_job}")
    boom_runs = (await api_get(world, f"/v1/runs?job_id={world.boom_job}"))["items"]
    assert await rows.count() == len(boom_runs) < everything
    assert tab.errors == []


async def test_the_runs_list_updates_live(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto(f"/ui/runs?job_id={world.greet_job}")
    rows = tab.text("table.runs tbody tr")
    await rows.first.wait_for()
    before = await rows.count()
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post(f"/v1/jobs/{world.greet_job}/trigger", headers=world.h())
        assert r.status_code == 201, r.text
        new_run = r.json()["run_id"]
    # no reload: the live region fetches the list again every few seconds
    await tab.text("table.runs").get_by_text(shown_id(new_run)).wait_for()
    assert await rows.count() == before + 1
    assert tab.errors == []


async def test_run_detail_shows_the_event_log_in_order(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto(f"/ui/runs/{world.greet_run}")
    logged = await api_get(world, f"/v1/runs/{world.greet_run}/events")
    cells = tab.text("table.events tbody tr td:nth-child(2)")
    await cells.first.wait_for()
    assert await cells.all_inner_texts() == [e["type"] for e in logged["items"]]
    assert [e["type"] for e in logged["items"]][-1] == "RunSucceeded"
    versions = await tab.text("table.events tbody tr td:nth-child(1)").all_inner_texts()
    assert versions == [str(e["version"]) for e in logged["items"]]
    # the attempt with its fencing token, and the output
    started = next(e for e in logged["items"] if e["type"] == "RunStarted")
    attempt = await tab.text("section:has(h2:text('Executions')) tbody tr").first.inner_text()
    assert attempt.split("\t")[:2] == ["1", str(started["data"]["fencing_token"])]
    assert "hello ui" in await tab.text("section:has(h2:text('Output')) pre").inner_text()
    # a dead letter's attempts carry its error
    await tab.goto(f"/ui/runs/{world.boom_run}")
    attempts = await tab.text("section:has(h2:text('Executions'))").inner_text()
    assert "bad_input: cannot handle 1;" in attempts and "(permanent)" in attempts
    assert tab.errors == []


async def test_a_workflow_runs_steps_are_shown_in_order(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto(f"/ui/runs/{world.flow_run}")
    steps = await api_get(world, f"/v1/runs/{world.flow_run}/steps")
    section = tab.text("section:has(h2:text('Workflow steps'))")
    names = await section.locator("tbody tr td:nth-child(2)").all_inner_texts()
    assert names == [s["name"] for s in steps["items"]] == ["fetch", "sum"]
    assert '"total": 6' in await tab.text("section:has(h2:text('Output')) pre").inner_text()
    assert tab.errors == []


async def test_pause_and_resume_through_the_ui(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto(f"/ui/jobs/{world.cron_job}")
    await tab.page.click("div.actions summary:text('Pause')")  # its confirmation
    await tab.page.click("div.actions button:text('Pause')")
    await tab.text("p.flash").get_by_text("Job paused").wait_for()
    assert (await api_get(world, f"/v1/jobs/{world.cron_job}"))["status"] == "paused"
    await tab.page.click("div.actions summary:text('Resume')")
    await tab.page.select_option("#f-misfire", "skip")
    await tab.page.click("div.actions button:text('Resume')")
    await tab.text("p.flash").get_by_text("Job resumed").wait_for()
    assert (await api_get(world, f"/v1/jobs/{world.cron_job}"))["status"] == "active"
    events = (await api_get(world, f"/v1/jobs/{world.cron_job}/events"))["items"]
    steered = [(e["type"], e["actor"]) for e in events if e["type"] in ("JobPaused", "JobResumed")]
    assert steered == [("JobPaused", "tenant:acme"), ("JobResumed", "tenant:acme")]
    # the upcoming preview: local (Berlin) and UTC times (the slot relative, in UTC on hover)
    first = tab.text("table.upcoming tbody tr").first
    assert "T02:30:00+0" in await first.inner_text()
    slot = first.locator("td:nth-child(2) time")
    assert (await slot.get_attribute("datetime")).endswith("+00:00")
    assert (await slot.get_attribute("title")).endswith(" UTC")
    assert tab.errors == []


async def test_a_post_without_the_csrf_token_is_refused(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    url = f"{tab.base}/ui/jobs/{world.cron_job}/pause"
    for form in ({}, {"_csrf": "not-the-token"}):
        r = await tab.page.request.post(url, form=form, max_redirects=0)  # the session cookie
        assert r.status == 403, form
    assert (await api_get(world, f"/v1/jobs/{world.cron_job}"))["status"] == "active"
    r = await tab.page.request.post(f"{tab.base}/ui/dead-letters/{world.boom_run}/replay",
                                    form={"edit": "1", "payload": "{}"}, max_redirects=0)
    assert r.status == 403
    letter = await api_get(world, f"/v1/dead-letters/{world.boom_run}")
    assert letter["replays"] == 0


async def test_markup_in_values_is_shown_as_text(tab: Tab, world: World) -> None:
    """A payload and an error message holding `<script>alert(1)</script>` (job names cannot)."""
    await tab.login(world.key)
    for path in (f"/ui/jobs/{world.cron_job}", f"/ui/runs/{world.boom_run}", "/ui/dead-letters",
                 f"/ui/dead-letters/{world.boom_run}"):
        await tab.goto(path)
        shown = tab.page.get_by_text(XSS_NAME).first
        await shown.wait_for()
        assert XSS_NAME in await shown.inner_text()
        scripts = await tab.page.eval_on_selector_all(
            "script", "els => els.map(e => e.getAttribute('src'))")
        assert scripts == ["/ui/static/ui.js"], scripts
    await tab.page.wait_for_load_state("networkidle")
    assert tab.dialogs == []
    assert tab.errors == []


async def test_another_tenants_run_is_not_found(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    for path in (f"/ui/runs/{world.other_run}", f"/ui/jobs/{world.other_job}",
                 f"/ui/dead-letters/{world.other_run}"):
        r = await tab.goto(path)
        assert r.status == 404, path
        assert await tab.page.title() == "Not found · Ostinato"
        assert "theirs" not in await tab.page.content()  # nothing of theirs is shown
    await tab.goto(f"/ui/runs?job_id={world.other_job}")  # their job's runs: none shown
    await tab.text("p.empty").get_by_text("No runs match").wait_for()
    token = await tab.page.locator("nav input[name=_csrf]").get_attribute("value")
    r = await tab.page.request.post(f"{tab.base}/ui/jobs/{world.other_job}/pause",
                                    form={"_csrf": token}, max_redirects=0)
    assert r.status == 404
    theirs = await api_get(world, f"/v1/jobs/{world.other_job}", world.other_key)
    assert theirs["status"] != "paused"


async def test_replay_a_dead_letter_with_an_edited_payload(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto(f"/ui/dead-letters/{world.boom_run}")
    await tab.page.click("details.replay summary")  # its confirmation
    await tab.page.check("#edit-payload")
    await tab.page.fill("#payload", '{"n": 2, "fixed": true}')
    await tab.page.click("details.replay button[type=submit]")
    await tab.text("p.flash").get_by_text("edited payload").wait_for()
    new_run = tab.page.url.rstrip("/").rsplit("/", 1)[1]
    run = await api_get(world, f"/v1/runs/{new_run}")
    assert run["replay_of"] == world.boom_run and run["payload"] == {"n": 2, "fixed": True}
    assert (await api_get(world, f"/v1/dead-letters/{world.boom_run}"))["replays"] == 1
    assert tab.errors == []


async def test_triage_a_dead_letter(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto(f"/ui/dead-letters/{world.boom_run}")
    await tab.page.click("summary:text('Save triage')")  # its confirmation
    await tab.page.select_option("#f-state", "acknowledged")
    await tab.page.fill("input[name=comment]", "looking into it <b>now</b>")
    await tab.page.click("button:text('Save triage')")
    await tab.text("p.flash").get_by_text("Triage saved").wait_for()
    letter = await api_get(world, f"/v1/dead-letters/{world.boom_run}")
    assert letter["triage_state"] == "acknowledged"
    assert letter["triage_by"] == "tenant:acme"
    assert letter["triage_comment"] == "looking into it <b>now</b>"
    assert await tab.page.locator("main b").count() == 0  # the comment is text, not markup
    assert tab.errors == []


def test_the_session_cookie_is_secure_over_https() -> None:
    from types import SimpleNamespace

    from services.api.ui.login import cookie_for

    for scheme, secure in (("https", True), ("http", False)):
        cookie = cookie_for(SimpleNamespace(url=SimpleNamespace(scheme=scheme)), "s", "v", 60)
        assert (cookie.secure, cookie.httponly, cookie.samesite) == (secure, True, "strict")


async def test_home_leads_to_the_overview(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    for path in ("/ui", "/ui/"):
        await tab.goto(path)
        assert tab.page.url.endswith("/ui/overview"), path


async def test_skipped_occurrences_are_shown_with_their_reason(tab: Tab, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/jobs", json={
            "name": "ticker", "task": "greet", "schedule": {
                "every": "1s", "misfire_grace": "0s"}}, headers=world.h())
        assert r.status_code == 201, r.text
        ticker = r.json()["id"]
        assert (await api.post(f"/v1/jobs/{ticker}/pause", headers=world.h())).status_code == 200
        await asyncio.sleep(3)  # slots pass while it is paused
        await tab.login(world.key)
        await tab.goto(f"/ui/jobs/{ticker}")
        await tab.page.click("div.actions summary:text('Resume')")
        await tab.page.select_option("#f-misfire", "skip")
        await tab.page.click("div.actions button:text('Resume')")
        await tab.text("p.flash").get_by_text("Job resumed").wait_for()

        async def skipped() -> list[dict[str, Any]]:
            return (await api.get(f"/v1/jobs/{ticker}/skips", headers=world.h())).json()["items"]
        skips = await until(skipped, "the missed slots recorded as skipped")
        assert (await api.post(f"/v1/jobs/{ticker}/pause", headers=world.h())).status_code == 200
    await tab.goto(f"/ui/jobs/{ticker}")
    rows = await tab.text("table.skips tbody tr").all_inner_texts()
    assert len(rows) >= len(skips) >= 1
    assert all(row.endswith(skip["reason"]) for row, skip in zip(rows, skips, strict=False))
    assert "misfire_skip" in {s["reason"] for s in skips}
    assert tab.errors == []


async def test_the_audit_page_lists_control_actions_with_filters(tab: Tab, world: World) -> None:
    request_id = f"ui-audit-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.put("/v1/limits/tasks/ui-audit", json={"max_concurrency": 2},
                          headers={**world.h(), "X-Request-Id": request_id})
        assert r.status_code == 200, r.text
        r = await api.post("/v1/keys", json={"name": "ui-viewer", "role": "viewer"},
                           headers=world.h())
        assert r.status_code == 201, r.text
        viewer = r.json()["key"]
        r = await api.post("/v1/jobs", json={"name": "ui-audit", "task": "greet",
                                             "schedule": {"cron": "0 3 * * *"}},
                           headers=world.h())  # its own job: other tests count cron_job's events
        assert r.status_code == 201, r.text
        job = r.json()["id"]
    await tab.login(world.key)
    await tab.goto(f"/ui/jobs/{job}")
    await tab.page.click("div.actions summary:text('Pause')")  # its confirmation
    await tab.page.click("div.actions button:text('Pause')")
    await tab.text("p.flash").get_by_text("Job paused").wait_for()
    await tab.page.click("div.actions summary:text('Resume')")
    await tab.page.click("div.actions button:text('Resume')")
    await tab.text("p.flash").get_by_text("Job resumed").wait_for()

    await tab.page.click("nav a:text('Audit')")
    await tab.page.wait_for_url("**/ui/audit")
    await tab.text("table.audit").wait_for()
    await tab.page.fill("input[name=action]", "job.pause")
    await tab.page.click("form.filters button[type=submit]")
    await tab.page.wait_for_url("**/ui/audit?*action=job.pause*")
    rows = await tab.text("table.audit tbody tr").all_inner_texts()
    assert rows and all("job.pause" in row for row in rows)
    assert "done 303" in rows[0] and "tenant:acme" in rows[0]  # the form's own record
    assert shown_id(job) in rows[0]
    await tab.goto(f"/ui/audit?request_id={request_id}")
    [row] = await tab.text("table.audit tbody tr").all_inner_texts()
    assert "limit.set" in row and "task:ui-audit" in row and "done 200" in row
    await tab.page.click("table.audit details summary")
    assert '"max_concurrency": 2' in await tab.text("table.audit details").inner_text()
    await tab.shot("audit")
    assert tab.errors == []

    await tab.page.click("nav form button")  # log out; a viewer may not read the trail
    await tab.page.wait_for_url("**/ui/login")
    await tab.login(viewer)
    r = await tab.goto("/ui/audit")
    assert r.status == 403


async def test_a_bulk_cancel_by_filter_through_the_ui(tab: Tab, world: World) -> None:
    """More matching runs than a page holds: the offer counts them all, the confirmation names
    the count, and the tracked operation cancels every one (and nothing else) while its page
    shows progress."""
    n = 120  # more than the page of 50
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=30) as api:
        r = await api.post("/v1/jobs/batch", json={"jobs": [
            {"name": f"bulk-ui-{i}", "task": "bulk.ui"} for i in range(n)]}, headers=world.h())
        assert r.status_code == 200, r.text

        async def count(kind: str, f: dict[str, Any]) -> int:
            r = await api.post("/v1/operations", json={"kind": kind, "filter": f,
                                                       "dry_run": True}, headers=world.h())
            assert r.status_code == 200, r.text
            return r.json()["count"]

        await until(lambda: _equals(count("cancel", {"task": "bulk.ui"}), n),
                    f"{n} unfinished runs of bulk.ui")  # no worker serves bulk.ui
        other_before = (await api.get(f"/v1/runs/{world.other_run}",
                                      headers=world.h(world.other_key))).json()["state"]
        await tab.login(world.key)
        await tab.goto("/ui/runs?task=bulk.ui")
        offer = tab.text("a.bulk[data-kind=cancel]")
        assert await offer.inner_text() == f"Cancel all {n} runs matching…"
        await tab.shot("bulk-offer")
        await offer.click()
        await tab.page.wait_for_url("**/ui/operations/new?*")
        assert await tab.text("#confirm-count").inner_text() == f"{n} runs"
        await tab.shot("bulk-confirm")
        await tab.page.click("#confirm")
        await tab.page.wait_for_url("**/ui/operations/*-*")
        await tab.text("p.flash").get_by_text(f"Cancel of {n} runs started.").wait_for()
        await tab.text(".progress[data-state=completed]").wait_for()  # polled, every second
        assert await tab.text("#op-done").inner_text() == str(n)
        await tab.shot("operation")
        assert await count("cancel", {"task": "bulk.ui"}) == 0
        assert await count("retry", {"task": "bulk.ui", "states": ["cancelled"]}) == n
        assert (await api.get(f"/v1/runs/{world.other_run}",
                              headers=world.h(world.other_key))).json()["state"] == other_before
        [op] = [o for o in (await api.get("/v1/operations", headers=world.h())).json()["items"]
                if o["filter"] == {"task": "bulk.ui"}]
        assert (op["state"], op["done"], op["actor"]) == ("completed", n, "tenant:acme")
        await tab.goto("/ui/runs?task=bulk.ui")
        assert await tab.text("a.bulk[data-kind=cancel]").count() == 0  # nothing left to cancel
        await tab.goto("/ui/operations")
        await tab.text("table.operations").wait_for()
        assert tab.errors == []


async def _equals(value: Any, expected: Any) -> bool:
    return await value == expected


async def test_a_workflows_timers_signals_and_children_are_shown(tab: Tab, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/jobs", json={"name": "waiter", "task": "ui.waiter"},
                           headers=world.h())
        assert r.status_code == 201, r.text
        run = await one_run(api, world.h(), r.json()["id"])

        async def waits_for_signal() -> bool:
            got = (await api.get(f"/v1/runs/{run}", headers=world.h())).json()
            return got["state"] == "suspended" and "approve" in (got["waiting_reason"] or "")
        await until(waits_for_signal, "the workflow waits for its signal")
        await tab.login(world.key)
        await tab.goto(f"/ui/runs/{run}")
        await tab.text("table.timers").wait_for()
        assert "not yet" not in await tab.text("body").inner_text()  # no signal received yet
        r = await api.post(f"/v1/runs/{run}/signals/approve", json={"by": "ops"},
                           headers=world.h())
        assert r.status_code == 202, r.text
        await until(lambda: _equals(_state(api, world, run), "succeeded"), "the workflow ends")
    await tab.goto(f"/ui/runs/{run}")
    timer = await tab.text("table.timers tbody tr").all_inner_texts()
    assert len(timer) == 1 and "UTC" in timer[0] and "waiting" not in timer[0]
    [signal] = await tab.text("table.signals tbody tr").all_inner_texts()
    assert signal.startswith("approve") and '"by": "ops"' in signal
    assert "tenant:acme" in signal
    [child] = await tab.text("table.children tbody tr").all_inner_texts()
    assert "greet" in child and "succeeded" in child and "yes" in child
    steps = (await api_get(world, f"/v1/runs/{run}/steps"))["items"]
    signal_step = next(s["seq"] for s in steps if s["name"].startswith("signal"))
    assert f"\t{signal_step}\t" in signal
    await tab.text("table.timers").scroll_into_view_if_needed()
    await tab.shot("workflow-run")
    assert tab.errors == []


async def _state(api: httpx.AsyncClient, world: World, run: str) -> str:
    return (await api.get(f"/v1/runs/{run}", headers=world.h())).json()["state"]


async def test_the_pools_page_shows_slots_and_the_tenants_queue_per_class(
        tab: Tab, world: World) -> None:
    pools = (await api_get(world, "/v1/pools"))["items"]
    await tab.login(world.key)
    await tab.goto("/ui/pools")
    sections = tab.text("section.pool")
    assert await sections.count() == len(pools)
    default = next(p for p in pools if p["name"] == "default")
    first = tab.text("section.pool[data-pool=default]")
    slots = default["shared_slots"] + default["own_slots"]
    assert f"{slots} live slots" in await first.inner_text()
    classes = await first.locator("table.classes tbody tr td:first-child").all_inner_texts()
    assert classes == list(default["classes"])
    await tab.shot("pools")
    await tab.page.select_option("#f-priority", "bulk")
    await tab.page.click("form.filters button[type=submit]")
    await tab.page.wait_for_url("**/ui/pools?*priority=bulk*")
    assert await first.locator("table.classes tbody tr td:first-child").all_inner_texts() == [
        "bulk"]
    await first.locator("summary:text('Pause my queue')").click()  # its confirmation
    await first.locator("button:text('Pause my queue')").click()
    await tab.text("p.flash").get_by_text("Your queue in pool default is paused.").wait_for()
    assert next(p for p in (await api_get(world, "/v1/pools"))["items"]
                if p["name"] == "default")["queue_paused"]
    await tab.text("section.pool[data-pool=default] summary:text('Resume my queue')").click()
    await tab.text("section.pool[data-pool=default] button:text('Resume my queue')").click()
    await tab.text("p.flash").get_by_text("is resumed").wait_for()
    assert not next(p for p in (await api_get(world, "/v1/pools"))["items"]
                    if p["name"] == "default")["queue_paused"]
    assert tab.errors == []


async def test_the_workers_page_lists_the_tenants_workers_and_filters_them(
        tab: Tab, world: World) -> None:
    workers = (await api_get(world, "/v1/workers"))["items"]
    assert workers
    await tab.login(world.key)
    await tab.goto("/ui/workers")
    rows = tab.text("table.workers tbody tr")
    assert await rows.count() == len(workers)
    assert workers[0]["worker_id"] in await tab.text("table.workers").inner_text()
    await tab.shot("workers")
    await tab.page.fill("input[name=task]", "ui.pipeline")
    await tab.page.click("form.filters button[type=submit]")
    await tab.page.wait_for_url("**/ui/workers?*task=ui.pipeline*")
    assert await rows.count() == len([w for w in workers if "ui.pipeline" in w["versions"]])
    await tab.page.fill("input[name=task]", "no.such.task")
    await tab.page.click("form.filters button[type=submit]")
    await tab.text("p.empty").get_by_text("No workers match.").wait_for()
    assert tab.errors == []


async def test_keys_are_listed_issued_rotated_and_revoked_by_an_operator(
        tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto("/ui/keys")
    await tab.text("table.keys").wait_for()
    await tab.page.click("details.issue summary")  # its confirmation
    await tab.page.fill("#key-name", "dashboard")
    await tab.page.select_option("details.issue select[name=role]", "viewer")
    await tab.page.click("details.issue button[type=submit]")
    await tab.text("p.flash").get_by_text("Key dashboard issued.").wait_for()
    secret = await tab.text("#new-key").inner_text()
    assert secret.startswith("ost_")
    listed = (await api_get(world, "/v1/keys"))["keys"]
    [made] = [k for k in listed if k["name"] == "dashboard"]
    assert made["role"] == "viewer" and made["active"]
    await tab.goto("/ui/keys")
    assert secret not in await tab.page.content()  # shown once
    # the tenant's one operator key may be rotated, not revoked (the API would refuse: 409)
    operator = tab.text("table.keys tbody tr:has(td:nth-child(2):text-is('operator'))")
    assert await operator.locator("button:text('Rotate')").count() == 1
    assert await operator.locator("button:text('Revoke')").count() == 0
    await tab.shot("keys")
    row = tab.text("table.keys tbody tr:has(.key-name:text-is('dashboard'))")
    await row.locator("summary:text('Rotate')").click()
    await row.locator("button:text('Rotate')").click()
    rotated = await tab.text("#new-key").inner_text()
    assert rotated.startswith("ost_") and rotated != secret
    await tab.goto("/ui/keys?role=viewer")  # the new key, and the old one in its hour of grace
    viewers = [row for row in await tab.text("table.keys tbody tr").all_inner_texts()
               if row.startswith("dashboard")]  # other tests of this module issue viewers too
    assert len(viewers) == 2 and "rotating until" in viewers[1] and "rotating" not in viewers[0]
    await tab.goto("/ui/keys?role=operator")
    assert "dashboard" not in await tab.text("table.keys").inner_text()
    # a viewer's session is not offered key management, nor any bulk action
    viewer_tab = Tab(await tab.page.context.new_page(), tab.base)
    try:
        await tab.page.context.clear_cookies()
        await viewer_tab.login(rotated)
        assert await viewer_tab.text("nav a:text('Keys')").count() == 0
        r = await viewer_tab.goto("/ui/keys")
        assert r.status == 403
        await viewer_tab.goto("/ui/dead-letters")
        assert await viewer_tab.text("a.bulk").count() == 0
    finally:
        await viewer_tab.page.close()
    await tab.login(world.key)
    await tab.goto("/ui/keys")
    newest = tab.text("table.keys tbody tr:has(.key-name:text-is('dashboard'))").first
    await newest.locator("summary:text('Revoke')").click()  # the newest first: the rotated key
    await newest.locator("details:has(summary:text('Revoke')) input[name=reason]").fill(
        "the dashboard moved")
    await newest.locator("button:text('Revoke')").click()
    await tab.text("p.flash").get_by_text("Key dashboard revoked:").wait_for()
    dashboards = [k for k in (await api_get(world, "/v1/keys"))["keys"]
                  if k["name"] == "dashboard"]
    assert [k["active"] for k in dashboards] == [False, True]  # the old one: until its grace ends
    await tab.goto("/ui/keys?show=all&role=viewer")
    rows = await tab.text("table.keys tbody tr").all_inner_texts()
    assert "revoked" in next(row for row in rows if row.startswith("dashboard"))
    assert tab.errors == []


async def _dag_run(api: httpx.AsyncClient, world: World, name: str,
                   nodes: list[dict[str, Any]], edges: list[dict[str, str]]) -> tuple[str, str]:
    r = await api.post("/v1/dags", json={"name": name, "nodes": nodes, "edges": edges},
                       headers=world.h())
    assert r.status_code == 201, r.text
    dag = r.json()["id"]
    r = await api.post(f"/v1/dags/{dag}/runs", headers=world.h())
    assert r.status_code == 201, r.text
    return dag, r.json()["id"]


async def _dag_state(api: httpx.AsyncClient, world: World, dag_run: str) -> dict[str, Any]:
    return (await api.get(f"/v1/dag-runs/{dag_run}", headers=world.h())).json()


async def test_dag_pages_show_the_graph_with_node_states_and_retry_from_a_node(
        tab: Tab, world: World) -> None:
    """A DAG whose middle node fails: the list, the DAG's runs, the run's graph with each
    node's state (as GET /v1/dag-runs/{id} has it), links both ways between a node and its run,
    and Retry from the failed node (a new generation of it, recorded with the session's actor)."""
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        dag, dag_run = await _dag_run(api, world, "ui-dag", [
            {"key": "extract", "task": "greet"}, {"key": "load", "task": "boom"},
            {"key": "report", "task": "greet"}, {"key": "notify", "task": "greet"}],
            [{"from": "extract", "to": "load"}, {"from": "load", "to": "report"},
             {"from": "extract", "to": "notify"}])
        await until(lambda: _equals(_field(_dag_state(api, world, dag_run), "state"), "failed"),
                    "the DAG run fails at its load node")
        view = await _dag_state(api, world, dag_run)
    states = {n["key"]: n["state"] for n in view["nodes"]}
    assert states == {"extract": "succeeded", "load": "failed", "report": "upstream_failed",
                      "notify": "succeeded"}
    await tab.login(world.key)
    await tab.page.click("nav a:text('DAGs')")
    await tab.page.wait_for_url("**/ui/dags")
    await tab.text("table.dags a:text-is('ui-dag')").click()
    await tab.page.wait_for_url(f"**/ui/dags/{dag}")
    await tab.text(".dag-graph svg").wait_for()
    await tab.shot("dag")
    [row] = await tab.text("table.dag-runs tbody tr").all_inner_texts()
    assert row.startswith(shown_id(dag_run)) and "failed" in row and "4 / 4" in row
    await tab.text(f"table.dag-runs a[href='/ui/dag-runs/{dag_run}']").click()
    await tab.page.wait_for_url(f"**/ui/dag-runs/{dag_run}")
    drawn = {await g.get_attribute("data-key"): await g.get_attribute("data-state")
             for g in await tab.text(".dag-graph g.node").all()}
    assert drawn == states
    # the graph is drawn in layers: extract, then load and notify, then report
    x = {k: float(await tab.text(f".dag-graph g.node[data-key={k}] rect").get_attribute("x"))
         for k in states}
    assert x["extract"] < x["load"] == x["notify"] < x["report"]
    assert await tab.text("#dag-ended").inner_text() == "4"
    nodes = {r.split("\t")[0]: r for r in await tab.text("table.dag-nodes tbody tr")
             .all_inner_texts()}
    assert "bad_input: cannot handle" in nodes["load"]
    assert await tab.text("table.dag-nodes summary:text('Retry from here')").count() == 2
    await tab.shot("dag-run")
    # a node's run links back to its DAG run
    load_run = next(n["run_id"] for n in view["nodes"] if n["key"] == "load")
    await tab.text(".dag-graph g.node[data-key=load]").click()
    await tab.page.wait_for_url(f"**/ui/runs/{load_run}")
    assert "(node load)" in await tab.text("table.kv").inner_text()
    await tab.text(f"table.kv a[href='/ui/dag-runs/{dag_run}']").click()
    await tab.page.wait_for_url(f"**/ui/dag-runs/{dag_run}")
    load_row = "table.dag-nodes tr:has(td:first-child:text-is('load'))"
    await tab.text(f"{load_row} summary").click()  # its confirmation (the refresh waits)
    await tab.text(f"{load_row} button[type=submit]").click()  # not the copy button of its run
    await tab.text("p.flash").get_by_text("Retrying from node load:").wait_for()
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        load = next(n for n in (await _dag_state(api, world, dag_run))["nodes"]
                    if n["key"] == "load")
        assert load["generation"] == 1 and load["run_id"] != load_run
        events = (await api.get(f"/v1/dag-runs/{dag_run}/events", headers=world.h())).json()
    [retried] = [e for e in events["items"] if e["type"] == "DagRunRetriedFromNode"]
    assert retried["data"]["key"] == "load" and retried["actor"] == "tenant:acme"
    assert retried["data"]["reset"] == ["load", "report"]
    assert tab.errors == []


async def test_a_dag_run_is_cancelled_from_its_page(tab: Tab, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        _, dag_run = await _dag_run(api, world, "ui-dag-stuck", [
            {"key": "wait", "task": "ui.nobody"}, {"key": "after", "task": "greet"}],
            [{"from": "wait", "to": "after"}])  # no worker serves ui.nobody
        await until(lambda: _equals(_field(_dag_state(api, world, dag_run), "state"),
                                    "running"), "the DAG run starts")
    await tab.login(world.key)
    await tab.goto(f"/ui/dag-runs/{dag_run}")
    await tab.text(".live .dag-graph").wait_for()  # a running DAG run refreshes itself
    await tab.page.click("div.actions summary:text('Cancel DAG run')")  # its confirmation
    await tab.page.click("div.actions button:text('Cancel DAG run')")
    await tab.text("p.flash").get_by_text("DAG run cancelled:").wait_for()
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        await until(lambda: _equals(_field(_dag_state(api, world, dag_run), "state"),
                                    "cancelled"), "the DAG run ends cancelled")
    await tab.goto(f"/ui/dag-runs/{dag_run}")
    assert await tab.text(".dag-graph g.node[data-key=after]").get_attribute(
        "data-state") == "cancelled"
    assert await tab.text("div.actions button:text('Cancel DAG run')").count() == 0
    assert tab.errors == []
    await tab.page.click("nav form button")  # log out: another tenant sees no such DAG run
    await tab.page.wait_for_url("**/ui/login")
    await tab.login(world.other_key)
    r = await tab.goto(f"/ui/dag-runs/{dag_run}")
    assert r.status == 404


async def _field(value: Any, name: str) -> Any:
    return (await value)[name]


async def test_run_detail_shows_the_captured_logs(tab: Tab, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/jobs", json={"name": "ui-chatty", "task": "ui.chatty",
                                             "payload": {"n": 7, "note": XSS_NAME}},
                           headers=world.h())
        assert r.status_code == 201, r.text
        run = await one_run(api, world.h(), r.json()["id"], "succeeded")
    logged = await api_get(world, f"/v1/runs/{run}/logs")
    assert [i["message"] for i in logged["items"]] == [
        "fetching 7 rows", f"slow source: {XSS_NAME}"]
    await tab.login(world.key)
    await tab.goto(f"/ui/runs/{run}")
    assert await tab.text("section:has(h2:text('Logs')) h2").inner_text() == "Logs (execution 1)"
    rows = await tab.text("table.logs tbody tr").all_inner_texts()
    assert [row.split("\t")[1:3] for row in rows] == [
        [i["level"], i["message"]] for i in logged["items"]]  # the markup shown as text
    await tab.goto(f"/ui/runs/{world.greet_run}")  # a handler that logged nothing
    await tab.text("section:has(h2:text('Logs')) p.empty").wait_for()
    assert tab.dialogs == [] and tab.errors == []


async def test_the_runs_list_filters_by_priority_class_and_error_type(
        tab: Tab, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/jobs", json={"name": "ui-bulk-class", "task": "ui.nobody",
                                             "priority": "bulk"}, headers=world.h())
        assert r.status_code == 201, r.text
        bulk_run = await one_run(api, world.h(), r.json()["id"])
    await tab.login(world.key)
    await tab.goto("/ui/runs")  # a login lands on the overview
    await tab.page.select_option("#f-priority", "bulk")
    await tab.page.click("form.filters button[type=submit]")
    await tab.page.wait_for_url("**priority=bulk**")
    shown = [row.split("\t")[0] for row in await tab.text("table.runs tbody tr")
             .all_inner_texts()]
    wanted = (await api_get(world, "/v1/runs?priority=bulk"))["items"]
    assert shown_id(bulk_run) in shown
    assert shown == [shown_id(i["id"]) for i in wanted]
    assert shown_id(world.greet_run) not in shown
    assert await tab.text("a.bulk").count() == 0  # a bulk filter has no class: not offered
    await tab.shot("runs-filtered")

    await tab.goto("/ui/runs")
    await tab.page.fill("input[name=error_type]", "bad_input")
    await tab.page.click("form.filters button[type=submit]")
    await tab.page.wait_for_url("**error_type=bad_input**")
    shown = [row.split("\t")[0] for row in await tab.text("table.runs tbody tr")
             .all_inner_texts()]
    failed = (await api_get(world, "/v1/runs?error_type=bad_input"))["items"]
    assert shown_id(world.boom_run) in shown
    assert shown == [shown_id(i["id"]) for i in failed]
    assert all(i["last_error"]["type"] == "bad_input" for i in failed)
    assert shown_id(world.greet_run) not in shown
    r = await tab.goto("/ui/runs?priority=urgent")
    assert r.status == 422
    r = await tab.goto("/ui/runs?error_type=bad%00input")  # PostgreSQL text cannot hold NUL
    assert r.status == 400
    await tab.text("p.error").get_by_text("U+0000").wait_for()
    assert all("422" in e or "400" in e for e in tab.errors)  # the refusals' own


async def test_a_viewer_is_offered_no_per_item_action(tab: Tab, world: World) -> None:
    """The same pages an operator acts from (each checked to offer the action to the
    operator), with no control for a viewer's session: job pause/resume/trigger, run cancel
    and re-run, dead-letter triage and replay, DAG run cancel and retry."""
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/keys", json={"name": "ui-viewer-actions", "role": "viewer"},
                           headers=world.h())
        assert r.status_code == 201, r.text
        viewer = r.json()["key"]
        r = await api.post("/v1/jobs", json={"name": "ui-viewer-waits", "task": "ui.nobody"},
                           headers=world.h())
        assert r.status_code == 201, r.text
        waiting_run = await one_run(api, world.h(), r.json()["id"])
        _, dag_run = await _dag_run(api, world, "ui-dag-viewer", [
            {"key": "only", "task": "ui.nobody"}], [])
    # (page, a control an operator is offered there)
    controls = [
        ("/ui/jobs", "table.jobs button:text('Trigger now')"),
        (f"/ui/jobs/{world.cron_job}", "div.actions button:text('Pause')"),
        (f"/ui/runs/{waiting_run}", "div.actions button:text('Cancel run')"),
        (f"/ui/runs/{world.boom_run}", "div.actions button:text('Re-run')"),
        (f"/ui/dead-letters/{world.boom_run}", "details.replay"),
        (f"/ui/dead-letters/{world.boom_run}", "button:text('Save triage')"),
        (f"/ui/dag-runs/{dag_run}", "div.actions button:text('Cancel DAG run')"),
    ]
    await tab.login(world.key)
    for path, selector in controls:
        await tab.goto(path)
        assert await tab.text(selector).count() >= 1, (path, selector)
    await tab.page.click("nav form button")  # log out
    await tab.page.wait_for_url("**/ui/login")
    await tab.login(viewer)
    for path, selector in controls:
        r = await tab.goto(path)
        assert r.status == 200, path
        await tab.text("h1").wait_for()
        assert await tab.text(selector).count() == 0, (path, selector)
        assert await tab.text("main form[method=post]").count() == 0, path
    await tab.goto(f"/ui/dead-letters/{world.boom_run}")
    await tab.shot("viewer-dead-letter")
    assert tab.errors == []


def _percentile(values: list[float], q: float) -> float:
    """PostgreSQL's percentile_cont: linear between the two nearest ranks."""
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


async def test_the_pools_page_charts_start_lag_per_class(tab: Tab, world: World) -> None:
    """Each dot of the chart (pool default, class default) against the same figures computed
    here from GET /v1/runs: per minute of the slot, the runs started in their first attempt and
    the p50/p99 of started - due."""
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post(f"/v1/jobs/{world.greet_job}/trigger", headers=world.h())
        assert r.status_code == 201, r.text
        fresh = r.json()["run_id"]
        await until(lambda: _equals(_state(api, world, fresh), "succeeded"), "the run ends")
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = (await api.get("/v1/runs", params={"limit": 500, **(
                {"cursor": cursor} if cursor else {})}, headers=world.h())).json()
            items += page["items"]
            if not (cursor := page["next_cursor"]):
                break
    lags: dict[str, list[float]] = {}
    for i in items:
        started = i["timestamps"].get("started_at")
        if i["pool"] != "default" or i["priority"] != "default" or i["attempt"] != 1 \
                or started is None:
            continue
        due = datetime.fromisoformat(i["due_at"] or i["scheduled_for"])
        minute = datetime.fromisoformat(i["scheduled_for"]).replace(second=0, microsecond=0)
        lags.setdefault(minute.isoformat(), []).append(
            max((datetime.fromisoformat(started) - due).total_seconds(), 0.0))
    await tab.login(world.key)
    await tab.goto("/ui/pools?pool=default")
    chart = tab.text("section.pool[data-pool=default] .lag-chart")
    await chart.locator("svg").wait_for()
    for q in ("p50", "p99"):
        assert await chart.locator(f"polyline[data-class=default][data-q={q}]").count() == 1
    dots = chart.locator("circle[data-class=default]")
    shown = {await d.get_attribute("data-minute"): d for d in await dots.all()}
    fresh_minute = next(datetime.fromisoformat(i["scheduled_for"]) for i in items
                        if i["id"] == fresh).replace(second=0, microsecond=0)
    assert fresh_minute.isoformat() in shown
    first = min(shown)
    assert sorted(shown) == sorted(m for m in lags if m >= first)  # minutes, not a duration
    for minute, dot in shown.items():
        assert int(await dot.get_attribute("data-runs")) == len(lags[minute]), minute
        for q, p in (("p50", 0.5), ("p99", 0.99)):
            figure = float(await dot.get_attribute(f"data-{q}"))
            # the same figure from the same database timestamps; 1e-3 is the rounding of the
            # value printed into the SVG, not a bound on any duration
            assert abs(figure - _percentile(lags[minute], p)) < 1e-3, (minute, q)
    await chart.scroll_into_view_if_needed()
    await tab.shot("pools-start-lag")
    assert tab.errors == []
