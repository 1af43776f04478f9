"""A job's actions in a real headless Chromium (issue 41 item 3), on the fixtures of
`helpers/ui.py` (the five services as processes): create a job with its occurrences previewed,
edit one with the occurrences before and after, pause with a reason, resume, trigger now; each
confirmed in a disclosure naming what changes, its effect read back through the HTTP API, its
result linked to its audit entry holding the reason. A viewer is offered none of it, and a
forged POST is refused for its role; bad input changes nothing; axe-core finds no serious
violation on the job pages with their forms open."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import axe, ui
from tests.helpers.ui import Tab, World, api_get

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
world, browser, tab = ui.world, ui.browser, ui.tab


async def _job(world: World, name: str, **fields: Any) -> str:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/jobs", headers=world.h(), json={
            "name": name, "task": "greet", "payload": {"who": name},
            "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Berlin"}, **fields})
        assert r.status_code == 201, r.text
        return r.json()["id"]


async def _act(tab: Tab, label: str, reason: str | None = None, where: str = "div.actions",
               ) -> Any:
    """Open the action's confirmation, give the reason, confirm; the sentence it showed."""
    box = tab.text(f"{where} details.action:has(summary:text-is('{label}…'))")
    await box.locator("summary").click()
    confirm = await box.locator("p.confirm").inner_text()
    if reason is not None:
        await box.locator("input[name=reason]").fill(reason)
    await box.locator(f"button:text-is('{label}')").click()
    return confirm


async def _audit(world: World, action: str, job: str) -> list[dict[str, Any]]:
    return (await api_get(world, f"/v1/audit?action={action}&target_id={job}"))["items"]


async def _follow_audit_link(tab: Tab, action: str, reason: str) -> None:
    """The result's link leads to the action's audit entry, which holds the reason."""
    await tab.text("p.flash a:text('See its audit entry')").click()
    await tab.page.wait_for_url("**/ui/audit?request_id=*")
    entry = tab.text("main")
    await entry.get_by_text(action).first.wait_for()
    assert reason in await entry.inner_text()


async def test_create_a_job_after_previewing_its_occurrences(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto("/ui/jobs")
    await tab.page.click("a:text('New job')")
    await tab.page.wait_for_url("**/ui/jobs/new")
    await tab.page.fill("#f-name", "ui-created")
    await tab.page.fill("#f-task", "greet")
    await tab.page.fill("#f-payload", '{"who": "ui-created"}')
    await tab.page.select_option("#f-kind", "cron")
    await tab.page.fill("#f-cron", "30 2 * * *")
    await tab.page.fill("#f-timezone", "Europe/Berlin")
    await tab.page.fill("#f-reason", "ticket OPS-7")
    assert await tab.text("button:text('Create job')").count() == 0  # nothing to create yet
    await tab.page.click("button:text-is('Preview')")
    rows = tab.text("table.upcoming tbody tr")
    await rows.first.wait_for()
    shown = await rows.all_inner_texts()
    assert len(shown) == 10 and all("T02:30:00+0" in r or "T03:00:00+02:00" in r for r in shown)
    await tab.shot("job-new-preview")
    assert [j for j in (await api_get(world, "/v1/jobs?limit=500"))["items"]
            if j["name"] == "ui-created"] == []  # the preview created nothing
    await tab.page.click("button:text('Create job ui-created')")
    await tab.text("p.flash").get_by_text("Job ui-created created.").wait_for()
    job = tab.page.url.rstrip("/").rsplit("/", 1)[1]
    got = await api_get(world, f"/v1/jobs/{job}")
    assert (got["name"], got["task"], got["payload"], got["schedule"]["cron"],
            got["schedule"]["timezone"]) == ("ui-created", "greet", {"who": "ui-created"},
                                             "30 2 * * *", "Europe/Berlin")
    [row] = await _audit(world, "job.create", job)
    assert (row["outcome"], row["actor"], row["after"]["reason"]) == (
        "done", "tenant:acme", "ticket OPS-7")
    await _follow_audit_link(tab, "job.create", "ticket OPS-7")
    assert tab.errors == []


async def test_edit_a_job_after_previewing_its_new_occurrences(tab: Tab, world: World) -> None:
    job = await _job(world, "ui-edited")
    await tab.login(world.key)
    await tab.goto(f"/ui/jobs/{job}")
    await tab.page.fill("#edit input[name=cron]", "15 4 * * *")
    await tab.page.fill("#edit input[name=reason]", "later, after the backup")
    await tab.page.click("#edit button:text('Preview')")
    after = tab.text("table.upcoming-after tbody tr")
    await after.first.wait_for()
    assert all("T04:15:00+0" in r for r in await after.all_inner_texts())
    assert all("T03:00:00+0" in r for r in
               await tab.text("table.upcoming-before tbody tr").all_inner_texts())
    assert "Would change: schedule" in await tab.text("section.confirm").inner_text()
    assert (await api_get(world, f"/v1/jobs/{job}"))["version"] == 1  # the preview: nothing
    await tab.page.click("section.confirm button:text('Save')")
    await tab.text("p.flash").get_by_text("Job ui-edited edited: schedule").wait_for()
    got = await api_get(world, f"/v1/jobs/{job}")
    assert (got["version"], got["schedule"]["cron"]) == (2, "15 4 * * *")
    saved = [r for r in await _audit(world, "job.update", job) if r["after"]]
    assert [r["after"]["reason"] for r in saved] == ["later, after the backup"]
    await _follow_audit_link(tab, "job.update", "later, after the backup")
    assert tab.errors == []


async def test_pause_with_a_reason_resume_and_trigger_now(tab: Tab, world: World) -> None:
    job = await _job(world, "ui-steered")
    await tab.login(world.key)
    await tab.goto(f"/ui/jobs/{job}")
    said = await _act(tab, "Pause", "the upstream feed is late")
    assert "Pause job ui-steered" in said and "no runs are created until it is resumed" in said
    await tab.text("p.flash").get_by_text("Job paused: ui-steered").wait_for()
    assert (await api_get(world, f"/v1/jobs/{job}"))["status"] == "paused"
    events = (await api_get(world, f"/v1/jobs/{job}/events"))["items"]
    assert [e["data"]["reason"] for e in events if e["type"] == "JobPaused"] == [
        "the upstream feed is late"]
    status = await tab.text("table.kv").inner_text()
    assert "the upstream feed is late" in status and "none while paused" in status
    await tab.shot("job-paused")
    await _follow_audit_link(tab, "job.pause", "the upstream feed is late")

    await tab.goto(f"/ui/jobs/{job}")
    await _act(tab, "Resume", "feed arrived")
    await tab.text("p.flash").get_by_text("Job resumed: ui-steered").wait_for()
    assert (await api_get(world, f"/v1/jobs/{job}"))["status"] == "active"
    [resumed] = await _audit(world, "job.resume", job)
    assert resumed["outcome"] == "done" and "feed arrived" in resumed["detail"]

    said = await _act(tab, "Trigger now", "rerun for the late feed")
    assert "one extra run (marked manual)" in said
    await tab.text("p.flash").get_by_text("Triggered: a manual run of job ui-steered").wait_for()
    run = tab.page.url.rstrip("/").rsplit("/", 1)[1]
    got = await api_get(world, f"/v1/runs/{run}")
    assert (got["job_id"], got["trigger"]) == (job, "manual")
    [triggered] = await _audit(world, "job.trigger", job)
    assert triggered["after"]["run_id"] == run and "rerun for the late feed" in triggered["detail"]
    assert tab.errors == []


async def test_pause_from_the_jobs_list_comes_back_to_it(tab: Tab, world: World) -> None:
    job = await _job(world, "ui-listed")
    await tab.login(world.key)
    await tab.goto("/ui/jobs")
    await _act(tab, "Pause", "from the list", where=f"tr:has(a[href='/ui/jobs/{job}'])")
    await tab.text("p.flash").get_by_text("Job paused: ui-listed").wait_for()
    assert tab.page.url.endswith("/ui/jobs")
    assert (await api_get(world, f"/v1/jobs/{job}"))["status"] == "paused"
    assert tab.errors == []


async def test_bad_cron_or_bad_json_changes_nothing(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    before = (await api_get(world, "/v1/jobs?limit=500"))["items"]
    for field, value, told in (("#f-cron", "61 2 * * *", "schedule.cron"),
                               ("#f-payload", "{not json", "not JSON")):
        await tab.goto("/ui/jobs/new")
        await tab.page.fill("#f-name", "ui-never")
        await tab.page.fill(field, value)
        await tab.page.click("button:text-is('Preview')")
        problem = tab.text("div.problem")
        await problem.wait_for()
        assert told in await problem.inner_text()
        assert await tab.text("button:text('Create job')").count() == 0
        assert await tab.page.input_value(field) == value  # the form keeps what was typed
    assert (await api_get(world, "/v1/jobs?limit=500"))["items"] == before
    assert all("422" in e for e in tab.errors)  # the refused previews' status, nothing else


async def test_a_viewer_sees_no_job_action_and_a_forged_one_is_refused_for_its_role(
        tab: Tab, world: World) -> None:
    job = await _job(world, "ui-viewed")
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/keys", json={"name": "ui-job-viewer", "role": "viewer"},
                           headers=world.h())
        assert r.status_code == 201, r.text
        viewer = r.json()["key"]
    await tab.login(viewer)
    for path in ("/ui/jobs", f"/ui/jobs/{job}"):
        await tab.goto(path)
        await tab.text("h1").wait_for()
        assert await tab.text("a:text('New job')").count() == 0, path
        assert await tab.text("main details.action").count() == 0, path
        assert await tab.text("main form[method=post]").count() == 0, path
    await tab.goto("/ui/jobs/new")
    await tab.text("p.error").get_by_text("a viewer key may not submit").wait_for()
    token = await tab.page.locator("nav input[name=_csrf]").get_attribute("value")
    for path, form in ((f"/ui/jobs/{job}/pause", {"reason": "forged"}),
                       (f"/ui/jobs/{job}/trigger", {}),
                       ("/ui/jobs/new", {"name": "forged", "previewed": "x"})):
        r = await tab.page.request.post(f"{tab.base}{path}", form={"_csrf": token, **form},
                                        max_redirects=0)
        assert r.status == 403, path
        assert "a viewer key may not" in await r.text(), path
    got = await api_get(world, f"/v1/jobs/{job}")
    assert (got["status"], got["runs_created"]) == ("active", 0)
    assert [(a["outcome"], a["role"]) for a in await _audit(world, "job.pause", job)] == [
        ("refused", "viewer")]
    assert tab.errors == []


@pytest.mark.skipif(not axe.available(), reason=f"{axe.SOURCE} is missing (make assets: "
                                                "infra/axe.sh)")
async def test_the_job_pages_with_their_forms_open_have_no_serious_violation(
        tab: Tab, world: World) -> None:
    job = await _job(world, "ui-a11y")
    await tab.login(world.key)
    found: list[axe.Violation] = []
    await tab.goto("/ui/jobs/new")
    found.extend(await axe.violations(tab.page, "/ui/jobs/new"))
    await tab.page.fill("#f-name", "ui-a11y-new")
    await tab.page.click("button:text-is('Preview')")
    await tab.text("table.upcoming").wait_for()
    found.extend(await axe.violations(tab.page, "/ui/jobs/preview"))
    await tab.goto(f"/ui/jobs/{job}")
    for summary in await tab.text("div.actions details.action summary").all():
        await summary.click()
    found.extend(await axe.violations(tab.page, f"/ui/jobs/{job} (actions open)"))
    await tab.shot("job-actions-open")
    await tab.page.fill("#edit input[name=cron]", "15 4 * * *")
    await tab.page.click("#edit button:text('Preview')")
    await tab.text("table.upcoming-after").wait_for()
    found.extend(await axe.violations(tab.page, f"/ui/jobs/{job}/edit"))
    await tab.shot("job-edit-preview")
    await tab.goto(f"/ui/jobs/{job}/backfill?from=2026-03-27T12:00:00&to=2026-03-30T00:00:00")
    found.extend(await axe.violations(tab.page, f"/ui/jobs/{job}/backfill"))
    await tab.goto("/ui/jobs")
    for summary in (await tab.text("table.jobs details.action summary").all())[:3]:
        await summary.click()
    found.extend(await axe.violations(tab.page, "/ui/jobs (actions open)"))
    assert found == [], "\n".join(str(v) for v in found)
