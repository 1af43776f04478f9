"""Backfill through the API with its dry run: the dry run lists every slot of the range (UTC and
the schedule's local time, across a DST change) with what a backfill would do, and changes
nothing; the real backfill then does exactly that and answers the same list."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest

from .conftest import assert_problem, auth
from .helpers import new_tenant
from .test_dags import define, node

pytestmark = pytest.mark.integration

BERLIN = {"cron": "30 2 * * *", "timezone": "Europe/Berlin"}  # springs forward 2026-03-29
RANGE = {"start": "2026-03-27T12:00:00Z", "end": "2026-03-31T00:00:00Z"}


async def state_of(client: httpx.AsyncClient, key: str, job_id: str) -> tuple[Any, Any]:
    """Everything a backfill could change: the job's stream and its runs."""
    events = (await client.get(f"/v1/jobs/{job_id}/events", headers=auth(key))).json()
    runs = (await client.get("/v1/runs", params={"job_id": job_id, "limit": 100},
                             headers=auth(key))).json()
    return [e["version"] for e in events["items"]], sorted(
        (r["scheduled_for"], r["trigger"]) for r in runs["items"])


async def test_a_dry_run_lists_the_slots_across_dst_and_the_backfill_creates_exactly_them(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    r = await client.post("/v1/jobs", headers=auth(key),
                          json={"name": "nightly", "schedule": BERLIN})
    assert r.status_code == 201, r.text
    job = r.json()["id"]
    # One slot of the range already has a run: the backfill leaves it alone.
    first = await client.post(f"/v1/jobs/{job}/backfill", headers=auth(key), json={
        "start": "2026-03-30T00:00:00Z", "end": "2026-03-31T00:00:00Z"})
    assert first.status_code == 200 and first.json()["runs_created"] == 1, first.text
    before = await state_of(client, key, job)

    dry = await client.post(f"/v1/jobs/{job}/backfill", headers=auth(key),
                            json={**RANGE, "dry_run": True})
    assert dry.status_code == 200, dry.text
    plan = dry.json()
    assert plan["dry_run"] is True and plan["timezone"] == "Europe/Berlin"
    assert [(s["slot"], s["local"], s["action"]) for s in plan["slots"]] == [
        ("2026-03-28T01:30:00Z", "2026-03-28T02:30:00+01:00", "create"),
        ("2026-03-29T01:00:00Z", "2026-03-29T03:00:00+02:00", "create"),  # 02:30 does not exist
        ("2026-03-30T00:30:00Z", "2026-03-30T02:30:00+02:00", "has_run"),
    ]
    assert (plan["runs_created"], plan["slots_with_runs"], plan["slots_skipped"]) == (2, 1, 0)
    assert await state_of(client, key, job) == before  # no event, no run

    done = await client.post(f"/v1/jobs/{job}/backfill", headers=auth(key), json=RANGE)
    assert done.status_code == 200, done.text
    assert done.json()["dry_run"] is False
    assert done.json()["slots"] == plan["slots"]
    versions, runs = await state_of(client, key, job)
    assert len(versions) == len(before[0]) + 1  # BackfillRequested
    assert runs == [("2026-03-28T01:30:00Z", "backfill"), ("2026-03-29T01:00:00Z", "backfill"),
                    ("2026-03-30T00:30:00Z", "backfill")]

    again = await client.post(f"/v1/jobs/{job}/backfill", headers=auth(key),
                              json={**RANGE, "dry_run": True})
    assert [s["action"] for s in again.json()["slots"]] == ["has_run"] * 3


async def test_a_dry_run_is_audited_as_one_that_changed_nothing(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    job = (await client.post("/v1/jobs", headers=auth(key),
                             json={"name": "n", "schedule": BERLIN})).json()["id"]
    r = await client.post(f"/v1/jobs/{job}/backfill", headers=auth(key),
                          json={**RANGE, "dry_run": True})
    assert r.status_code == 200, r.text
    audit = (await client.get("/v1/audit", params={"action": "job.backfill"},
                              headers=auth(key))).json()["items"]
    assert [(a["target_id"], a["outcome"], a["detail"], a["after"]) for a in audit] == [
        (job, "done", "dry run: 3 runs would be created", None)]


async def test_bad_input_and_dag_jobs_get_a_problem_and_change_nothing(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    job = (await client.post("/v1/jobs", headers=auth(key),
                             json={"name": "n", "schedule": BERLIN})).json()["id"]
    before = await state_of(client, key, job)
    assert_problem(await client.post(f"/v1/jobs/{job}/backfill", headers=auth(key),
                                     json={**RANGE, "dry_run": "yes"}), 422, "dry_run")
    assert_problem(await client.post(f"/v1/jobs/{job}/backfill", headers=auth(key), json={
        "start": RANGE["end"], "end": RANGE["start"], "dry_run": True}), 422, "end")
    assert await state_of(client, key, job) == before

    dag = await define(client, key, "etl", [node("a")], [])
    r = await client.post("/v1/jobs", headers=auth(key), json={
        "name": "d", "task": f"dag:{dag['id']}", "schedule": BERLIN})
    assert r.status_code == 201, r.text
    for dry_run in (True, False):
        problem = assert_problem(await client.post(
            f"/v1/jobs/{r.json()['id']}/backfill", headers=auth(key),
            json={**RANGE, "dry_run": dry_run}), 409)
        assert "POST /v1/dags/{id}/runs" in problem["detail"]
