"""Defining a DAG and starting it from the web UI (issue 41 item 3), through the api's own app
over the real PostgreSQL: the pasted definition's graph is drawn before anything is saved,
the save stores only what was previewed (the DAG then read back through /v1/dags), a bad
definition shows the same problems POST /v1/dags answers and saves nothing, a run started from
the DAG's page exists through /v1/dag-runs, both actions are audited, and a viewer is told its
role refuses them."""

from __future__ import annotations

import json
import re

import asyncpg
import httpx
import pytest

from tests.helpers.api import auth, issue
from tests.helpers.integration import login, new_tenant

pytestmark = pytest.mark.integration
PREVIEWED = re.compile(r'name="previewed" value="([0-9a-f]*)"')
DEFINITION = {"nodes": [{"key": "extract", "task": "etl.extract"},
                        {"key": "load", "task": "etl.load"}],
              "edges": [{"from": "extract", "to": "load"}]}


async def _dags(client: httpx.AsyncClient, key: str) -> list[dict]:
    r = await client.get("/v1/dags", headers=auth(key))
    assert r.status_code == 200, r.text
    return r.json()["items"]


async def test_a_dag_is_previewed_then_saved_and_started(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    csrf = await login(client, key)
    text = json.dumps(DEFINITION)
    preview = await client.post("/ui/dags/preview", data={
        "_csrf": csrf, "name": "nightly-etl", "definition": text, "previewed": ""})
    assert preview.status_code == 200, preview.text
    assert 'data-key="extract"' in preview.text and 'data-key="load"' in preview.text
    assert "Saving defines a new DAG &#39;nightly-etl&#39;, version 1." in preview.text
    assert await _dags(client, key) == []  # a preview saves nothing
    previewed = PREVIEWED.search(preview.text).group(1)
    saved = await client.post("/ui/dags/new", data={
        "_csrf": csrf, "name": "nightly-etl", "definition": text, "previewed": previewed,
        "reason": "the nightly load"})
    assert saved.status_code == 303, saved.text
    [dag] = await _dags(client, key)
    assert (dag["name"], dag["version"], dag["node_count"]) == ("nightly-etl", 1, 2)
    assert saved.headers["location"] == f"/ui/dags/{dag['id']}"
    page = await client.get(saved.headers["location"])
    assert "DAG nightly-etl defined, version 1." in page.text  # the flash
    assert 'href="/ui/audit?request_id=' in page.text  # its audit entry linked
    assert "Start a run of DAG nightly-etl (version 1, 2 nodes)" in page.text
    started = await client.post(f"/ui/dags/{dag['id']}/runs", data={
        "_csrf": csrf, "reason": "a first try"})
    assert started.status_code == 303, started.text
    run_id = started.headers["location"].rsplit("/", 1)[1]
    r = await client.get(f"/v1/dag-runs/{run_id}", headers=auth(key))
    assert r.status_code == 200 and r.json()["dag_id"] == dag["id"], r.text
    async with pool.acquire() as conn:
        actions = [(r["action"], r["detail"]) for r in await conn.fetch(
            "SELECT action, detail FROM audit WHERE target_id = $1 AND outcome = 'done' "
            "ORDER BY recorded_at", dag["id"])]
    assert actions == [("dag.define", "reason: the nightly load"),
                       ("dag.run", "reason: a first try")]


async def test_a_definition_changed_after_its_preview_is_not_saved(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    csrf = await login(client, key)
    preview = await client.post("/ui/dags/preview", data={
        "_csrf": csrf, "name": "etl", "definition": json.dumps(DEFINITION), "previewed": ""})
    previewed = PREVIEWED.search(preview.text).group(1)
    edited = {**DEFINITION, "nodes": [*DEFINITION["nodes"], {"key": "report", "task": "r"}]}
    r = await client.post("/ui/dags/new", data={
        "_csrf": csrf, "name": "etl", "definition": json.dumps(edited), "previewed": previewed})
    assert r.status_code == 409, r.text
    assert "changed since its preview" in r.text and 'data-key="report"' in r.text
    assert await _dags(client, key) == []


async def test_a_next_version_says_so_and_a_cycle_is_shown_not_saved(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    r = await client.post("/v1/dags", json={"name": "etl", **DEFINITION}, headers=auth(key))
    assert r.status_code == 201, r.text
    csrf = await login(client, key)
    bigger = {**DEFINITION, "nodes": [*DEFINITION["nodes"], {"key": "report", "task": "r"}],
              "edges": [*DEFINITION["edges"], {"from": "load", "to": "report"}]}
    preview = await client.post("/ui/dags/preview", data={
        "_csrf": csrf, "name": "etl", "definition": json.dumps(bigger), "previewed": ""})
    assert "Saving makes version 2 of &#39;etl&#39; (version 1 today)" in preview.text
    cycle = {**DEFINITION, "edges": [{"from": "extract", "to": "load"},
                                     {"from": "load", "to": "extract"}]}
    for text in (json.dumps(cycle), "{not json", json.dumps(["a list"])):
        r = await client.post("/ui/dags/preview", data={
            "_csrf": csrf, "name": "etl", "definition": text, "previewed": ""})
        assert r.status_code == 422, r.text
        assert "Not saved" in r.text and "<svg" not in r.text
    r = await client.post("/ui/dags/new", data={
        "_csrf": csrf, "name": "etl", "definition": json.dumps(cycle), "previewed": ""})
    assert r.status_code == 422 and "cycle" in r.text, r.text
    [dag] = await _dags(client, key)
    assert dag["version"] == 1


async def test_a_viewer_is_refused_for_its_role(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    viewer = (await issue(client, key, "viewer"))["key"]
    r = await client.post("/v1/dags", json={"name": "etl", **DEFINITION}, headers=auth(key))
    dag_id = r.json()["id"]
    csrf = await login(client, viewer)
    form = await client.get("/ui/dags/new")
    assert form.status_code == 200 and "<textarea" not in form.text
    assert "viewer" in form.text  # the refusal names the role
    assert "Define a DAG" not in (await client.get("/ui/dags")).text
    assert "Start a run" not in (await client.get(f"/ui/dags/{dag_id}")).text
    for path in ("/ui/dags/preview", "/ui/dags/new", f"/ui/dags/{dag_id}/runs"):
        r = await client.post(path, data={"_csrf": csrf, "name": "x",
                                          "definition": json.dumps(DEFINITION)})
        assert r.status_code == 403, (path, r.text)
        assert "viewer" in r.text and "CSRF" not in r.text
    r = await client.get(f"/v1/dags/{dag_id}/runs", headers=auth(key))
    assert r.json()["items"] == []
