"""Backfill through the API with its dry run: the dry run lists every slot of the range (UTC and
the schedule's local time, across a DST change) with what a backfill would do, and changes
nothing; the real backfill then does exactly that and answers the same list."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.clock import FakeClock
from ostinato.dags.targets import dag_run_id_for, task_for
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.runs import dags as dag_runs
from ostinato.schedules import ScheduleSpec
from ostinato.stores import dags as dag_store
from ostinato.stores import runs
from services.scheduler.tick import fire_due
from tests.helpers.api import assert_problem, auth
from tests.helpers.dags import advance, node
from tests.helpers.integration import new_tenant, store

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


async def test_bad_input_gets_a_problem_and_changes_nothing(
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


async def test_a_dag_jobs_backfill_starts_one_dag_run_per_missing_slot_across_dst(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    """A DAG job's slots are its DAG runs: the dry run lists them across the spring-forward
    before the job's start (a slot the scheduler fired and one backfilled before are `has_run`,
    the job's next slot on is `upcoming`: the scheduler's) and changes nothing; the backfill
    starts each missing slot's DAG run under the occurrence's own id (trigger `backfill`, never
    a plain run of `dag:<id>`), their roots started by the advance duty; repeating it starts
    none, and the scheduler's next tick meets no run of its own slots."""
    t0 = datetime(2026, 3, 31, 0, 0, tzinfo=UTC)  # the job starts after the spring-forward
    clock = FakeClock(t0)
    tenant_id, key = await new_tenant(pool)
    async with pool.acquire() as conn:
        dag, _ = await dag_runs.define(
            conn, store(clock), tenant_id=tenant_id, name="nightly",
            document={"nodes": [node("extract"), node("load")],
                      "edges": [{"from": "extract", "to": "load"}]},
            rules=dag_runs.Rules(), actor="test")
        job, _ = await submit_job(
            conn, store(clock), clock, tenant_id=tenant_id, request=JobRequest(
                name="nightly-etl", task=task_for(dag.id),
                schedule=ScheduleSpec(**BERLIN, start_at=t0)),
            pools=("default",), max_payload_bytes=1024, actor="test")
    clock.set(datetime(2026, 3, 31, 0, 35, tzinfo=UTC))
    assert await fire_due(pool, store(clock), clock) == []  # the 31st's DAG run, no plain run
    path = f"/v1/jobs/{job.id}/backfill"
    first = await client.post(path, headers=auth(key), json={
        "start": "2026-03-30T00:00:00Z", "end": "2026-03-31T00:00:00Z"})
    assert first.status_code == 200 and first.json()["runs_created"] == 1, first.text

    async def dag_runs_made() -> list[tuple[datetime, str]]:
        async with pool.acquire() as conn:
            made = await dag_store.runs_of(conn, tenant_id, dag.id, 100)
        assert all(r.id == dag_run_id_for(job.id, r.scheduled_for) and r.job_id == job.id
                   for r in made if r.scheduled_for)
        return sorted((r.scheduled_for, r.trigger) for r in made if r.scheduled_for)

    before = await state_of(client, key, str(job.id)), await dag_runs_made()
    whole = {"start": "2026-03-27T12:00:00Z", "end": "2026-04-02T00:00:00Z"}
    dry = await client.post(path, headers=auth(key), json={**whole, "dry_run": True})
    assert dry.status_code == 200, dry.text
    plan = dry.json()
    assert [(s["slot"], s["local"], s["action"]) for s in plan["slots"]] == [
        ("2026-03-28T01:30:00Z", "2026-03-28T02:30:00+01:00", "create"),
        ("2026-03-29T01:00:00Z", "2026-03-29T03:00:00+02:00", "create"),  # 02:30 does not exist
        ("2026-03-30T00:30:00Z", "2026-03-30T02:30:00+02:00", "has_run"),
        ("2026-03-31T00:30:00Z", "2026-03-31T02:30:00+02:00", "has_run"),  # the scheduler's
        ("2026-04-01T00:30:00Z", "2026-04-01T02:30:00+02:00", "upcoming"),  # its next slot
    ]
    assert (await state_of(client, key, str(job.id)), await dag_runs_made()) == before

    done = await client.post(path, headers=auth(key), json=whole)
    assert done.status_code == 200, done.text
    assert done.json()["slots"] == plan["slots"] and done.json()["runs_created"] == 2
    assert await dag_runs_made() == [
        (datetime(2026, 3, 28, 1, 30, tzinfo=UTC), "backfill"),
        (datetime(2026, 3, 29, 1, 0, tzinfo=UTC), "backfill"),
        (datetime(2026, 3, 30, 0, 30, tzinfo=UTC), "backfill"),
        (datetime(2026, 3, 31, 0, 30, tzinfo=UTC), "schedule")]
    assert (await state_of(client, key, str(job.id)))[1] == []  # no plain run of dag:<id>
    again = await client.post(path, headers=auth(key), json=whole)
    assert (again.json()["runs_created"], again.json()["slots_with_runs"]) == (0, 4)
    assert len(await dag_runs_made()) == 4
    clock.set(datetime(2026, 4, 1, 0, 35, tzinfo=UTC))
    assert await fire_due(pool, store(clock), clock) == []  # its own slot, no clash
    assert (await dag_runs_made())[-1] == (datetime(2026, 4, 1, 0, 30, tzinfo=UTC), "schedule")

    while await advance(pool):
        pass
    async with pool.acquire() as conn:
        roots = await runs.page(conn, tenant_id, job_id=job.id, state=None,
                                after=(None, None), limit=10)
    assert sorted(r.scheduled_for for r in roots) == [slot for slot, _ in await dag_runs_made()]
    assert {r.task for r in roots} == {"dag.step"}  # each DAG run's root, extract
