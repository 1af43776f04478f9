"""Pausing and resuming in-flight workflow runs (`ostinato.runs.pausing`) through the API, the
worker-gateway and the real PostgreSQL: a paused sleeper's timer is frozen and gets the time it
had left on resume; a paused running workflow starts no next step; a signal sent to a paused
run is recorded but wakes nothing until the resume; the filter form pauses a task's runs; bad
requests change nothing. The API's clock is a fake moved by hand."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from ostinato.clock import Clock, FakeClock
from ostinato.domain import events as ev
from ostinato.sdk import WorkflowContext, workflow
from services.scheduler.tick import wake_suspended
from tests.helpers.api import assert_problem, auth
from tests.helpers.integration import dispatch, new_tenant, queued_workflow_run, run_row, store
from tests.helpers.workflows import drive, events_of, kinds, napper

pytestmark = pytest.mark.integration


@pytest.fixture
def api_clock() -> Clock:
    return FakeClock(datetime.now(UTC))


async def test_a_paused_timer_is_frozen_and_gets_the_time_it_had_left_on_resume(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient,
        api_clock: FakeClock) -> None:
    tenant_id, key = await new_tenant(pool)
    ran: list[str] = []
    run_id = await queued_workflow_run(pool, tenant_id, "ops.nap")
    await drive(pool, gateway, key, [napper(ran)], tenant_id, run_id, "suspended")
    due = (await run_row(pool, tenant_id, run_id)).wake_at
    assert due is not None
    r = await client.post(f"/v1/runs/{run_id}/pause", headers=auth(key),
                          json={"reason": "incident 42"})
    assert r.status_code == 200 and r.json() == {"paused": True, "changed": True}
    again = await client.post(f"/v1/runs/{run_id}/pause", headers=auth(key))
    assert again.json()["changed"] is False  # paused already: nothing more recorded
    row = await run_row(pool, tenant_id, run_id)
    assert row.paused and row.wake_at is None and row.frozen_wake_at == due
    assert row.paused_at is not None
    left = due - row.paused_at
    view = (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()
    assert view["paused"] is True and view["waiting_reason"].startswith("paused (waiting for timer")
    assert await wake_suspended(pool, store(), FakeClock(due + timedelta(days=1))) == 0  # frozen

    api_clock.set(api_clock.now() + timedelta(days=1))  # a day later
    r = await client.post(f"/v1/runs/{run_id}/resume", headers=auth(key), json={"reason": "ok"})
    assert r.status_code == 200 and r.json() == {"paused": False, "changed": True}
    row = await run_row(pool, tenant_id, run_id)
    assert not row.paused and row.wake_at == api_clock.now() + left  # the time it had left
    assert await wake_suspended(pool, store(), FakeClock(row.wake_at - timedelta(seconds=1))) == 0
    assert await wake_suspended(pool, store(), FakeClock(row.wake_at)) == 1
    await drive(pool, gateway, key, [napper(ran)], tenant_id, run_id, "succeeded")
    assert ran == ["before", "after"]
    paused, resumed = [e for e in await events_of(pool, tenant_id, run_id)
                       if isinstance(e, ev.RunPaused | ev.RunResumed)]
    assert isinstance(paused, ev.RunPaused) and paused.reason == "incident 42"
    assert paused.frozen_wake_in == pytest.approx(left.total_seconds())
    assert isinstance(resumed, ev.RunResumed) and resumed.reason == "ok"


async def test_a_paused_running_workflow_starts_no_next_step_until_resumed(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    ran: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def long_step() -> str:
        ran.append("long")
        started.set()
        await release.wait()
        return "done"

    @workflow("ops.long")
    async def flow(ctx: WorkflowContext, payload: None) -> str:
        await ctx.step("long", long_step)
        await ctx.step("next", ran.append, "next")
        return "finished"

    run_id = await queued_workflow_run(pool, tenant_id, "ops.long")
    driving = asyncio.create_task(drive(pool, gateway, key, [flow], tenant_id, run_id,
                                        "suspended"))
    await asyncio.wait_for(started.wait(), 600)  # a hang guard only
    r = await client.post(f"/v1/runs/{run_id}/pause", headers=auth(key))
    assert r.status_code == 200 and r.json()["changed"] is True
    release.set()  # the running step finishes; it is recorded, then the run is suspended
    await driving
    row = await run_row(pool, tenant_id, run_id)
    assert (row.state, row.wait_reason, row.steps_done, row.paused) == (
        "suspended", "paused", 1, True)
    assert ran == ["long"]  # the next step did not start
    r = await client.post(f"/v1/runs/{run_id}/resume", headers=auth(key))
    assert r.status_code == 200
    await drive(pool, gateway, key, [flow], tenant_id, run_id, "succeeded")
    assert ran == ["long", "next"]
    names = kinds(await events_of(pool, tenant_id, run_id))
    i = names.index("RunPaused")
    assert names[i:i + 5] == ["RunPaused", "StepCompleted", "RunSuspended", "RunResumed",
                              "RunWoken"]


async def test_a_signal_to_a_paused_run_is_recorded_and_wakes_it_only_on_resume(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    got: list[object] = []

    @workflow("ops.approve")
    async def approve(ctx: WorkflowContext, payload: None) -> None:
        got.append(await ctx.wait_for_signal("go"))

    run_id = await queued_workflow_run(pool, tenant_id, "ops.approve")
    await drive(pool, gateway, key, [approve], tenant_id, run_id, "suspended")
    assert (await client.post(f"/v1/runs/{run_id}/pause", headers=auth(key))).status_code == 200
    r = await client.post(f"/v1/runs/{run_id}/signals/go", headers=auth(key), json={"n": 1})
    assert r.status_code == 202 and r.json()["delivered"] is True
    row = await run_row(pool, tenant_id, run_id)
    assert row.state == "suspended" and row.steps_done == 1  # recorded, not woken
    assert kinds(await events_of(pool, tenant_id, run_id))[-1] == "SignalDelivered"
    assert await dispatch(pool) == 0
    assert (await client.post(f"/v1/runs/{run_id}/resume", headers=auth(key))).status_code == 200
    await drive(pool, gateway, key, [approve], tenant_id, run_id, "succeeded")
    assert got == [{"n": 1}]


async def test_the_runs_of_a_task_pause_and_resume_together_and_bad_requests_change_nothing(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    ran: list[str] = []
    first = await queued_workflow_run(pool, tenant_id, "ops.nap")
    second = await queued_workflow_run(pool, tenant_id, "ops.nap")
    for run_id in (first, second):
        await drive(pool, gateway, key, [napper(ran)], tenant_id, run_id, "suspended")
    _, other_key = await new_tenant(pool)
    r = await client.post("/v1/runs/pause", headers=auth(other_key), json={"task": "ops.nap"})
    assert r.status_code == 200 and r.json() == {"changed": 0}  # another tenant's runs
    r = await client.post("/v1/runs/pause", headers=auth(key), json={"task": "ops.nap"})
    assert r.json() == {"changed": 2}
    assert (await client.post("/v1/runs/pause", headers=auth(key),
                              json={"task": "ops.nap"})).json() == {"changed": 0}
    job_id = (await run_row(pool, tenant_id, first)).job_id
    r = await client.post("/v1/runs/resume", headers=auth(key), json={"job_id": str(job_id)})
    assert r.json() == {"changed": 1}
    assert [(await run_row(pool, tenant_id, i)).paused for i in (first, second)] == [
        False, True]

    assert_problem(await client.post("/v1/runs/pause", headers=auth(key), json={}), 422,
                   "task")
    assert_problem(await client.post("/v1/runs/pause", headers=auth(key),
                                     json={"task": "x", "extra": 1}), 422, "extra")
    assert_problem(await client.post(f"/v1/runs/{uuid.uuid4()}/pause", headers=auth(key)), 404)
    assert_problem(await client.post(f"/v1/runs/{first}/pause", headers=auth(other_key)), 404)
    waiting = await queued_workflow_run(pool, tenant_id, "ops.other")  # queued, not running
    body = assert_problem(await client.post(f"/v1/runs/{waiting}/pause", headers=auth(key)),
                          409)
    assert "running or suspended" in body["detail"]
    assert not (await run_row(pool, tenant_id, waiting)).paused
    assert_problem(await client.post(f"/v1/runs/{first}/pause", headers=auth(key),
                                     json={"reason": "x" * 1001}), 422, "reason")
