"""A run's hold in the web UI, in a real headless Chromium against the services as processes
(tests/helpers/ui.py): an operator holds a finished run with a reason and releases it from the
run's page; the API, the timeline and the audit trail agree (docs/RETENTION.md, "Holds")."""

from __future__ import annotations

import pytest

from tests.helpers import ui
from tests.helpers.ui import Tab, World, api_get

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
world, browser, tab = ui.world, ui.browser, ui.tab


async def test_an_operator_holds_and_releases_a_run_from_its_page(tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto(f"/ui/runs/{world.greet_run}")
    assert (await api_get(world, f"/v1/runs/{world.greet_run}"))["held"] is None
    await tab.page.click("section.hold summary:text('Hold')")  # its confirmation
    await tab.page.fill("#hold-reason", "legal hold, ticket 4711")
    await tab.page.click("section.hold button:text('Hold')")
    await tab.text("p.flash").get_by_text("Held.").wait_for()
    held = await tab.text("section.hold p.held").inner_text()
    assert "legal hold, ticket 4711" in held and "tenant:acme" in held
    shown = (await api_get(world, f"/v1/runs/{world.greet_run}"))["held"]
    assert shown["reason"] == "legal hold, ticket 4711" and shown["by"] == "tenant:acme"

    await tab.page.click("section.hold summary:text('Release')")
    await tab.page.fill("#release-reason", "ticket 4711 closed")
    await tab.page.click("section.hold button:text('Release')")
    await tab.text("p.flash").get_by_text("Released.").wait_for()
    await tab.page.locator("section.hold summary:text('Hold')").wait_for()  # the form again
    assert (await api_get(world, f"/v1/runs/{world.greet_run}"))["held"] is None
    events = (await api_get(world, f"/v1/runs/{world.greet_run}/events"))["items"]
    kinds = [(e["type"], e["actor"]) for e in events if e["type"] in ("RunHeld", "RunReleased")]
    assert kinds == [("RunHeld", "tenant:acme"), ("RunReleased", "tenant:acme")]
    audit = (await api_get(world, "/v1/audit?action=run.hold"))["items"]
    assert [a["outcome"] for a in audit if a["target_id"] == world.greet_run] == ["done"]
    # the flash's link: the release's audit entry, its reason shown
    await tab.text("p.flash a:text('See its audit entry')").click()
    await tab.page.wait_for_url("**/ui/audit?request_id=*")
    entry = await tab.text("section.audit-entry").inner_text()
    assert "run.release" in entry and "reason: ticket 4711 closed" in entry
    assert tab.errors == []
