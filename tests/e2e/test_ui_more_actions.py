"""The action pattern beyond a run's and a job's pages (issue 41 item 3), in a real headless
Chromium against the services as processes (tests/helpers/ui.py): a dead letter's replay, a
DAG run's cancel and a bulk cancel, each opened to its confirmation (what will change), sent
with a reason, its effect read back through the HTTP API, and the result's flash followed to
its audit entry showing that reason. A viewer is offered none of these forms, and axe finds no
serious violation on the pages with their forms open."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import axe, ui
from tests.helpers.ui import Tab, World, act, api_get, audit_entry, shown_id, until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
world, browser, tab = ui.world, ui.browser, ui.tab


async def test_a_dead_letter_is_replayed_with_a_reason_and_its_audit_entry_linked(
        tab: Tab, world: World) -> None:
    await tab.login(world.key)
    await tab.goto(f"/ui/dead-letters/{world.boom_run}")
    confirm = await act(tab, "details.replay", "upstream fixed, ticket 88",
                         check=("#edit-payload",), fill={"#payload": '{"n": 3, "fixed": true}'})
    assert confirm.startswith(f"Replay dead letter {shown_id(world.boom_run)} of job boom-now: "
                              "a new run of task boom is created"), confirm
    await tab.text("p.flash").get_by_text("Replayed with the edited payload").wait_for()
    new_run = tab.page.url.rstrip("/").rsplit("/", 1)[1]
    run = await api_get(world, f"/v1/runs/{new_run}")
    assert run["replay_of"] == world.boom_run and run["payload"] == {"n": 3, "fixed": True}
    assert (await api_get(world, f"/v1/dead-letters/{world.boom_run}"))["replays"] >= 1
    entry = await audit_entry(tab, world, "dead_letter.replay", "upstream fixed, ticket 88")
    assert entry["target_id"] == world.boom_run
    assert tab.errors == []


async def _dag_run(api: httpx.AsyncClient, world: World) -> str:
    """A running DAG run that stays so: its first node's task has no worker."""
    r = await api.post("/v1/dags", json={
        "name": "more-actions-stuck", "nodes": [{"key": "wait", "task": "ui.nobody"},
                                                {"key": "after", "task": "greet"}],
        "edges": [{"from": "wait", "to": "after"}]}, headers=world.h())
    assert r.status_code == 201, r.text
    r = await api.post(f"/v1/dags/{r.json()['id']}/runs", headers=world.h())
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def test_a_dag_run_is_cancelled_with_a_reason_and_its_audit_entry_linked(
        tab: Tab, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        dag_run = await _dag_run(api, world)

        async def state() -> str:
            return (await api.get(f"/v1/dag-runs/{dag_run}", headers=world.h())).json()["state"]
        await until(lambda: _is(state(), "running"), "the DAG run starts")
        await tab.login(world.key)
        await tab.goto(f"/ui/dag-runs/{dag_run}")
        await tab.text(".live .dag-graph").wait_for()  # refreshed live, not under an open form
        confirm = await act(tab, "details#dag-run-cancel", "wrong input file")
        assert confirm.startswith(f"Cancel DAG run {shown_id(dag_run)} of more-actions-stuck: "
                                  "its waiting nodes never start"), confirm
        await tab.text("p.flash").get_by_text("DAG run cancelled:").wait_for()
        await until(lambda: _is(state(), "cancelled"), "the DAG run ends cancelled")
        events = (await api.get(f"/v1/dag-runs/{dag_run}/events", headers=world.h())).json()
    [cancelled] = [e for e in events["items"] if e["type"] == "DagRunCancelled"]
    assert cancelled["data"]["reason"] == "wrong input file"  # the command's own reason
    assert cancelled["actor"] == "tenant:acme"
    await audit_entry(tab, world, "dag_run.cancel", "wrong input file")
    assert tab.errors == []


async def test_a_bulk_cancel_is_started_with_a_reason_and_its_audit_entry_linked(
        tab: Tab, world: World) -> None:
    n = 3
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=30) as api:
        r = await api.post("/v1/jobs/batch", json={"jobs": [
            {"name": f"more-bulk-{i}", "task": "more.bulk"} for i in range(n)]},
            headers=world.h())  # no worker serves more.bulk
        assert r.status_code == 200, r.text

        async def unfinished() -> int:
            r = await api.post("/v1/operations", json={
                "kind": "cancel", "filter": {"task": "more.bulk"}, "dry_run": True},
                headers=world.h())
            return r.json()["count"]
        await until(lambda: _is(unfinished(), n), f"{n} unfinished runs of more.bulk")
        await tab.login(world.key)
        await tab.goto("/ui/runs?task=more.bulk")
        await tab.text("a.bulk[data-kind=cancel]").click()
        await tab.page.wait_for_url("**/ui/operations/new?*")
        assert await tab.text("#confirm-count").inner_text() == f"{n} runs"
        await tab.page.fill("#op-reason", "a bad deploy")
        await tab.page.click("#confirm")
        await tab.page.wait_for_url("**/ui/operations/*-*")
        await tab.text("p.flash").get_by_text(f"Cancel of {n} runs started.").wait_for()
        await until(lambda: _is(unfinished(), 0), "every run of more.bulk cancelled")
    entry = await audit_entry(tab, world, "operation.start", "a bad deploy")
    [op] = [o for o in (await api_get(world, "/v1/operations"))["items"]
            if o["filter"] == {"task": "more.bulk"}]
    assert entry["target_id"] == op["id"] and op["actor"] == "tenant:acme"
    assert tab.errors == []


async def _is(value: Any, expected: Any) -> bool:
    return await value == expected


async def test_a_viewer_is_offered_none_of_these_actions(tab: Tab, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/keys", json={"name": "more-viewer", "role": "viewer"},
                           headers=world.h())
        assert r.status_code == 201, r.text
        viewer = r.json()["key"]
    await tab.login(viewer)
    for path in (f"/ui/dead-letters/{world.boom_run}", "/ui/pools", f"/ui/runs/{world.greet_run}"):
        r = await tab.goto(path)
        assert r.status == 200, path
        await tab.text("h1").wait_for()
        assert await tab.text("main details.action").count() == 0, path
        assert await tab.text("main form[method=post]").count() == 0, path
    assert tab.errors == []


@pytest.mark.skipif(not axe.available(), reason=f"{axe.SOURCE} is missing (make assets: "
                                                "infra/axe.sh)")
async def test_the_pages_have_no_serious_violation_with_their_forms_open(
        tab: Tab, world: World) -> None:
    await tab.login(world.key)
    found = []
    for path in (f"/ui/dead-letters/{world.boom_run}", "/ui/pools", f"/ui/runs/{world.greet_run}"):
        await tab.goto(path)
        for summary in await tab.text("main details.action summary").all():
            await summary.click()
        found.extend(await axe.violations(tab.page, f"{path} (forms open)"))
    assert found == [], "\n".join(map(str, found))
