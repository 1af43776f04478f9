"""The web UI's new-job form against the api in-process (issue 41 item 3): a preview shows the
next occurrences in the zone with its clock changes and creates nothing; Create saves only what
was previewed, through POST /v1/jobs's command, audited with its reason; bad input is the form
again with the problem and nothing created; a viewer is refused for its role."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.clock import Clock, FakeClock
from tests.helpers.api import auth, issue
from tests.helpers.integration import login, new_tenant

pytestmark = pytest.mark.integration
NOW = datetime(2026, 3, 25, 12, 0, tzinfo=UTC)  # Berlin's clocks go forward on 29 March


@pytest.fixture
def api_clock() -> Clock:
    return FakeClock(NOW)


def _form(token: str, **given: str) -> dict[str, str]:
    return {"_csrf": token, "name": "nightly-report", "task": "report", "pool": "default",
            "priority": "default", "payload": '{"who": "ops"}', "kind": "cron",
            "cron": "30 2 * * *", "timezone": "Europe/Berlin", "dst_gap": "shift_forward",
            "dst_fold": "auto", "misfire": "run_once", "reason": "monthly close", **given}


def _previewed(page: str) -> dict[str, str]:
    """The hidden fields a preview answered with."""
    return {name: re.search(rf'name="{name}" value="([^"]*)"', page).group(1)  # type: ignore[union-attr]
            for name in ("previewed", "nonce")}


async def _jobs(client: httpx.AsyncClient, key: str) -> list[dict[str, Any]]:
    return (await client.get("/v1/jobs", headers=auth(key))).json()["items"]


async def test_a_job_is_previewed_with_its_dst_change_then_created_once(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    token = await login(client, key)
    assert 'href="/ui/jobs/new"' in (await client.get("/ui/jobs")).text
    assert 'id="f-payload"' in (await client.get("/ui/jobs/new")).text
    preview = await client.post("/ui/jobs/preview", data=_form(token))
    assert preview.status_code == 200, preview.text
    page = preview.text
    assert "2026-03-28T02:30:00+01:00" in page
    assert "2026-03-29T03:00:00+02:00" in page  # 02:30 does not exist that day: shifted
    assert "the clocks change before this one (UTC+01:00 → UTC+02:00" in page
    assert "Create job nightly-report" in page
    assert await _jobs(client, key) == []  # a preview creates nothing

    form = {**_form(token), **_previewed(page)}
    r = await client.post("/ui/jobs/new", data=form)
    assert r.status_code == 303, r.text
    shown = await client.get(r.headers["location"])
    assert "Job nightly-report created." in shown.text
    assert "/ui/audit?request_id=" in shown.text  # the result links its audit entry
    r = await client.post("/ui/jobs/new", data=form)  # sent again (a double click): one job
    assert r.status_code == 303, r.text
    assert "already created from this preview" in (await client.get(r.headers["location"])).text
    [job] = await _jobs(client, key)
    assert r.headers["location"] == f"/ui/jobs/{job['id']}"
    assert (job["name"], job["task"], job["schedule"]["cron"], job["schedule"]["timezone"]) == (
        "nightly-report", "report", "30 2 * * *", "Europe/Berlin")
    got = (await client.get(f"/v1/jobs/{job['id']}", headers=auth(key))).json()
    assert got["payload"] == {"who": "ops"}
    rows = (await client.get(f"/v1/audit?action=job.create&target_id={job['id']}",
                             headers=auth(key))).json()["items"]
    assert [r["outcome"] for r in rows] == ["done", "done"]
    assert rows[-1]["after"]["reason"] == "monthly close"  # the first: it created the job


async def test_only_what_was_previewed_is_created(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    token = await login(client, key)
    previewed = _previewed((await client.post("/ui/jobs/preview", data=_form(token))).text)
    changed = await client.post("/ui/jobs/new", data={**_form(token, cron="0 4 * * *"),
                                                      **previewed})
    assert changed.status_code == 409, changed.text
    assert "changed since its preview" in changed.text and "04:00:00+01:00" in changed.text
    unpreviewed = await client.post("/ui/jobs/new", data=_form(token))
    assert unpreviewed.status_code == 409
    assert await _jobs(client, key) == []
    rows = (await client.get("/v1/audit?action=job.create", headers=auth(key))).json()["items"]
    assert [r["status"] for r in rows] == [409, 409]


@pytest.mark.parametrize(("given", "shown"), [
    ({"cron": "61 2 * * *"}, "schedule.cron"),
    ({"timezone": "Mars/Olympus"}, "unknown IANA time zone"),
    ({"payload": "{not json"}, "not JSON"),
    ({"name": ""}, "name"),
    ({"kind": "every", "every": "soon"}, "schedule.every"),
    ({"pool": "nowhere"}, "unknown pool"),
])
async def test_bad_input_is_the_form_again_and_creates_nothing(
        client: httpx.AsyncClient, pool: asyncpg.Pool, given: dict[str, str], shown: str) -> None:
    _, key = await new_tenant(pool)
    token = await login(client, key)
    r = await client.post("/ui/jobs/preview", data=_form(token, **given))
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert shown in r.text and "Create job" not in r.text
    r = await client.post("/ui/jobs/new", data={**_form(token, **given), "previewed": "x"})
    assert r.status_code == 422 and shown in r.text
    assert await _jobs(client, key) == []


async def test_a_one_off_and_an_interval_job(client: httpx.AsyncClient,
                                             pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    token = await login(client, key)
    for given in ({"kind": "every", "every": "15m", "name": "ticker"},
                  {"kind": "at", "at": "2026-04-01T09:00:00+02:00", "name": "once"},
                  {"kind": "now", "name": "right-away"}):
        page = (await client.post("/ui/jobs/preview", data=_form(token, **given))).text
        assert "Create job" in page, page
        r = await client.post("/ui/jobs/new", data={**_form(token, **given), **_previewed(page)})
        assert r.status_code == 303, r.text
    jobs = {j["name"]: j for j in await _jobs(client, key)}
    assert jobs["ticker"]["schedule"]["every"] == "15m"
    assert jobs["once"]["next_run_at"] == "2026-04-01T07:00:00Z"
    assert jobs["right-away"]["next_run_at"] is not None


async def test_a_viewer_is_offered_no_new_job_and_is_refused_for_its_role(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    viewer = (await issue(client, key, "viewer", "wallboard"))["key"]
    token = await login(client, viewer)
    assert 'href="/ui/jobs/new"' not in (await client.get("/ui/jobs")).text
    page = await client.get("/ui/jobs/new")
    assert page.status_code == 200 and "a viewer key may not submit" in page.text
    assert "<form method=\"post\" action=\"/ui/jobs/preview\"" not in page.text
    for path in ("/ui/jobs/preview", "/ui/jobs/new"):
        r = await client.post(path, data={**_form(token), "previewed": "x"})
        assert r.status_code == 403 and "a viewer key may not submit" in r.text, path
    assert await _jobs(client, key) == []
    rows = (await client.get("/v1/audit?action=job.create", headers=auth(key))).json()["items"]
    assert [(r["outcome"], r["role"]) for r in rows] == [("refused", "viewer")]
