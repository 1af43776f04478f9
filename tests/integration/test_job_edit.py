"""Editing a job in place (PATCH /v1/jobs/{id}, `ostinato.jobs.edit`) through the API, the
scheduler's due poll and the real PostgreSQL: the next occurrence follows the new schedule with
none missed or doubled at the switch; If-Match against the definition version (ETag), 412 when
stale; the dry run answers before and after and changes nothing; runs already created keep
their settings unless `apply_to_scheduled`; bad input, another tenant's job and a viewer's key
change nothing. The API's and the scheduler's clock is a fake moved by hand."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.clock import Clock, FakeClock
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.leases.shard import SHARDS, ShardLeases
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from services.api.app import create_app
from services.reconciler.checks.gaps import check_gaps
from services.reconciler.checks.ledger import check_ledger
from services.scheduler.tick import fire_due
from tests.helpers.api import ADMIN, assert_problem, auth, issue
from tests.helpers.integration import login, new_tenant, store

pytestmark = pytest.mark.integration

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


@pytest.fixture
def api_clock() -> Clock:
    return FakeClock(START)


@pytest.fixture
async def client(pool: asyncpg.Pool, db_url: str,
                 api_clock: Clock) -> AsyncIterator[httpx.AsyncClient]:
    """The API with two pools, so an edit can move a job from one to the other."""
    service = Service("api", Settings(database_url=db_url, admin_key=ADMIN, pools="default,etl",
                                      max_payload_bytes=1000), clock=api_clock)
    service.pool = pool
    transport = httpx.ASGITransport(app=create_app(service, store(api_clock)))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as c:
        yield c


async def create(client: httpx.AsyncClient, key: str, **fields: Any) -> str:
    r = await client.post("/v1/jobs", headers=auth(key), json={"name": "report", **fields})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def slots(client: httpx.AsyncClient, key: str, job: str) -> list[str]:
    r = await client.get("/v1/runs", params={"job_id": job, "limit": 100}, headers=auth(key))
    return sorted(run["scheduled_for"] for run in r.json()["items"])


async def events(client: httpx.AsyncClient, key: str, job: str) -> list[dict[str, Any]]:
    r = await client.get(f"/v1/jobs/{job}/events", headers=auth(key))
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


async def fire_at(pool: asyncpg.Pool, clock: FakeClock, instant: str) -> list[str]:
    """Move the clock to `instant` and run the scheduler's due poll: the slots it fired."""
    clock.set(datetime.fromisoformat(instant))
    return [r.scheduled_for.isoformat() for r in await fire_due(pool, store(clock), clock)]


async def test_the_next_occurrence_follows_the_new_schedule_none_missed_or_doubled(
        pool: asyncpg.Pool, client: httpx.AsyncClient, api_clock: FakeClock) -> None:
    _, key = await new_tenant(pool)
    job = await create(client, key, schedule={"cron": "0 * * * *"}, payload={"v": 1})
    assert await fire_at(pool, api_clock, "2026-03-02T09:00:00+00:00") == [
        "2026-03-02T09:00:00+00:00"]
    api_clock.set(datetime.fromisoformat("2026-03-02T09:10:00+00:00"))
    got = await client.get(f"/v1/jobs/{job}", headers=auth(key))
    assert got.headers["etag"] == '"1"' and got.json()["version"] == 1

    r = await client.patch(f"/v1/jobs/{job}", headers={**auth(key), "If-Match": '"1"'},
                           json={"schedule": {"cron": "30 * * * *"}, "reason": "half past"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert r.headers["etag"] == '"2"' and body["version"] == 2 and body["job"]["version"] == 2
    assert body["changed"] == ["schedule"] and body["dry_run"] is False
    assert body["switch_at"] == "2026-03-02T09:10:00Z"
    assert body["job"]["next_run_at"] == "2026-03-02T09:30:00Z"
    assert [i["slot"] for i in body["upcoming_before"]["items"][:2]] == [
        "2026-03-02T10:00:00Z", "2026-03-02T11:00:00Z"]
    assert [i["slot"] for i in body["upcoming_after"]["items"][:2]] == [
        "2026-03-02T09:30:00Z", "2026-03-02T10:30:00Z"]
    assert body["job"]["id"] == job and body["job"]["runs_created"] == 1  # same job, history

    # The scheduler reads the new schedule at its next poll: 09:30 and 10:30 fire, 10:00 does
    # not; 09:00 (the old schedule's) stays fired once.
    assert await fire_at(pool, api_clock, "2026-03-02T09:30:00+00:00") == [
        "2026-03-02T09:30:00+00:00"]
    assert await fire_at(pool, api_clock, "2026-03-02T10:00:00+00:00") == []
    assert await fire_at(pool, api_clock, "2026-03-02T10:30:00+00:00") == [
        "2026-03-02T10:30:00+00:00"]
    assert await slots(client, key, job) == [
        "2026-03-02T09:00:00Z", "2026-03-02T09:30:00Z", "2026-03-02T10:30:00Z"]
    updated = [e for e in await events(client, key, job) if e["type"] == "JobUpdated"]
    assert len(updated) == 1 and updated[0]["actor"].startswith("tenant:")
    assert updated[0]["data"]["reason"] == "half past"
    assert updated[0]["data"]["definition_version"] == 2
    audit = (await client.get("/v1/audit", params={"action": "job.update", "target_id": job},
                              headers=auth(key))).json()["items"]
    assert [(a["outcome"], a["after"]["changed"], a["after"]["reason"], a["before"]["version"])
            for a in audit] == [("done", ["schedule"], "half past", 1)]
    async with pool.acquire() as conn:  # the read models are still a fold of the log
        live = await snapshot(conn)
        await rebuild(conn)
        assert await snapshot(conn) == live


async def test_a_slot_due_but_undecided_at_the_edit_is_the_new_schedules_to_decide(
        pool: asyncpg.Pool, client: httpx.AsyncClient, api_clock: FakeClock) -> None:
    """The scheduler is behind: 12:00 of the old schedule is due, not yet fired, at the edit.
    A new schedule that has 12:00 fires it once; one that has not never fires it."""
    _, key = await new_tenant(pool)
    keeps = await create(client, key, schedule={"cron": "0 * * * *"})
    drops = await create(client, key, schedule={"cron": "0 * * * *"})
    assert len(await fire_at(pool, api_clock, "2026-03-02T08:59:59+00:00")) == 2  # 08:00
    api_clock.set(datetime.fromisoformat("2026-03-02T09:00:00.500+00:00"))
    r = await client.patch(f"/v1/jobs/{keeps}", headers=auth(key),
                           json={"schedule": {"cron": "*/30 * * * *"}})
    assert r.json()["switch_at"] == "2026-03-02T09:00:00Z", r.text
    assert r.json()["job"]["next_run_at"] == "2026-03-02T09:00:00Z"
    r = await client.patch(f"/v1/jobs/{drops}", headers=auth(key),
                           json={"schedule": {"cron": "15 * * * *"}})
    assert r.json()["job"]["next_run_at"] == "2026-03-02T09:15:00Z", r.text
    # a start named in the past does not make the new schedule owe the slots before the edit
    early = await create(client, key, schedule={"cron": "0 * * * *"})
    r = await client.patch(f"/v1/jobs/{early}", headers=auth(key), json={"schedule": {
        "cron": "45 * * * *", "start_at": "2026-03-01T00:00:00Z"}})
    assert r.json()["job"]["next_run_at"] == "2026-03-02T09:45:00Z", r.text
    assert await fire_at(pool, api_clock, "2026-03-02T09:00:01+00:00") == [
        "2026-03-02T09:00:00+00:00"]
    await fire_at(pool, api_clock, "2026-03-02T09:31:00+00:00")
    assert await slots(client, key, keeps) == [
        "2026-03-02T08:00:00Z", "2026-03-02T09:00:00Z", "2026-03-02T09:30:00Z"]
    assert await slots(client, key, drops) == ["2026-03-02T08:00:00Z", "2026-03-02T09:15:00Z"]
    # The reconciler agrees: its gap check and its ledger find no slot missing in either job
    # (the dropped 09:00 is no slot of the new schedule; the old slots are not judged by it).
    await check_gaps(pool, store(api_clock), api_clock, window=timedelta(days=1),
                     grace=timedelta(seconds=30))
    await check_ledger(pool, store(api_clock), api_clock, window=timedelta(days=1),
                       grace=timedelta(seconds=30))
    assert await slots(client, key, early) == []
    for job in (keeps, drops, early):
        found = {e["type"] for e in await events(client, key, job)}
        assert not found & {"OccurrenceMissed", "LedgerSlotMissing", "LedgerDisagreement"}, found


async def test_if_match_must_name_the_current_version_else_412_and_nothing_changes(
        pool: asyncpg.Pool, client: httpx.AsyncClient, api_clock: FakeClock) -> None:
    _, key = await new_tenant(pool)
    job = await create(client, key, schedule={"cron": "0 3 * * *"}, priority="default")
    first = await client.patch(f"/v1/jobs/{job}", headers={**auth(key), "If-Match": '"1"'},
                               json={"priority": "bulk"})
    assert first.status_code == 200 and first.json()["version"] == 2, first.text
    before = await events(client, key, job)
    stale = await client.patch(f"/v1/jobs/{job}", headers={**auth(key), "If-Match": '"1"'},
                               json={"priority": "critical"})
    problem = assert_problem(stale, 412)
    assert problem["current_version"] == 2
    assert await events(client, key, job) == before
    assert (await client.get(f"/v1/jobs/{job}", headers=auth(key))).json()["priority"] == "bulk"
    # Without If-Match the edit applies to the current version (documented choice).
    weak = await client.patch(f"/v1/jobs/{job}", headers={**auth(key), "If-Match": 'W/"2"'},
                              json={"owner": "billing"})
    assert weak.status_code == 200 and weak.json()["version"] == 3, weak.text
    free = await client.patch(f"/v1/jobs/{job}", headers=auth(key), json={"timeout": "10m"})
    assert free.status_code == 200 and free.json()["version"] == 4, free.text
    assert free.json()["job"]["timeout_seconds"] == 600
    same = await client.patch(f"/v1/jobs/{job}", headers=auth(key), json={"timeout": "600s"})
    assert same.json()["changed"] == [] and same.json()["version"] == 4  # nothing to record
    assert_problem(await client.patch(f"/v1/jobs/{job}", headers={**auth(key),
                                                                  "If-Match": "three"},
                                      json={"owner": "x"}), 422, "If-Match")


async def test_a_dry_run_answers_before_and_after_and_changes_nothing(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    job = await create(client, key, schedule={"cron": "30 2 * * *", "timezone": "Europe/Berlin"})
    before = await events(client, key, job)
    for params, extra in (({"dry_run": "1"}, {}), ({}, {"dry_run": True})):
        r = await client.patch(f"/v1/jobs/{job}", headers=auth(key), params=params,
                               json={"schedule": {"cron": "30 2 * * *",
                                                  "timezone": "America/New_York"},
                                     "payload": {"v": 2}, **extra})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["dry_run"] is True and body["version"] == 1
        assert body["changed"] == ["schedule", "payload"]
        assert body["upcoming_before"]["timezone"] == "Europe/Berlin"
        assert body["upcoming_after"]["timezone"] == "America/New_York"
        assert body["upcoming_after"]["items"][0]["local"].endswith("02:30:00-05:00")
        assert body["job"]["payload"] == {"v": 2}
    assert await events(client, key, job) == before
    got = (await client.get(f"/v1/jobs/{job}", headers=auth(key))).json()
    assert got["schedule"]["timezone"] == "Europe/Berlin" and got["version"] == 1


async def test_runs_already_created_keep_their_settings_unless_apply_to_scheduled(
        pool: asyncpg.Pool, client: httpx.AsyncClient, api_clock: FakeClock) -> None:
    _, key = await new_tenant(pool)
    job = await create(client, key, schedule={"cron": "0 * * * *"}, payload={"v": 1})
    await fire_at(pool, api_clock, "2026-03-02T09:00:00+00:00")
    await fire_at(pool, api_clock, "2026-03-02T10:00:00+00:00")
    runs = (await client.get("/v1/runs", params={"job_id": job}, headers=auth(key))).json()
    ids = [r["id"] for r in runs["items"]]
    assert len(ids) == 2  # both still `scheduled`: no dispatcher runs here

    r = await client.patch(f"/v1/jobs/{job}", headers=auth(key), json={"payload": {"v": 2}})
    assert r.json()["runs_amended"] == 0, r.text
    for run_id in ids:
        assert (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()[
            "payload"] == {"v": 1}

    r = await client.patch(f"/v1/jobs/{job}", headers=auth(key), json={
        "payload": {"v": 3}, "pool": "etl", "priority": "critical",
        "apply_to_scheduled": True, "reason": "fix the payload"})
    assert r.status_code == 200 and r.json()["runs_amended"] == 2, r.text
    for run_id in ids:
        run = (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()
        assert (run["payload"], run["pool"], run["priority"]) == ({"v": 3}, "etl", "critical")
        timeline = (await client.get(f"/v1/runs/{run_id}/events", headers=auth(key))).json()
        assert [e["type"] for e in timeline["items"]] == ["RunScheduled", "RunAmended"]
    async with pool.acquire() as conn:
        live = await snapshot(conn)
        await rebuild(conn)
        assert await snapshot(conn) == live


async def test_bad_input_another_tenant_and_a_viewer_change_nothing(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    _, other = await new_tenant(pool)
    job = await create(client, key, schedule={"cron": "0 3 * * *"})
    before = await events(client, key, job)
    cases: list[tuple[dict[str, Any], int, str | None]] = [
        ({}, 422, ""),
        ({"reason": "only a reason"}, 422, ""),
        ({"schedule": {"cron": "61 * * * *"}}, 422, "schedule.cron"),
        ({"schedule": {"cron": "0 3 * * *", "timezone": "Mars/Olympus"}}, 422,
         "schedule.timezone"),
        ({"schedule": {"at": "2020-01-01T00:00:00Z"}}, 422, "schedule"),
        ({"timeout": "-5s"}, 422, "timeout"),
        ({"timeout": "0s"}, 422, "timeout"),
        ({"pool": "nowhere"}, 422, "pool"),
        ({"priority": "urgent"}, 422, "priority"),
        ({"schedule": {"cron": "0 3 * * *", "calendar": "holidays"}}, 422, "schedule.calendar"),
        ({"schedule": {"at": "2030-01-01T00:00:00Z"}, "max_staleness": "1h"}, 422,
         "max_staleness"),
    ]
    for body, status, field in cases:
        r = await client.patch(f"/v1/jobs/{job}", headers=auth(key), json=body)
        assert_problem(r, status, field)
    unknown = await client.patch(f"/v1/jobs/{job}", headers=auth(key), json={"name": "x"})
    assert unknown.status_code in (400, 422) and "name" in unknown.text
    assert_problem(await client.patch(f"/v1/jobs/{job}", headers=auth(other),
                                      json={"priority": "bulk"}), 404)
    viewer = await issue(client, key, "viewer")
    assert_problem(await client.patch(f"/v1/jobs/{job}", headers=auth(viewer["key"]),
                                      json={"priority": "bulk"}), 403)
    assert await events(client, key, job) == before
    assert (await client.delete(f"/v1/jobs/{job}", headers=auth(key))).status_code == 204
    assert_problem(await client.patch(f"/v1/jobs/{job}", headers=auth(key),
                                      json={"priority": "bulk"}), 409)


async def test_a_completed_one_off_job_rescheduled_runs_again(
        pool: asyncpg.Pool, client: httpx.AsyncClient, api_clock: FakeClock) -> None:
    _, key = await new_tenant(pool)
    job = await create(client, key, schedule={"at": "2026-03-02T09:00:00Z"})
    await fire_at(pool, api_clock, "2026-03-02T09:00:00+00:00")
    assert (await client.get(f"/v1/jobs/{job}", headers=auth(key))).json()["status"] == "completed"
    r = await client.patch(f"/v1/jobs/{job}", headers=auth(key),
                           json={"schedule": {"at": "2026-03-03T09:00:00Z"}})
    assert r.status_code == 200 and r.json()["job"]["status"] == "active", r.text
    assert await fire_at(pool, api_clock, "2026-03-03T09:00:00+00:00") == [
        "2026-03-03T09:00:00+00:00"]
    assert api_clock.now() - START > timedelta(days=1)


async def test_the_ui_edit_form_previews_then_saves_the_version_it_read(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    job = await create(client, key, schedule={"cron": "0 3 * * *", "timezone": "Europe/Berlin"},
                       payload={"v": 1})
    token = await login(client, key)
    page = await client.get(f"/ui/jobs/{job}")
    assert 'id="edit"' in page.text and 'name="version" value="1"' in page.text
    form = {"_csrf": token, "version": "1", "cron": "15 4 * * *", "timezone": "Europe/Berlin",
            "payload": '{"v": 2}', "reason": "later", "do": "preview"}
    preview = await client.post(f"/ui/jobs/{job}/edit", data=form)
    assert preview.status_code == 200, preview.text
    assert "Would change: schedule, payload" in preview.text
    assert "04:15:00+01:00" in preview.text and "03:00:00+01:00" in preview.text
    before = await events(client, key, job)
    assert [e["type"] for e in before] == ["JobCreated"]  # the preview changed nothing
    assert (await client.post(f"/ui/jobs/{job}/edit", data={**form, "_csrf": "forged",
                                                            "do": "save"})).status_code == 403
    saved = await client.post(f"/ui/jobs/{job}/edit", data={**form, "do": "save"})
    assert saved.status_code == 303, saved.text
    got = (await client.get(f"/v1/jobs/{job}", headers=auth(key))).json()
    assert (got["version"], got["schedule"]["cron"], got["payload"]) == (2, "15 4 * * *",
                                                                         {"v": 2})
    stale = await client.post(f"/ui/jobs/{job}/edit", data={**form, "cron": "0 5 * * *",
                                                            "do": "save"})
    assert stale.status_code == 412 and "version 2" in stale.text
    assert (await client.get(f"/v1/jobs/{job}", headers=auth(key))).json()["version"] == 2


async def test_the_ui_edit_form_changes_retry_limits_and_deadlines_and_blank_clears(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    job = await create(client, key, schedule={"cron": "0 3 * * *"}, payload={},
                       concurrency_key="acct-1", max_staleness="2d")
    token = await login(client, key)
    page = await client.get(f"/ui/jobs/{job}")
    for field in ("retry", "concurrency_key", "resource", "queue_wait_timeout",
                  "on_queue_wait", "complete_within", "max_staleness"):
        assert f'name="{field}"' in page.text, field
    assert 'name="concurrency_key" value="acct-1"' in page.text
    form = {"_csrf": token, "version": "1", "do": "save", "concurrency_key": "",
            "retry": '{"max_attempts": 7, "initial_delay": "2s"}', "queue_wait_timeout": "10m",
            "on_queue_wait": "skip", "max_staleness": "3d"}
    saved = await client.post(f"/ui/jobs/{job}/edit", data=form)
    assert saved.status_code == 303, saved.text
    got = (await client.get(f"/v1/jobs/{job}", headers=auth(key))).json()
    assert (got["retry"]["max_attempts"], got["retry"]["initial_delay"]) == (7, "2s")
    assert (got["concurrency_key"], got["queue_wait_seconds"], got["on_queue_wait"],
            got["max_staleness_seconds"]) == (None, 600.0, "skip", 3 * 86400.0)
    changed = (await events(client, key, job))[-1]
    assert changed["type"] == "JobUpdated"
    bad = await client.post(f"/ui/jobs/{job}/edit", data={**form, "version": "2",
                                                          "retry": "{not json"})
    assert bad.status_code == 422 and "retry is not JSON" in bad.text
    assert (await client.get(f"/v1/jobs/{job}", headers=auth(key))).json()["version"] == 2


async def test_under_shard_leases_the_edit_holds_across_two_schedulers_and_a_takeover(
        pool: asyncpg.Pool, client: httpx.AsyncClient, api_clock: FakeClock) -> None:
    """Two scheduler instances share the shards under leases (epochs); jobs are edited between
    their polls; then one dies and the other takes its shards over. Every job's runs follow the
    new schedule from the edit on: none missed, none twice, whichever instance fired them."""
    _, key = await new_tenant(pool)
    jobs = [await create(client, key, schedule={"cron": "0 * * * *"}) for _ in range(6)]
    a = ShardLeases(pool, api_clock, "a", ttl=timedelta(seconds=10))
    b = ShardLeases(pool, api_clock, "b", ttl=timedelta(seconds=10))

    async def tick(instant: str, *alive: ShardLeases) -> int:
        api_clock.set(datetime.fromisoformat(instant))
        for leases in (*alive, *alive):  # join, then hand surplus shards back
            await leases.refresh()
        fired = 0
        for leases in alive:
            fired += len(await fire_due(pool, store(api_clock), api_clock,
                                        ownership=leases.ownership))
        return fired

    assert await tick("2026-03-02T09:00:00+00:00", a, b) == len(jobs)
    assert a.ownership.epochs and b.ownership.epochs  # both hold shards
    api_clock.set(datetime.fromisoformat("2026-03-02T09:10:00+00:00"))
    for job in jobs:
        r = await client.patch(f"/v1/jobs/{job}", headers=auth(key),
                               json={"schedule": {"cron": "30 * * * *"}})
        assert r.status_code == 200, r.text
    assert await tick("2026-03-02T09:30:00+00:00", a, b) == len(jobs)
    assert await tick("2026-03-02T10:00:00+00:00", a, b) == 0
    assert await tick("2026-03-02T10:30:00+00:00", b) == len(jobs)  # a died: b took over
    assert len(b.ownership.epochs) == SHARDS
    for job in jobs:
        assert await slots(client, key, job) == [
            "2026-03-02T09:00:00Z", "2026-03-02T09:30:00Z", "2026-03-02T10:30:00Z"]
