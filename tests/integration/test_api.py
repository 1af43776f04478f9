"""The public API in-process over the real PostgreSQL: auth, tenant isolation on every endpoint,
problem details for bad input (and nothing written), runs and their timelines."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from tests.helpers.api import ADMIN, assert_problem, auth, tenant
from tests.helpers.integration import dispatch, event_count, store
from tests.helpers.waiting import until

pytestmark = pytest.mark.integration
async def test_tenants_need_the_admin_key(client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    assert_problem(await client.post("/v1/tenants", json={"name": "x"}), 401)
    assert_problem(await client.post("/v1/tenants", json={"name": "x"}, headers=auth("nope")),
                   401)
    key = await tenant(client, "acme")
    assert_problem(await client.post("/v1/tenants", json={"name": "x"}, headers=auth(key)), 403)
    assert_problem(await client.post("/v1/tenants", json={"name": "acme"}, headers=auth(ADMIN)),
                   409, "name")
    async with pool.acquire() as conn:  # stored hashed: the key itself appears nowhere
        hashes = await conn.fetch("SELECT key_hash FROM api_keys")
        assert len(hashes) == 1 and key.encode() not in hashes[0]["key_hash"]
        assert not await conn.fetchval("SELECT count(*) FROM events WHERE data::text LIKE $1",
                                       f"%{key}%")


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"name": "a", "colour": "red"}, 422, "colour"),
    ({"name": 42}, 422, "name"),
    ({"name": "a", "schedule": {"at": "tomorrow"}}, 422, "schedule.at"),
    ({"name": "a", "schedule": {"at": "2026-12-01T09:00:00"}}, 422, "schedule.at"),
    ({"name": "a", "schedule": {"when": "now"}}, 422, "schedule.when"),
    ({"name": "a", "payload": {"blob": "x" * 2000}}, 413, "payload"),
    ({"name": "a", "pool": "nowhere"}, 422, "pool"),
    ({"name": "a", "priority": "urgent"}, 422, "priority"),
    ({"name": "a", "schedule": {"cron": "61 * * * *"}}, 422, "schedule.cron"),
    ({"name": "a", "schedule": {"cron": "0 3 * * *", "timezone": "Mars/Olympus"}}, 422,
     "schedule.timezone"),
    ({"name": "a", "schedule": {"every": "fortnightly"}}, 422, "schedule.every"),
    ({"name": "a", "schedule": {"every": "1h", "calendar": "holidays"}}, 422,
     "schedule.calendar"),
    ({}, 422, "name"),
])
async def test_bad_job_input_is_a_problem_naming_the_field_and_writes_nothing(
        client: httpx.AsyncClient, pool: asyncpg.Pool, body: dict[str, Any], status: int,
        field: str) -> None:
    key = await tenant(client, "acme")
    async with pool.acquire() as conn:
        before = await event_count(conn)
        blobs = await conn.fetchval("SELECT count(*) FROM blobs")
    assert_problem(await client.post("/v1/jobs", json=body, headers=auth(key)), status, field)
    async with pool.acquire() as conn:
        assert await event_count(conn) == before
        assert await conn.fetchval("SELECT count(*) FROM blobs") == blobs


async def test_malformed_json_is_a_problem(client: httpx.AsyncClient) -> None:
    key = await tenant(client, "acme")
    r = await client.post("/v1/jobs", content=b"{not json", headers={
        **auth(key), "content-type": "application/json"})
    assert_problem(r, 400)


async def test_job_lifecycle_and_idempotency(client: httpx.AsyncClient) -> None:
    key = await tenant(client, "acme")
    at = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    body = {"name": "send-invoice", "schedule": {"at": at.isoformat()},
            "payload": {"invoice": 7}, "idempotency_key": "inv-7"}
    r = await client.post("/v1/jobs", json=body, headers=auth(key))
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["next_run_at"] == at.isoformat().replace("+00:00", "Z")
    assert job["status"] == "active" and job["task"] == "send-invoice"
    again = await client.post("/v1/jobs", json=body, headers=auth(key))
    assert again.status_code == 200 and again.json()["id"] == job["id"]
    got = await client.get(f"/v1/jobs/{job['id']}", headers=auth(key))
    assert got.json()["payload"] == {"invoice": 7}
    listed = await client.get("/v1/jobs", headers=auth(key))
    assert [j["id"] for j in listed.json()["items"]] == [job["id"]]
    assert (await client.delete(f"/v1/jobs/{job['id']}", headers=auth(key))).status_code == 204
    deleted = (await client.get(f"/v1/jobs/{job['id']}", headers=auth(key))).json()
    assert deleted["status"] == "deleted" and deleted["next_run_at"] is None
    assert_problem(await client.delete(f"/v1/jobs/{job['id']}", headers=auth(key)), 409)


async def test_pagination_walks_every_job_once(client: httpx.AsyncClient) -> None:
    key = await tenant(client, "acme")
    ids = set()
    for i in range(7):
        r = await client.post("/v1/jobs", json={"name": f"j{i}", "schedule": {
            "at": "2030-01-01T00:00:00Z"}}, headers=auth(key))
        ids.add(r.json()["id"])
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/v1/jobs", params=params, headers=auth(key))).json()
        seen += [j["id"] for j in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids)
    assert_problem(await client.get("/v1/jobs", params={"cursor": "zz"}, headers=auth(key)),
                   422, "cursor")


async def test_tenant_isolation_on_every_endpoint(client: httpx.AsyncClient,
                                                  pool: asyncpg.Pool) -> None:
    from ostinato.clock import SystemClock
    from services.scheduler.tick import fire_due

    a, b = await tenant(client, "alpha"), await tenant(client, "beta")
    job = (await client.post("/v1/jobs", json={"name": "mine", "payload": 1},
                             headers=auth(a))).json()
    await fire_due(pool, store(), SystemClock())
    await dispatch(pool)
    runs = (await client.get("/v1/runs", params={"job_id": job["id"]}, headers=auth(a))).json()
    [run] = runs["items"]
    assert run["state"] == "queued" and run["job_id"] == job["id"]
    timeline = (await client.get(f"/v1/runs/{run['id']}/events", headers=auth(a))).json()
    assert [e["type"] for e in timeline["items"]] == ["RunScheduled", "RunQueued"]
    assert [e["version"] for e in timeline["items"]] == [1, 2]

    for path in (f"/v1/jobs/{job['id']}", f"/v1/runs/{run['id']}",
                 f"/v1/runs/{run['id']}/events"):
        assert_problem(await client.get(path, headers=auth(b)), 404)
    assert_problem(await client.delete(f"/v1/jobs/{job['id']}", headers=auth(b)), 404)
    for path in ("/v1/jobs", "/v1/runs", f"/v1/runs?job_id={job['id']}"):
        r = await client.get(path, headers=auth(b))
        assert r.status_code == 200 and r.json()["items"] == []
    assert_problem(await client.get(f"/v1/runs/{uuid.uuid4()}", headers=auth(a)), 404)
    assert_problem(await client.get("/v1/runs", params={"state": "sleeping"}, headers=auth(a)),
                   422, "state")
    for path in ("/v1/jobs", "/v1/runs"):  # the admin key is not a tenant
        assert_problem(await client.get(path, headers=auth(ADMIN)), 403)


async def test_probes_metrics_and_openapi(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).status_code == 200

    async def postgres_ready() -> bool:  # a probe has a budget: a busy machine may miss one
        answer = (await client.get("/readyz")).json()  # a 503's problem has no checks
        return answer.get("checks", {}).get("postgres") is True

    await until(postgres_ready, 60, "/readyz to report postgres ready")
    metrics = (await client.get("/metrics")).text
    assert "ostinato_http_request_duration_seconds" in metrics
    schema = (await client.get("/schema/openapi.json")).json()
    assert {"/v1/jobs", "/v1/runs/{run_id}", "/v1/runs/{run_id}/events"} <= set(schema["paths"])
    assert "/metrics" not in schema["paths"]


async def test_schedule_endpoints_and_their_isolation(client: httpx.AsyncClient) -> None:
    a, b = await tenant(client, "alpha"), await tenant(client, "beta")
    spec = {"cron": "30 2 * * *", "timezone": "America/New_York"}
    preview = await client.post("/v1/schedules/preview",
                                json={"schedule": spec, "count": 3}, headers=auth(a))
    assert preview.status_code == 200, preview.text
    assert preview.json()["timezone"] == "America/New_York"
    assert all(i["local"][11:16] == "02:30" or i["local"][11:16] == "03:00"
               for i in preview.json()["items"])
    assert_problem(await client.post("/v1/schedules/preview", json={
        "schedule": {"cron": "30 2 * * *", "timezone": "Nowhere/City"}}, headers=auth(a)),
        422, "schedule.timezone")

    r = await client.put("/v1/calendars/holidays", json={"dates": ["2026-12-25", "2026-12-24"]},
                         headers=auth(a))
    assert r.status_code == 200 and r.json()["dates"] == ["2026-12-24", "2026-12-25"]
    job = (await client.post("/v1/jobs", json={"name": "nightly", "schedule": {
        **spec, "calendar": "holidays"}}, headers=auth(a))).json()
    assert job["status"] == "active" and job["schedule"]["kind"] == "cron"
    upcoming = (await client.get(f"/v1/jobs/{job['id']}/upcoming", params={"count": 4},
                                 headers=auth(a))).json()
    assert len(upcoming["items"]) == 4
    assert upcoming["items"][0]["slot"] == job["next_slot"]

    assert (await client.post(f"/v1/jobs/{job['id']}/pause", headers=auth(a))).json() == {
        "status": "paused"}
    assert_problem(await client.post(f"/v1/jobs/{job['id']}/pause", headers=auth(a)), 409)
    assert_problem(await client.post(f"/v1/jobs/{job['id']}/resume", json={"misfire": "later"},
                                     headers=auth(a)), 422, "misfire")
    r = await client.post(f"/v1/jobs/{job['id']}/resume", json={"misfire": "skip"},
                          headers=auth(a))
    assert r.json() == {"status": "active"}
    trig = await client.post(f"/v1/jobs/{job['id']}/trigger", headers=auth(a))
    assert trig.status_code == 201 and trig.json()["trigger"] == "manual"
    run = (await client.get(f"/v1/runs/{trig.json()['run_id']}", headers=auth(a))).json()
    assert run["trigger"] == "manual" and run["state"] == "scheduled"
    back = await client.post(f"/v1/jobs/{job['id']}/backfill", json={
        "start": "2026-11-01T00:00:00Z", "end": "2026-11-04T00:00:00Z"}, headers=auth(a))
    assert back.status_code == 200 and back.json()["runs_created"] == 3, back.text

    # Tenant B sees none of it.
    for method, path in [("GET", f"/v1/jobs/{job['id']}/upcoming"),
                         ("POST", f"/v1/jobs/{job['id']}/pause"),
                         ("POST", f"/v1/jobs/{job['id']}/resume"),
                         ("POST", f"/v1/jobs/{job['id']}/trigger"),
                         ("GET", "/v1/calendars/holidays")]:
        assert_problem(await client.request(method, path, headers=auth(b)), 404)
    assert_problem(await client.post(f"/v1/jobs/{job['id']}/backfill", json={
        "start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"}, headers=auth(b)), 404)
    assert (await client.get("/v1/calendars", headers=auth(b))).json() == {"items": []}
    assert [c["name"] for c in (await client.get("/v1/calendars", headers=auth(a))).json()[
        "items"]] == ["holidays"]


async def test_batch_submission_is_all_or_nothing_and_idempotent(client: httpx.AsyncClient,
                                                                  pool: asyncpg.Pool) -> None:
    key = await tenant(client, "acme")
    jobs = [{"name": f"j{i}", "payload": {"i": i}, "idempotency_key": f"k{i}"}
            for i in range(3)]
    jobs += [jobs[0], jobs[1]]  # the same requests again, same keys (another body: a 409)
    r = await client.post("/v1/jobs/batch", json={"jobs": jobs}, headers=auth(key))
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert [i["created"] for i in items] == [True, True, True, False, False]
    assert items[3]["id"] == items[0]["id"] and items[4]["id"] == items[1]["id"]
    again = (await client.post("/v1/jobs/batch", json={"jobs": jobs[:2]},
                               headers=auth(key))).json()["items"]
    assert [i["id"] for i in again] == [items[0]["id"], items[1]["id"]]
    assert not any(i["created"] for i in again)

    async with pool.acquire() as conn:
        before = await event_count(conn)
    bad = [{"name": "ok"}, {"name": "bad", "schedule": {"cron": "nope"}},
           {"name": "worse", "pool": "mars"}]
    body = assert_problem(await client.post("/v1/jobs/batch", json={"jobs": bad},
                                            headers=auth(key)), 422)
    fields = {e["field"] for e in body["errors"]}
    assert {"jobs[1].schedule.cron", "jobs[2].pool"} <= fields
    assert_problem(await client.post("/v1/jobs/batch", json={"jobs": []}, headers=auth(key)),
                   422, "jobs")
    async with pool.acquire() as conn:
        assert await event_count(conn) == before
    listed = (await client.get("/v1/jobs", params={"limit": 100}, headers=auth(key))).json()
    assert len(listed["items"]) == 3
