"""The pages moved to templates (issue 41) through the api's own app over the real PostgreSQL:
the dead letters list and a dead letter (the replay form, a replay through it), the DAG pages
(a run's graph and nodes, its live fragment), the audit page found by a request id; each with
a viewer's session offered no form."""

from __future__ import annotations

import re
import uuid

import asyncpg
import httpx
import pytest

from ostinato.domain import roles
from ostinato.workers import registry
from tests.helpers.api import ADMIN, auth, issue
from tests.helpers.integration import CSRF, dead_letters, login, new_tenant, runs_of

pytestmark = pytest.mark.integration
DAG = {"name": "etl", "nodes": [{"key": "extract", "task": "etl.extract"},
                                {"key": "load", "task": "etl.load"}],
       "edges": [{"from": "extract", "to": "load"}]}


async def _posted(client: httpx.AsyncClient, pool: asyncpg.Pool, path: str,
                  data: dict[str, str]) -> tuple[httpx.Response, asyncpg.Record]:
    """A form posted with its own request id: the response and the action's audit row."""
    request_id = f"ui-form-{uuid.uuid4().hex[:12]}"
    r = await client.post(path, data=data, headers={"X-Request-Id": request_id})
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT * FROM audit WHERE request_id = $1", request_id)
    assert row is not None, (path, r.status_code, r.text)
    return r, row


def _main(page: httpx.Response) -> str:
    assert page.status_code == 200, page.text
    return page.text.split("<main>", 1)[1]


async def test_dead_letters_are_listed_shown_and_replayed(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    csrf = await login(client, key)
    empty = _main(await client.get("/ui/dead-letters"))
    assert "No dead letters: no run has used up its attempts." in empty
    [run_id] = await dead_letters(client, pool, key, ["<b>bad</b>"])
    listed = _main(await client.get("/ui/dead-letters"))
    assert f'href="/ui/dead-letters/{run_id}"' in listed and "<b>bad</b>" not in listed
    assert "1 dead letter: &lt;b&gt;bad&lt;/b&gt; 1" in listed
    none = _main(await client.get("/ui/dead-letters?triage_state=fixed"))
    assert "No dead letters match this filter." in none
    page = _main(await client.get(f"/ui/dead-letters/{run_id}"))
    assert '<label for="payload">' in page and "&#34;n&#34;: 0" in page
    request_key = re.search(r'name="request_key" value="([0-9a-f]+)"', page)[1]  # type: ignore
    r = await client.post(f"/ui/dead-letters/{run_id}/replay", data={
        "_csrf": csrf, "request_key": request_key, "edit": "1", "payload": '{"n": 7}'})
    assert r.status_code == 303, r.text
    new = await client.get(f"/v1/runs/{r.headers['location'].rsplit('/', 1)[1]}",
                           headers=auth(key))
    assert new.json()["replay_of"] == run_id and new.json()["payload"] == {"n": 7}
    # each action's reason is kept in its audit row, the flash links that entry
    r, row = await _posted(client, pool, f"/ui/dead-letters/{run_id}/replay", {
        "_csrf": csrf, "request_key": "second", "reason": "upstream fixed"})
    assert r.status_code == 303 and row["action"] == "dead_letter.replay"
    assert row["detail"] == "reason: upstream fixed" and row["outcome"] == "done"
    flash = _main(await client.get(r.headers["location"]))
    assert f'href="/ui/audit?request_id={row["request_id"]}"' in flash
    r, row = await _posted(client, pool, f"/ui/dead-letters/{run_id}/triage", {
        "_csrf": csrf, "state": "fixed", "reason": "replayed twice"})
    assert r.status_code == 303 and row["action"] == "dead_letter.triage"
    assert row["detail"] == "reason: replayed twice"
    viewer = (await issue(client, key, roles.VIEWER))["key"]
    await login(client, viewer)
    seen = _main(await client.get(f"/ui/dead-letters/{run_id}"))
    assert "method=\"post\"" not in seen and "<textarea" not in seen


async def test_the_dag_pages_show_a_runs_graph_and_nodes(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    await login(client, key)
    assert "docs/DAGS.md" in _main(await client.get("/ui/dags"))
    r = await client.post("/v1/dags", json=DAG, headers=auth(key))
    assert r.status_code == 201, r.text
    dag = r.json()["id"]
    listed = _main(await client.get("/ui/dags"))
    assert f'<a href="/ui/dags/{dag}">etl</a>' in listed
    assert "No runs of this DAG yet." in _main(await client.get(f"/ui/dags/{dag}"))
    r = await client.post(f"/v1/dags/{dag}/runs", headers=auth(key))
    assert r.status_code == 201, r.text
    dag_run = r.json()["id"]
    shown = _main(await client.get(f"/ui/dags/{dag}"))
    assert f'href="/ui/dag-runs/{dag_run}"' in shown and "0 / 2" in shown
    page = _main(await client.get(f"/ui/dag-runs/{dag_run}"))
    assert 'role="group"' in page and 'data-key="extract"' in page
    assert 'class="dag-nodes"' in page and f'data-live="/ui/dag-runs/{dag_run}"' in page
    assert "Cancel DAG run" in page
    fragment = await client.get(f"/ui/dag-runs/{dag_run}", headers={"x-ui-fragment": "1"})
    assert fragment.status_code == 200 and "<main>" not in fragment.text
    assert 'class="dag-nodes"' in fragment.text
    # its cancel: the reason is the command's and the audit row's, the flash links the entry
    csrf = re.search(r'name="_csrf" value="([^"]+)"', page)[1]  # type: ignore[index]
    r, row = await _posted(client, pool, f"/ui/dag-runs/{dag_run}/cancel",
                           {"_csrf": csrf, "reason": "wrong input file"})
    assert r.status_code == 303 and row["action"] == "dag_run.cancel"
    assert row["detail"] == "reason: wrong input file" and row["outcome"] == "done"
    assert f"request_id={row['request_id']}" in _main(await client.get(r.headers["location"]))
    events = (await client.get(f"/v1/dag-runs/{dag_run}/events", headers=auth(key))).json()
    [cancelled] = [e for e in events["items"] if e["type"] == "DagRunCancelled"]
    assert cancelled["data"]["reason"] == "wrong input file"
    viewer = (await issue(client, key, roles.VIEWER))["key"]
    await login(client, viewer)
    seen = _main(await client.get(f"/ui/dag-runs/{dag_run}"))
    assert 'method="post"' not in seen and 'data-key="load"' in seen


async def test_an_actions_audit_entry_is_found_by_its_request_and_spelt_out(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    await login(client, key)
    assert "No control actions yet." in _main(await client.get("/ui/audit"))
    for n, request_id in ((2, "req-first"), (5, "req-second")):
        r = await client.put("/v1/limits/tasks/etl", json={"max_concurrency": n},
                             headers={**auth(key), "X-Request-Id": request_id})
        assert r.status_code == 200, r.text
    page = _main(await client.get("/ui/audit?request_id=req-second"))
    [entry] = re.findall(r'<section class="audit-entry".*?</section>', page, re.S)
    assert "<code>limit.set</code>" in entry and "task:etl" in entry
    change = entry.split("What changed", 1)[1]
    assert re.search(r"<code>max_concurrency</code></td><td><pre[^>]*>2</pre></td>"
                     r"<td><pre[^>]*>5</pre>", change), change
    assert page.count('<tr data-outcome="done">') == 1  # the other request's row is not shown
    assert "No control actions match this filter." in _main(
        await client.get("/ui/audit?request_id=no-such-request"))


async def test_keys_are_issued_shown_once_rotated_and_listed(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    csrf = await login(client, key)
    issued = _main(await client.post("/ui/keys", data={
        "_csrf": csrf, "name": "dash", "role": "viewer", "pools": ""}))
    secret = re.search(r'<pre id="new-key" tabindex="0">(ost_[^<]+)</pre>', issued)[1]  # type: ignore
    assert "<td>dash</td>" in issued and "<td>viewer</td>" in issued
    [made] = [k for k in (await client.get("/v1/keys", headers=auth(key))).json()["keys"]
              if k["name"] == "dash"]
    listed = _main(await client.get("/ui/keys"))
    assert secret not in listed  # shown once
    operator_row, = re.findall(r"<tr data-state=\"active\">(?:(?!</tr>).)*<td>operator</td>"
                               r"(?:(?!</tr>).)*</tr>", listed, re.S)
    assert "Rotate" in operator_row and "Revoke" not in operator_row  # the last operator's
    rotated, row = await _posted(client, pool, f"/ui/keys/{made['id']}/rotate", {
        "_csrf": csrf, "grace_seconds": "3600", "reason": "it leaked"})
    assert re.search(r'<pre id="new-key" tabindex="0">ost_', _main(rotated))
    assert row["action"] == "key.rotate" and row["detail"] == "reason: it leaked"
    assert f"request_id={row['request_id']}" in _main(rotated)  # the flash, on that page
    viewers = _main(await client.get("/ui/keys?role=viewer"))
    assert viewers.count('<tr data-state="rotating">') == 1 and "rotating until" in viewers
    assert viewers.count('<tr data-state="active">') == 1
    assert "No keys match this filter." in _main(await client.get("/ui/keys?role=worker"))
    r, row = await _posted(client, pool, f"/ui/keys/{made['id']}/revoke",
                           {"_csrf": csrf, "reason": "no longer needed"})
    assert r.status_code == 303 and row["detail"] == "reason: no longer needed"


async def test_a_bulk_operation_is_offered_confirmed_started_and_shown(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    tenant_id, key = await new_tenant(pool)
    csrf = await login(client, key)
    assert "No bulk operations yet." in _main(await client.get("/ui/operations"))
    await runs_of(pool, tenant_id, "bulk.pages", 3)
    listed = _main(await client.get("/ui/runs?task=bulk.pages"))
    offer = re.search(r'<a class="bulk button danger" data-kind="cancel" href="([^"]+)">'
                      r"Cancel all 3 runs matching…</a>", listed)
    assert offer, listed
    confirm = _main(await client.get(offer[1].replace("&amp;", "&")))
    assert '<b id="confirm-count">3 runs</b>' in confirm and "task = bulk.pages" in confirm
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', confirm))
    assert fields == {"_csrf": csrf, "kind": "cancel", "task": "bulk.pages"}
    assert '<input type="text" name="reason" id="op-reason"' in confirm
    started, row = await _posted(client, pool, "/ui/operations", {**fields, "reason": "bad deploy"})
    assert started.status_code == 303, started.text
    assert row["action"] == "operation.start" and row["detail"] == "reason: bad deploy"
    page = _main(await client.get(started.headers["location"]))
    assert '<span id="op-done">' in page and "of 3 runs handled" in page
    assert f"request_id={row['request_id']}" in page  # the flash links its audit entry
    fragment = await client.get(started.headers["location"], headers={"x-ui-fragment": "1"})
    assert fragment.status_code == 200 and "<main>" not in fragment.text
    assert "of 3 runs handled" in fragment.text
    assert "Stop operation " in page  # no runner in this app: it waits, its Stop offered
    stopped, row = await _posted(client, pool, started.headers["location"] + "/cancel",
                                 {"_csrf": csrf, "reason": "wrong filter"})
    assert stopped.status_code == 303 and row["action"] == "operation.cancel"
    assert row["detail"] == "reason: wrong filter"
    ops = _main(await client.get("/ui/operations"))
    assert f'href="{started.headers["location"]}"' in ops and "<code>task = bulk.pages</code>" \
        in ops


async def test_the_pools_page_shows_each_pool_and_pauses_this_tenants_queue(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    csrf = await login(client, key)
    pools = (await client.get("/v1/pools", headers=auth(key))).json()["items"]
    page = _main(await client.get("/ui/pools"))
    assert page.count('<section class="pool"') == len(pools)
    assert "No run of yours started in the last 30 minutes." in page
    one = _main(await client.get("/ui/pools?pool=default&priority=bulk"))
    [classes] = re.findall(r'<table class="classes">.*?</table>', one, re.S)
    assert re.findall(r"<tr><td>(\w+)</td>", classes) == ["bulk"]
    assert "Pause your queue in pool default: none of your runs" in page  # its confirmation
    r, row = await _posted(client, pool, "/ui/pools/default/pause",
                           {"_csrf": csrf, "reason": "a bad release"})
    assert r.status_code == 303 and row["detail"] == "reason: a bad release", r.text
    paused = _main(await client.get("/ui/pools?pool=default"))
    assert "Resume my queue" in paused and "your queue: <span class=\"badge wait\">paused" \
        in paused
    assert next(p for p in (await client.get("/v1/pools", headers=auth(key))).json()["items"]
                if p["name"] == "default")["queue_paused"]


async def test_the_workers_page_lists_the_tenants_workers_and_says_how_one_appears(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    tenant_id, key = await new_tenant(pool)
    await login(client, key)
    assert "none has called the worker-gateway yet" in _main(await client.get("/ui/workers"))
    async with pool.acquire() as conn:
        await registry.touch(conn, "w-<b>1</b>", tenant_id, ["default"], 4, None,
                             versions={"etl.load": "v2"})
    page = _main(await client.get("/ui/workers"))
    assert "<code>w-&lt;b&gt;1&lt;/b&gt;</code>" in page and "etl.load v2" in page
    assert "No workers match." in _main(await client.get("/ui/workers?task=no.such"))


async def test_the_admin_creates_a_tenant_sees_its_key_once_and_its_limits(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    form = await client.get("/ui/login")
    token = re.search(r'name="_login" value="([^"]+)"', form.text)[1]  # type: ignore
    r = await client.post("/ui/login", data={"_login": token, "api_key": ADMIN,
                                             "next": "/ui/tenants"})
    assert r.status_code == 303, r.text
    csrf = CSRF.search((await client.get("/ui/tenants")).text)[1]  # type: ignore
    name = f"pages-{uuid.uuid4().hex[:6]}"
    created = _main(await client.post("/ui/tenants", data={
        "_csrf": csrf, "name": name, "weight": "3"}))
    key = re.search(r'<pre id="new-key" tabindex="0">(ost_[^<]+)</pre>', created)[1]  # type: ignore
    tenant_id = re.search(r'href="/ui/tenants/([0-9a-f-]+)">Its weight', created)[1]  # type: ignore
    assert (await client.get("/v1/jobs", headers=auth(key))).status_code == 200
    listed = _main(await client.get("/ui/tenants"))
    assert key not in listed  # shown once
    row = re.search(rf'<tr><td><a href="/ui/tenants/{tenant_id}">{name}</a>.*?</tr>', listed,
                    re.S)
    assert row and "<td>3</td>" in row[0] and "Act for" in row[0]
    page = _main(await client.get(f"/ui/tenants/{tenant_id}"))
    assert "No limits: the tenant" in page and 'name="weight" type="number" min="0" ' \
        'step="any" value="3"' in page
    r = await client.post(f"/ui/tenants/{tenant_id}/limits", data={
        "_csrf": csrf, "weight": "5", "max_concurrency": "7"})
    assert r.status_code == 303, r.text
    page = _main(await client.get(f"/ui/tenants/{tenant_id}"))
    assert 'name="max_concurrency" type="number" min="0" step="1" value="7"' in page
    assert re.search(r'<table class="limits">.*<td>tenant</td><td><span class="muted">—</span>'
                     r"</td><td>7</td>", page, re.S)
    assert "7 at a time" in _main(await client.get("/ui/tenants"))
