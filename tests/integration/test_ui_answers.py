"""What the web UI answers a browser that asks for something it may not have, through the api's
own app over the real PostgreSQL (no browser: the answers are whole pages): a viewer's form
with a right CSRF token is refused for its role, as its audit row says; a malformed id in a UI
path is an HTML page with a way back, not the API's JSON problem."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from tests.helpers.api import auth, issue, tenant
from tests.helpers.integration import login

pytestmark = pytest.mark.integration


async def a_run(client: httpx.AsyncClient, key: str) -> str:
    r = await client.post("/v1/jobs", headers=auth(key), json={
        "name": "ui-answers", "schedule": {"at": (datetime.now(UTC) + timedelta(days=1))
                                           .isoformat()}})
    assert r.status_code == 201, r.text
    r = await client.post(f"/v1/jobs/{r.json()['id']}/trigger", headers=auth(key))
    assert r.status_code in (200, 201, 202), r.text
    return str(r.json()["run_id"])


async def test_a_viewers_form_with_a_right_token_is_refused_for_its_role(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    operator = await tenant(client, "ui-answers-a")
    run_id = await a_run(client, operator)
    viewer = await issue(client, operator, "viewer", "wallboard")
    token = await login(client, viewer["key"])
    r = await client.post(f"/ui/runs/{run_id}/cancel", data={"_csrf": token},
                          headers={"X-Request-Id": "ui-viewer-cancel"})
    assert r.status_code == 403
    assert r.headers["content-type"].startswith("text/html")
    assert "a viewer key may not operate (it may: read)" in r.text
    assert "CSRF" not in r.text  # the token was right: the role is what refuses
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT * FROM audit WHERE request_id = 'ui-viewer-cancel'")
        state = await conn.fetchval("SELECT state FROM runs WHERE id = $1", uuid.UUID(run_id))
    assert row["outcome"] == "refused" and row["status"] == 403 and row["role"] == "viewer"
    assert row["detail"] == "a viewer key may not operate (it may: read)"
    assert state != "cancelled"
    # a viewer may still end its own session
    r = await client.post("/ui/logout", data={"_csrf": token})
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"


@pytest.mark.parametrize("path", ["/ui/runs/not-a-uuid", "/ui/jobs/not-a-uuid",
                                  "/ui/dead-letters/42", "/ui/no-such-page"])
async def test_a_malformed_id_in_a_ui_path_is_an_html_page_with_a_way_back(
        client: httpx.AsyncClient, path: str) -> None:
    operator = await tenant(client, f"ui-answers-{uuid.uuid4().hex[:6]}")
    await login(client, operator)
    r = await client.get(path)
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("text/html"), r.text
    assert 'href="/ui/runs"' in r.text and "There is no page" in r.text
    r = await client.delete(path)  # a method the UI does not have: a page too
    assert r.status_code in (404, 405)
    assert r.headers["content-type"].startswith("text/html"), r.text
    api = await client.get("/v1/runs/not-a-uuid", headers=auth(operator))
    assert api.status_code in (400, 404, 422)  # the API still answers its problem
    assert api.headers["content-type"].startswith("application/problem+json")
