"""The web UI's lists and error pages (issue 41 items 1, 3, 4, 5), through the api's own app over
the real PostgreSQL (no browser: the answers are whole pages; tests/e2e/test_ui_lists.py drives
them in Chromium): the runs list answers who, when, how long and why it failed, sorted the one
way the tenant's index serves both ways; the jobs list says the schedule in words, the last
outcome, and why a paused job is paused, with no next run; every error is an HTML page with a
way back, the database away a 503 page to try again."""

from __future__ import annotations

import html as markup
import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import httpx
import pytest

from ostinato.db.pool import create_pool
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store
from services.api.ui.runs import attempt_text
from tests.helpers.api import ADMIN, auth, issue, tenant
from tests.helpers.env import DATABASE_URL
from tests.helpers.integration import drive_one_run, login, new_tenant, served_api
from tests.helpers.lab.outage import PgRelay
from tests.helpers.waiting import until

pytestmark = pytest.mark.integration
XSS = "<script>alert(1)</script>"
ROW = re.compile(r'<tr data-state="([a-z_]+)">(.*?)</tr>', re.S)
COPY = re.compile(r'data-copy="([^"]+)"')


def rows_of(page: str) -> list[tuple[str, list[str]]]:
    """(state, cells) of each row of the runs table."""
    return [(state, re.findall(r"<td[^>]*>(.*?)</td>", body, re.S))
            for state, body in ROW.findall(page)]


async def test_the_runs_list_shows_the_jobs_name_start_duration_and_the_error(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    tenant_id, key = await new_tenant(pool)
    _, failed = await drive_one_run(pool, succeed=False, tenant_id=tenant_id)
    _, done = await drive_one_run(pool, succeed=True, tenant_id=tenant_id)
    await login(client, key)
    page = (await client.get("/ui/runs")).text
    shown = {COPY.search(cells[0]).group(1): (state, cells) for state, cells in rows_of(page)}
    assert set(shown) == {str(failed), str(done)}
    async with pool.acquire() as conn:
        bad = await run_store.by_id(conn, tenant_id, failed)
        good = await run_store.by_id(conn, tenant_id, done)
    assert bad is not None and good is not None
    state, cells = shown[str(failed)]
    assert state == bad.state and state in ("failed", "retry_scheduled")
    job, _task, _state, attempt, started, _took, _scheduled, error = cells[1:]
    assert ">job</a>" in job and f'data-copy="{bad.job_id}"' in job  # its name, its full id
    assert attempt == attempt_text(bad)  # as the retry policy counts it: "2 of 3"
    assert f'datetime="{bad.started_at.astimezone(UTC).isoformat()}"' in started
    assert error == '<span class="error-type">Boom</span>: boom'  # type and message
    _, cells = shown[str(done)]
    assert cells[-1] == ""  # no error for a run that succeeded
    seconds = (good.finished_at - good.started_at).total_seconds()
    assert f'title="{seconds:.3f} s"' in cells[6]


async def test_the_error_message_is_shown_as_text_and_cut(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    tenant_id, key = await new_tenant(pool)
    _, run_id = await drive_one_run(pool, succeed=False, tenant_id=tenant_id)
    message = XSS + "x" * 300
    async with pool.acquire() as conn:  # a read model's value as a handler may report it
        await conn.execute("UPDATE runs SET last_error = $2::text::jsonb WHERE id = $1", run_id,
                           json.dumps({"type": "Boom", "message": message}))
    await login(client, key)
    page = (await client.get("/ui/runs")).text
    assert "<script>alert" not in page
    assert f'title="{markup.escape(message)}"' in page  # the whole message on hover


async def _runs_at(pool: asyncpg.Pool, tenant_id: uuid.UUID, n: int) -> None:
    """n runs of the tenant, one a minute, straight into the read model (a list's rows only)."""
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref,"
            " scheduled_for, state, attempt, fencing_token, updated_at, version, trigger,"
            " failures) SELECT gen_random_uuid(), $1, gen_random_uuid(), 't', 'default',"
            " 'default', gen_random_uuid(), $2::timestamptz - make_interval(mins => i),"
            " 'scheduled', 0, 0, $2, 1, 'schedule', 0 FROM generate_series(1, $3::int) i",
            tenant_id, datetime(2026, 12, 1, tzinfo=UTC), n)


async def _page_ids(client: httpx.AsyncClient, path: str) -> list[str]:
    """Every run id the list shows, following its next-page links."""
    ids: list[str] = []
    while path:
        page = (await client.get(path)).text
        ids += [COPY.search(cells[0]).group(1) for _, cells in rows_of(page)]
        after = re.search(r'<a href="([^"]+)">next page', page)
        path = markup.unescape(after.group(1)) if after else ""
    return ids


async def test_oldest_first_and_newest_first_page_through_every_run_once(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    tenant_id, key = await new_tenant(pool)
    await _runs_at(pool, tenant_id, 120)  # three pages of 50
    await login(client, key)
    ordered = [str(r["id"]) for r in await pool.fetch(
        "SELECT id FROM runs WHERE tenant_id = $1 ORDER BY scheduled_for, id", tenant_id)]
    assert await _page_ids(client, "/ui/runs?order=oldest") == ordered
    assert await _page_ids(client, "/ui/runs") == ordered[::-1]
    page = (await client.get("/ui/runs")).text
    assert 'href="/ui/runs?order=oldest" class="sort"' in page and 'aria-sort="descending"' in page
    r = await client.get("/ui/runs?order=sideways")
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")
    r = await client.get("/ui/runs?order=oldest&where=customer%3Dacme")
    assert r.status_code == 422 and "not offered with a where filter" in r.text


@pytest.mark.parametrize(("name", "oldest"), [("list_runs", False), ("list_runs_oldest", True)])
async def test_a_page_of_runs_is_read_through_the_tenants_index(
        pool: asyncpg.Pool, name: str, oldest: bool) -> None:
    """With 20,000 runs of one tenant among others, a page reads the tenant's newest-first
    index (either way), never the whole table."""
    mine, _ = await new_tenant(pool)
    theirs, _ = await new_tenant(pool)
    await _runs_at(pool, mine, 20000)
    await _runs_at(pool, theirs, 5000)
    async with pool.acquire() as conn:
        await conn.execute("ANALYZE runs")
        args = (mine, None, None, None, None, None, None, None, None, None, 51, None) if oldest \
            else (mine, None, None, None, None, 51)
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + run_store.Q[name], *args))
    assert "runs_tenant_created" in plan and "Seq Scan" not in plan, plan


async def test_a_page_of_jobs_reads_each_jobs_last_run_by_its_slot_index(
        pool: asyncpg.Pool) -> None:
    """The jobs list's last outcomes: per job, its newest slot of runs_job_slot, never a scan of
    the tenant's runs (20,000 of them here)."""
    mine, _ = await new_tenant(pool)
    await _runs_at(pool, mine, 20000)
    async with pool.acquire() as conn:
        await conn.execute("ANALYZE runs")
        jobs = [r["job_id"] for r in await conn.fetch(
            "SELECT job_id FROM runs WHERE tenant_id = $1 LIMIT 50", mine)]
        plan = "\n".join(r[0] for r in await conn.fetch(
            "EXPLAIN " + job_store.Q["jobs_last_outcomes"], mine, jobs))
    assert "runs_job_slot" in plan and "Seq Scan on runs" not in plan, plan


async def test_the_jobs_list_says_the_schedule_the_outcome_and_why_a_job_is_paused(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    tenant_id, key = await new_tenant(pool)
    _, run_id = await drive_one_run(pool, succeed=False, tenant_id=tenant_id)
    r = await client.post("/v1/jobs", headers=auth(key), json={
        "name": "nightly", "schedule": {"cron": "30 2 * * *", "timezone": "Europe/Berlin"}})
    assert r.status_code == 201, r.text
    nightly = r.json()["id"]
    token = await login(client, key)
    page = (await client.get("/ui/jobs")).text
    assert 'title="cron 30 2 * * * (Europe/Berlin)">every day at 02:30 Europe/Berlin' in page
    assert f'href="/ui/runs/{run_id}"' in page  # the one-off job's last outcome, linked
    r = await client.post(f"/ui/jobs/{nightly}/pause",
                          data={"_csrf": token, "back": "list", "reason": XSS})
    assert r.status_code == 303, r.text
    events = (await client.get(f"/v1/jobs/{nightly}/events", headers=auth(key))).json()["items"]
    assert [e["data"]["reason"] for e in events if e["type"] == "JobPaused"] == [XSS]
    page = (await client.get("/ui/jobs")).text
    row = page.split('<tr data-status="paused">')[1].split("</tr>")[0]
    assert markup.escape(XSS) in row and "<script>" not in page and "by tenant:" in row
    assert "none while paused" in row  # no next run, although the row still holds one
    async with pool.acquire() as conn:
        held = await job_store.by_id(conn, tenant_id, uuid.UUID(nightly))
    assert held is not None and held.next_run_at is not None
    assert f'datetime="{held.next_run_at.astimezone(UTC).isoformat()}"' not in row
    detail = (await client.get(f"/ui/jobs/{nightly}")).text
    assert "paused because" in detail and markup.escape(XSS) in detail
    r = await client.post(f"/ui/jobs/{nightly}/pause", data={"_csrf": token, "reason": "x" * 501})
    assert r.status_code in (409, 422)  # too long (or already paused): refused, a page
    assert r.headers["content-type"].startswith("text/html")


def assert_error_page(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("text/html"), r.text
    assert f'<section class="problem" data-status="{status}">' in r.text
    assert 'href="/ui/runs"' in r.text and "request id <code>" in r.text
    return r.text


async def test_every_error_is_a_page_with_what_happened_and_a_way_back(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    tenant_id, key = await new_tenant(pool)
    _, done = await drive_one_run(pool, succeed=True, tenant_id=tenant_id)
    viewer = await issue(client, key, "viewer", "wallboard")
    token = await login(client, key)
    assert_error_page(await client.get(f"/ui/runs/{uuid.uuid4()}"), 404)
    assert_error_page(await client.get("/ui/runs/not-a-uuid"), 404)
    assert "unknown state" in assert_error_page(await client.get("/ui/runs?state=bogus"), 422)
    assert_error_page(await client.get("/ui/runs?task=a%00b"), 400)
    retried = await client.post(f"/ui/runs/{done}/retry", data={"_csrf": token})
    assert "succeeded" in assert_error_page(retried, 409)  # only a failed run is re-run
    await client.post("/ui/logout", data={"_csrf": token})
    token = await login(client, viewer["key"])
    refused = assert_error_page(await client.post(f"/ui/runs/{done}/retry", data={}), 403)
    assert "a viewer key may not operate" in refused and "CSRF" not in refused
    assert await pool.fetchval("SELECT count(*) FROM runs WHERE tenant_id = $1",
                               tenant_id) == 1  # nothing was re-run


@pytest.fixture
async def away_api(db_url: str) -> AsyncIterator[tuple[str, PgRelay]]:
    """The api served over a pool that reaches PostgreSQL through a relay the test cuts."""
    relay = await PgRelay(DATABASE_URL).start()
    pool = await create_pool(relay.url_through(db_url), min_size=1, max_size=4)
    try:
        async with served_api(pool, db_url, ADMIN) as url:
            yield url, relay
    finally:
        pool.terminate()  # its connections may be half-dead after a cut
        await relay.close()


async def test_a_database_away_is_a_503_page_to_try_again(
        away_api: tuple[str, PgRelay]) -> None:
    url, relay = away_api
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        key = await tenant(http, "ui-away")
        await login(http, key)
        assert await relay.cut() >= 1
        r = await http.get("/ui/runs?state=failed")
        page = assert_error_page(r, 503)
        assert r.headers["retry-after"] == "1"
        assert '<a href="/ui/runs?state=failed">Try again</a>' in page
        await relay.mend()

        async def back() -> bool:
            return (await http.get("/ui/runs")).status_code == 200
        await until(back, within=60, what="the runs page after the database came back")
