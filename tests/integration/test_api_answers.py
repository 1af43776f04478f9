"""API answers that match the docs (issue "What a user trips over"): a succeeded run's output in
GET /v1/runs as in GET /v1/runs/{id}; a job's own timeline and skip ledger readable
(GET /v1/jobs/{id}/events, /skips), paged and tenant-scoped; a preview naming an unknown
calendar refused as job creation refuses it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from ostinato.clock import SystemClock
from services.scheduler.tick import fire_due
from tests.helpers.api import assert_problem, auth, tenant
from tests.helpers.integration import drive_one_run, new_tenant, store

pytestmark = pytest.mark.integration


async def test_a_listed_run_shows_its_output(pool: asyncpg.Pool,
                                             client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    await drive_one_run(pool, succeed=True, tenant_id=tenant_id)
    [run_id] = [r["id"] for r in await pool.fetch("SELECT id FROM runs WHERE tenant_id = $1",
                                                   tenant_id)]
    one = (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()
    [listed] = (await client.get("/v1/runs", headers=auth(key))).json()["items"]
    assert one["output"] == {"ok": True}
    assert listed["id"] == str(run_id) and listed["output"] == one["output"]


async def test_a_jobs_timeline_and_skip_ledger_are_readable_and_paged(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    key = await tenant(client, "ledger")
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    r = await client.post("/v1/jobs", headers=auth(key), json={
        "name": "hourly", "schedule": {"every": "1m", "start_at": start.isoformat(),
                                       "misfire": "run_once"}})
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    assert len(await fire_due(pool, store(), SystemClock())) == 1  # the latest slot runs
    skips = (await client.get(f"/v1/jobs/{job_id}/skips", headers=auth(key))).json()
    [skip] = skips["items"]
    assert skip["reason"] == "misfire_run_once" and skip["slots"] >= 9
    assert datetime.fromisoformat(skip["first_slot"]) == start
    events = (await client.get(f"/v1/jobs/{job_id}/events", headers=auth(key))).json()
    kinds = [e["type"] for e in events["items"]]
    assert kinds[0] == "JobCreated" and {"OccurrencesSkipped", "OccurrenceFired"} <= set(kinds)
    assert [e["version"] for e in events["items"]] == list(range(1, len(kinds) + 1))
    first = (await client.get(f"/v1/jobs/{job_id}/events", params={"limit": 1},
                              headers=auth(key))).json()
    assert [e["type"] for e in first["items"]] == ["JobCreated"] and first["next_after"] == 1
    rest = (await client.get(f"/v1/jobs/{job_id}/events", params={"after": 1},
                             headers=auth(key))).json()
    assert [e["type"] for e in rest["items"]] == kinds[1:]
    other = await tenant(client, "intruder")
    for path in ("events", "skips"):
        assert_problem(await client.get(f"/v1/jobs/{job_id}/{path}", headers=auth(other)), 404)


async def test_a_preview_with_an_unknown_calendar_is_refused(client: httpx.AsyncClient) -> None:
    key = await tenant(client, "previewer")
    body = {"schedule": {"cron": "0 9 * * *", "calendar": "holidays"}, "count": 3}
    assert_problem(await client.post("/v1/schedules/preview", json=body, headers=auth(key)),
                   422, "schedule.calendar")
    r = await client.put("/v1/calendars/holidays", headers=auth(key),
                         json={"dates": ["2026-12-25"]})
    assert r.status_code == 200, r.text
    r = await client.post("/v1/schedules/preview", json=body, headers=auth(key))
    assert r.status_code == 200 and len(r.json()["items"]) == 3
