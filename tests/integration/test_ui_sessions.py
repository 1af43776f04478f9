"""The web UI's sessions in PostgreSQL (migration 0049, issue 39 item 1), through the api's own
app over the real database: a session is stored under its token's hash only (the admin key's
under an HMAC keyed by the token); it ends after an hour without use and after twelve hours in
any case, judged by the request's clock; logout and a revoked key delete its row; the
reconciler's retention duty deletes the expired rows and only those. (Two api processes
sharing one session: tests/e2e/test_ui_sessions.py.)"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from ostinato.clock import Clock, FakeClock
from ostinato.stores.api_keys import hash_key
from services.api.ui.sessions import COOKIE, IDLE_SECONDS, MAX_AGE_SECONDS, admin_proof
from services.reconciler.loop import ReconcileConfig, slow_checks
from tests.helpers.api import ADMIN, auth, issue, tenant
from tests.helpers.integration import CSRF, login, store

pytestmark = pytest.mark.integration


@pytest.fixture
def api_clock() -> Clock:
    return FakeClock(datetime.now(UTC))


async def open_session(client: httpx.AsyncClient, key: str) -> str:
    """Log in with `key`; the session token the cookie carries."""
    form = await client.get("/ui/login")
    token = re.search(r'name="_login" value="([^"]+)"', form.text)
    assert token, form.text
    r = await client.post("/ui/login", data={"_login": token.group(1), "api_key": key})
    assert r.status_code == 303, r.text
    session_id = client.cookies.get(COOKIE, path="/ui")
    assert session_id
    return session_id


def digest(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode()).digest()


async def rows(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch("SELECT * FROM ui_sessions ORDER BY created_at")


async def logged_in(client: httpx.AsyncClient) -> bool:
    r = await client.get("/ui/runs")
    if r.status_code == 303:
        assert r.headers["location"].startswith("/ui/login")
        return False
    assert r.status_code == 200, r.text
    return True


async def test_a_session_is_stored_by_its_tokens_hash_never_the_token_or_the_key(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "sessions-a")
    csrf = await login(client, key)
    session_id = client.cookies.get(COOKIE, path="/ui")
    assert session_id
    [row] = await rows(pool)
    assert row["token_hash"] == digest(session_id)
    assert row["key_hash"] == hash_key(key)  # as api_keys holds it
    assert row["csrf"] == csrf and row["role"] == "operator" and row["tenant"] == "sessions-a"
    assert row["expires_at"] - row["created_at"] == timedelta(seconds=IDLE_SECONDS)
    stored = " ".join(map(str, row.values()))
    assert session_id not in stored and key not in stored

    client.cookies.clear()
    admin_session = await open_session(client, ADMIN)
    admin = next(r for r in await rows(pool) if r["tenant_id"] is None)
    assert admin["token_hash"] == digest(admin_session)
    # nothing in the table to guess the admin key from offline: an HMAC under the token only
    assert admin["key_hash"] == admin_proof(admin_session, ADMIN)
    assert admin["key_hash"] != hash_key(ADMIN)
    assert (await client.get("/ui/tenants")).status_code == 200


async def test_a_session_ends_after_an_hour_unused_and_after_twelve_hours_in_any_case(
        client: httpx.AsyncClient, pool: asyncpg.Pool, api_clock: FakeClock) -> None:
    key = await tenant(client, "sessions-b")
    await login(client, key)
    api_clock.advance(IDLE_SECONDS - 120)
    assert await logged_in(client)  # used within the hour: its idle expiry moves on
    api_clock.advance(IDLE_SECONDS - 120)
    assert await logged_in(client)
    api_clock.advance(IDLE_SECONDS + 1)
    assert not await logged_in(client)  # an hour unused

    client.cookies.clear()
    await login(client, key)
    used, elapsed = IDLE_SECONDS - 120, 0
    while elapsed + used <= MAX_AGE_SECONDS:  # used all day, never an hour idle
        api_clock.advance(used)
        elapsed += used
        assert await logged_in(client)
    api_clock.advance(MAX_AGE_SECONDS - elapsed + 1)  # well within an hour of the last use
    assert not await logged_in(client)  # twelve hours after the login, however busy
    # both rows stay until the reconciler's sweep, and no read opens them
    assert [r["expires_at"] < api_clock.now() for r in await rows(pool)] == [True, True]


async def test_logout_and_a_revoked_key_delete_the_session(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    operator = await tenant(client, "sessions-c")
    csrf = await login(client, operator)
    r = await client.post("/ui/logout", data={"_csrf": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    assert await rows(pool) == []

    viewer = await issue(client, operator, "viewer", "wall")
    client.cookies.clear()
    await login(client, viewer["key"])
    assert len(await rows(pool)) == 1
    r = await client.delete(f"/v1/keys/{viewer['id']}", headers=auth(operator))
    assert r.status_code == 204, r.text
    assert not await logged_in(client)  # the key is gone: so is its session's row
    assert await rows(pool) == []


async def test_the_reconcilers_retention_duty_deletes_the_expired_sessions_only(
        client: httpx.AsyncClient, pool: asyncpg.Pool, api_clock: FakeClock) -> None:
    key = await tenant(client, "sessions-d")
    await login(client, key)
    idle = client.cookies.get(COOKIE, path="/ui")
    api_clock.advance(IDLE_SECONDS / 2)
    client.cookies.clear()
    await login(client, key)
    live = client.cookies.get(COOKIE, path="/ui")
    api_clock.advance(IDLE_SECONDS / 2 + 1)  # the first is an hour idle, the second half that
    retention = slow_checks(pool, store(api_clock), api_clock, ReconcileConfig())["retention"]
    assert await retention() == 1
    assert [r["token_hash"] for r in await rows(pool)] == [digest(live)]
    assert idle and live and await logged_in(client)
    assert await retention() == 0


async def test_a_flash_is_shown_once_and_the_csrf_token_is_the_sessions_own(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "sessions-e")
    r = await client.post("/v1/jobs", headers=auth(key), json={
        "name": "nightly", "schedule": {"cron": "0 3 * * *", "timezone": "UTC"}})
    assert r.status_code == 201, r.text
    job = r.json()["id"]
    csrf = await login(client, key)
    r = await client.post(f"/ui/jobs/{job}/pause", data={"_csrf": csrf})
    assert r.status_code == 303, r.text
    [row] = await rows(pool)
    # saved before the answer: the next page may be anywhere
    assert row["flash"].startswith("Job paused: nightly creates no runs")
    page = await client.get(f"/ui/jobs/{job}")
    assert "Job paused: nightly" in page.text and CSRF.search(page.text).group(1) == csrf  # type: ignore[union-attr]
    [row] = await rows(pool)
    assert row["flash"] is None
    assert "Job paused: nightly" not in (await client.get(f"/ui/jobs/{job}")).text
