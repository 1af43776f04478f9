"""The backfill form of a job's page in a real headless Chromium, on the fixtures of
`helpers/ui.py` (the five services as processes): 'Preview' lists the slots in local and UTC time
across a DST change and changes nothing; 'Backfill N slots' (CSRF-checked, audited) then creates
exactly those runs."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import ui
from tests.helpers.ui import Tab, World, api_get

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
# the UI fixtures, for this module: its own cluster, browser and a fresh tab per test
world, browser, tab = ui.world, ui.browser, ui.tab


async def test_a_backfill_is_previewed_slot_by_slot_then_confirmed(tab: Tab, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/jobs", headers=world.h(), json={
            "name": "backfill-me", "task": "greet", "payload": {"who": "backfill"},
            "schedule": {"cron": "30 2 * * *", "timezone": "Europe/Berlin"}})
        assert r.status_code == 201, r.text
        job = r.json()["id"]

    async def changes() -> tuple[list[str], list[str]]:
        events = (await api_get(world, f"/v1/jobs/{job}/events"))["items"]
        runs = (await api_get(world, f"/v1/runs?job_id={job}"))["items"]
        return [e["type"] for e in events], sorted(r["scheduled_for"] for r in runs)

    await tab.login(world.key)
    await tab.goto(f"/ui/jobs/{job}")
    await tab.page.fill("#backfill input[name=from]", "2026-03-27T12:00:00")
    await tab.page.fill("#backfill input[name=to]", "2026-03-30T00:00:00")
    await tab.page.click("#backfill button:text('Preview')")
    rows = tab.text("table.backfill-slots tbody tr")
    await rows.first.wait_for()
    shown = [await rows.nth(i).inner_text() for i in range(await rows.count())]
    assert len(shown) == 2
    assert "2026-03-28T02:30:00+01:00" in shown[0] and "create" in shown[0]
    assert "2026-03-29T03:00:00+02:00" in shown[1] and "create" in shown[1]  # after the gap
    await tab.shot("job-backfill-preview")
    assert await changes() == (["JobCreated"], [])  # the preview changed nothing

    refused = await tab.page.request.post(f"{tab.base}/ui/jobs/{job}/backfill", form={
        "from": "2026-03-27T12:00:00Z", "to": "2026-03-30T00:00:00Z"}, max_redirects=0)
    assert refused.status == 403  # no CSRF token
    assert await changes() == (["JobCreated"], [])

    await tab.page.click("button:text('Backfill 2 slots')")
    await tab.text("p.flash").get_by_text("Backfill: 2 runs created").wait_for()
    types, runs = await changes()
    assert types == ["JobCreated", "BackfillRequested"]
    assert runs == ["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z"]
    audit = (await api_get(world, f"/v1/audit?action=job.backfill&target_id={job}"))["items"]
    assert [(a["outcome"], a["actor"]) for a in audit] == [
        ("done", "tenant:acme"), ("refused", "tenant:acme")]
    assert tab.errors == []
