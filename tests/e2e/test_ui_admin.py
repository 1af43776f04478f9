"""The admin's pages of the web UI in a real headless Chromium, on the fixtures of
`tests/helpers/ui.py`
(the five services as processes): the admin key logs in to the tenants page, creates a tenant
(its key shown once), sets its weight, limits and API rate, and acts for a tenant (its pages, its
actions audited with the admin as actor); a tenant operator's session is offered none of it and
refused all of it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import ui
from tests.helpers.ui import Tab, World, shown_id

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
# the UI fixtures, for this module: its own cluster, browser and a fresh tab per test
world, browser, tab = ui.world, ui.browser, ui.tab


async def admin_get(world: World, path: str, tenant: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {world.cluster.admin_key}"}
    if tenant:
        headers["X-Ostinato-Tenant"] = tenant
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.get(path, headers=headers)
        assert r.status_code == 200, r.text
        return r.json()


async def tenants(world: World) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in (await admin_get(world, "/v1/tenants?limit=500"))["items"]}


async def admin_login(tab: Tab, world: World) -> None:
    await tab.goto("/ui/login")
    await tab.page.fill("#api_key", world.cluster.admin_key)
    await tab.page.click("form.login button[type=submit]")
    await tab.page.wait_for_url("**/ui/tenants")


async def test_the_admin_creates_a_tenant_and_sets_its_weight_and_limits(
        tab: Tab, world: World) -> None:
    await admin_login(tab, world)
    rows = tab.text("table.tenants tbody tr")
    await rows.first.wait_for()
    listed = await rows.all_inner_texts()
    assert {"acme", "globex"} <= {row.split("\t")[0] for row in listed}
    assert len(listed) == len(await tenants(world))
    nav = await tab.text("nav a").all_inner_texts()
    assert nav == ["Tenants"]  # acting for no tenant: no tenant's pages offered
    assert await tab.text("nav .who").inner_text() == "admin"
    r = await tab.goto("/ui/runs")  # a tenant's page before choosing one: the tenants page
    assert r.status == 200 and tab.page.url.endswith("/ui/tenants")

    await tab.page.fill("#tenant-name", "initech")
    await tab.page.fill("form.create-tenant input[name=weight]", "3")
    await tab.page.click("form.create-tenant button[type=submit]")
    key = await tab.text("#new-key").inner_text()
    assert key.startswith("ost_")
    made = (await tenants(world))["initech"]
    assert made["weight"] == 3
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.get("/v1/runs", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text  # the key shown is the new tenant's
    await tab.goto("/ui/tenants")
    assert key not in await tab.page.content()  # shown once
    await tab.text("table.tenants tbody tr:has(a:text-is('initech'))").wait_for()
    await tab.shot("tenants")

    await tab.page.click("table.tenants a:text-is('initech')")
    await tab.page.click("details.tenant-limits summary")  # its confirmation
    await tab.page.fill("details.tenant-limits input[name=weight]", "5")
    await tab.page.fill("details.tenant-limits input[name=max_concurrency]", "7")
    await tab.page.fill("details.tenant-limits input[name=reason]", "initech's launch")
    await tab.page.click("details.tenant-limits button[type=submit]")
    await tab.text("p.flash").get_by_text("Weight and limits set.").wait_for()
    assert (await tenants(world))["initech"]["weight"] == 5
    await tab.page.click("details.tenant-api summary")
    await tab.page.fill("details.tenant-api input[name=rate_per_second]", "20")
    await tab.page.click("details.tenant-api button[type=submit]")
    await tab.text("p.flash").get_by_text("API rate set.").wait_for()
    limits = {(x["scope"], x["name"]): x
              for x in (await admin_get(world, "/v1/limits", made["id"]))["items"]}
    assert limits[("tenant", "")]["max_concurrency"] == 7
    assert limits[("tenant", "")]["rate_per_second"] is None
    assert limits[("api", "")]["rate_per_second"] == 20
    # the form shows what is set, so sending it again changes nothing but what is edited
    assert await tab.page.input_value("details.tenant-limits input[name=max_concurrency]") \
        == "7"
    assert await tab.page.input_value("details.tenant-limits input[name=weight]") == "5"

    audit = (await admin_get(world, "/v1/audit", made["id"]))["items"]
    assert sorted((a["action"], a["target_id"], a["outcome"], a["actor"]) for a in audit) == [
        ("limit.set", "api", "done", "admin"), ("limit.set", "tenant", "done", "admin"),
        ("tenant.create", made["id"], "done", "admin")]
    [weighted] = [a for a in audit if a["target_id"] == "tenant"]
    assert weighted["after"]["max_concurrency"] == 7
    assert weighted["detail"] == "reason: initech's launch"
    assert tab.errors == []


async def test_bad_input_and_a_missing_csrf_token_change_nothing(tab: Tab, world: World) -> None:
    await admin_login(tab, world)
    before = await tenants(world)
    r = await tab.page.request.post(f"{tab.base}/ui/tenants", form={"name": "hooli"},
                                    max_redirects=0)
    assert r.status == 403  # no CSRF token
    csrf = await tab.page.get_attribute("nav input[name=_csrf]", "value")
    for name in ("Not A Name", "a\x00b", ""):
        r = await tab.page.request.post(f"{tab.base}/ui/tenants", form={
            "_csrf": csrf, "name": name}, max_redirects=0)
        assert r.status in (400, 422), (name, r.status)
    acme = before["acme"]["id"]
    r = await tab.page.request.post(f"{tab.base}/ui/tenants/{acme}/limits", form={
        "_csrf": csrf, "weight": "-1"}, max_redirects=0)
    assert r.status == 422
    r = await tab.page.request.post(f"{tab.base}/ui/tenants/{acme}/limits", form={
        "_csrf": csrf, "max_concurrency": "many"}, max_redirects=0)
    assert r.status == 422
    unknown = "00000000-0000-0000-0000-000000000001"
    assert (await tab.goto(f"/ui/tenants/{unknown}")).status == 404
    r = await tab.page.request.post(f"{tab.base}/ui/tenants/{unknown}/act", form={
        "_csrf": csrf}, max_redirects=0)
    assert r.status == 404
    assert await tenants(world) == before
    assert not [x for x in (await admin_get(world, "/v1/limits", acme))["items"]
                if x["scope"] == "tenant"]
    rows = (await admin_get(world, "/v1/audit?action=limit.set", acme))["items"]
    assert [(a["outcome"], a["status"], a["actor"]) for a in rows] == [
        ("rejected", 422, "admin")] * 2


async def test_the_admin_acts_for_a_tenant_and_its_actions_name_the_admin(
        tab: Tab, world: World) -> None:
    await admin_login(tab, world)
    await tab.text("table.tenants tbody tr:has(a:text-is('acme'))").locator(
        "button:text('Act for')").click()
    await tab.page.wait_for_url("**/ui/runs")
    await tab.text("div.acting").get_by_text("Acting for tenant acme").wait_for()
    assert await tab.text("nav .who b").inner_text() == "acme"
    assert "Runs" in await tab.text("nav").inner_text()
    shown = await tab.text("table.runs tbody").inner_text()
    theirs = (await admin_get(world, "/v1/runs", (await tenants(world))["acme"]["id"]))["items"]
    assert len(theirs) == await tab.text("table.runs tbody tr").count()
    assert shown_id(world.greet_run) in shown
    assert shown_id(world.other_run) not in shown  # globex's run is not acme's
    r = await tab.page.request.get(f"{tab.base}/ui/runs/{world.other_run}")  # the session's
    assert r.status == 404
    await tab.shot("tenant-acting")

    await tab.goto(f"/ui/jobs/{world.cron_job}")
    await tab.page.click("div.actions summary:text('Pause')")  # its confirmation
    await tab.page.click("div.actions button:text('Pause')")
    await tab.text("p.flash").get_by_text("Job paused").wait_for()
    job = await ui.api_get(world, f"/v1/jobs/{world.cron_job}")  # acme's own key
    assert job["status"] == "paused"
    events = (await ui.api_get(world, f"/v1/jobs/{world.cron_job}/events"))["items"]
    assert [e["actor"] for e in events if e["type"] == "JobPaused"] == ["admin"]
    rows = (await ui.api_get(
        world, f"/v1/audit?action=job.pause&target_id={world.cron_job}"))["items"]
    assert [(a["outcome"], a["actor"], a["role"], a["key_id"]) for a in rows] == [
        ("done", "admin", "admin", None)]

    await tab.goto("/ui/keys")  # the tenant's page names the tenant acted for, not the admin
    info = await tab.text("table.kv").first.inner_text()
    assert "acme" in info and "admin" in info  # tenant acme, signed in with: admin
    await tab.page.click("div.acting button:text('Back to the tenants')")
    await tab.page.wait_for_url("**/ui/tenants")
    assert await tab.text("div.acting").count() == 0
    assert await tab.text("nav a").all_inner_texts() == ["Tenants"]
    rows = (await ui.api_get(world, "/v1/audit?target_kind=tenant"))["items"]
    acme = (await tenants(world))["acme"]["id"]
    assert [(a["action"], a["outcome"], a["actor"], a["target_id"]) for a in rows
            if a["actor"] == "admin"] == [
        ("tenant.act_for_end", "done", "admin", acme), ("tenant.act_for", "done", "admin", acme),
        ("tenant.create", "done", "admin", acme)]  # in acme's own trail
    assert tab.errors == []


async def test_a_tenant_operator_is_offered_no_tenants_page_and_refused_it(
        tab: Tab, world: World) -> None:
    await tab.login(world.key)
    assert await tab.text("nav a:text('Tenants')").count() == 0
    assert await tab.text("nav a:text('Runs')").count() == 1
    r = await tab.goto("/ui/tenants")
    assert r.status == 403
    await tab.goto("/ui/runs")
    csrf = await tab.page.get_attribute("nav input[name=_csrf]", "value")
    before = await tenants(world)
    r = await tab.page.request.post(f"{tab.base}/ui/tenants", form={
        "_csrf": csrf, "name": "sneaky"}, max_redirects=0)
    assert r.status == 403
    globex = before["globex"]["id"]
    for path in (f"/ui/tenants/{globex}/limits", f"/ui/tenants/{globex}/act"):
        r = await tab.page.request.post(f"{tab.base}{path}", form={
            "_csrf": csrf, "weight": "999"}, max_redirects=0)
        assert r.status == 403, path
    assert await tenants(world) == before
    assert (await tab.goto(f"/ui/runs/{world.other_run}")).status == 404  # still acme's only
    rows = (await ui.api_get(world, "/v1/audit?action=tenant.create"))["items"]
    assert [(a["outcome"], a["actor"], a["status"], a["target_id"]) for a in rows] == [
        ("refused", "tenant:acme", 403, ""),  # the form above
        ("done", "admin", 201, before["acme"]["id"])]  # acme's own creation, by the fixture
    rows = (await ui.api_get(world, "/v1/audit?action=limit.set"))["items"]
    assert [(a["outcome"], a["status"]) for a in rows if a["actor"] == "tenant:acme"] == [
        ("refused", 403)]
