"""Task and resource limits from the web UI (issue 41 item 3), through the api's own app over
the real PostgreSQL: a limit is reviewed (now and after, nothing set) then set, and read back
through GET /v1/limits; the audit row is the API's `limit.set` with before and after; a bad
value is the API's problem on the form and sets nothing; a viewer sees no form and is refused
for its role; another tenant never sees the limit."""

from __future__ import annotations

import json

import asyncpg
import httpx
import pytest

from tests.helpers.api import auth, issue
from tests.helpers.integration import login, new_tenant

pytestmark = pytest.mark.integration


async def _limits(client: httpx.AsyncClient, key: str) -> list[dict]:
    r = await client.get("/v1/limits", headers=auth(key))
    assert r.status_code == 200, r.text
    return [i for i in r.json()["items"] if i["scope"] in ("task", "resource")]


async def test_a_task_limit_is_reviewed_then_set_and_audited(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    tenant_id, key = await new_tenant(pool)
    _, other = await new_tenant(pool)
    csrf = await login(client, key)
    form = {"_csrf": csrf, "name": "reports.render", "max_concurrency": "3"}
    r = await client.post("/ui/limits/task/review", data=form)
    assert r.status_code == 200, r.text
    assert "Now: no limit. After: <b>at most, at a time 3</b>." in r.text
    assert await _limits(client, key) == []  # a review sets nothing
    assert '<input id="f-reason" name="reason"' in r.text  # the reason asked on the review
    r = await client.post("/ui/limits/task", data={**form, "reason": "the renderer is slow"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/limits", r.text
    [limit] = await _limits(client, key)
    assert (limit["scope"], limit["name"], limit["max_concurrency"]) == \
        ("task", "reports.render", 3)
    page = (await client.get("/ui/limits")).text
    assert "Limit set on task reports.render: at most, at a time 3." in page
    assert 'href="/ui/audit?request_id=' in page  # the flash links its audit entry
    assert "<code>reports.render</code>" in page
    r = await client.post("/ui/limits/task/review", data={**form, "max_concurrency": "5"})
    assert "Now: at most, at a time 3. After: <b>at most, at a time 5</b>." in r.text
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT action, target_id, outcome, before, after, detail "
                                  "FROM audit WHERE action = 'limit.set' AND target_id = $1 "
                                  "AND caller_tenant_id = $2", "task:reports.render", tenant_id)
    assert row is not None and row["outcome"] == "done"
    assert row["detail"] == "reason: the renderer is slow"
    after = row["after"] if isinstance(row["after"], dict) else json.loads(row["after"])
    assert after["max_concurrency"] == 3 and row["before"] is None
    assert await _limits(client, other) == []  # another tenant's limits are its own


async def test_a_resource_rate_and_bad_values(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    csrf = await login(client, key)
    for bad, field in ((("name", "-bad name"),), "name"), ((("rate_per_second", "fast"),),
                                                              "rate_per_second"), \
            ((("rate_per_second", "-1"),), "limit"), \
            ((("rate_per_second", ""), ("burst", "")), "rate_per_second"):
        form = {"_csrf": csrf, "name": "smtp", "rate_per_second": "5", "burst": "10", **dict(bad)}
        for path in ("/ui/limits/resource/review", "/ui/limits/resource"):
            r = await client.post(path, data=form)
            assert r.status_code == 422, (bad, r.text)
            assert "Not set:" in r.text and f"<code>{field}" in r.text, (bad, r.text)
    assert await _limits(client, key) == []
    r = await client.post("/ui/limits/resource",
                          data={"_csrf": csrf, "name": "smtp", "rate_per_second": "5",
                                "burst": "10"})
    assert r.status_code == 303, r.text
    [limit] = await _limits(client, key)
    assert (limit["rate_per_second"], limit["burst"]) == (5.0, 10.0)
    r = await client.post("/ui/limits/nothing/review", data={"_csrf": csrf, "name": "x"})
    assert r.status_code == 404 and "<!doctype html>" in r.text.lower()


async def test_a_viewer_sees_the_limits_but_may_not_set_them(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    viewer = (await issue(client, key, "viewer"))["key"]
    csrf = await login(client, viewer)
    page = await client.get("/ui/limits")
    assert page.status_code == 200 and "Limit a job type" not in page.text
    r = await client.post("/ui/limits/task", data={"_csrf": csrf, "name": "t",
                                                   "max_concurrency": "1"})
    assert r.status_code == 403 and "viewer" in r.text, r.text
    assert await _limits(client, key) == []
