"""Compensation (sagas: `ctx.step(..., compensate=)`) through the worker-gateway, the API and the
real PostgreSQL: a workflow that fails for good records its compensations in reverse after the
failed step and ends with its own error; one cancelled while asleep is woken, compensates, and
ends cancelled; one whose compensation fails for good reaches the dead letters named as such,
even though its cancel was requested."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from ostinato.domain import events as ev
from tests.helpers.api import auth
from tests.helpers.integration import new_tenant, queued_workflow_run, run_row
from tests.helpers.workflows import drive, events_of, kinds, saga, step_names

pytestmark = pytest.mark.integration


async def test_a_failed_saga_compensates_in_reverse_and_ends_with_its_own_error(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    calls: list[str] = []
    run_id = await queued_workflow_run(pool, tenant_id, "travel.saga")
    await drive(pool, gateway, key, [saga(calls, fail=True)], tenant_id, run_id,
                "dead_lettered")
    assert calls == ["book hotel", "book car", "pay", "undo car", "undo hotel"]
    assert await step_names(pool, tenant_id, run_id) == [
        "hotel", "car", "pay", "compensate:car", "compensate:hotel"]
    row = await run_row(pool, tenant_id, run_id)
    assert row.last_error["type"] == "card_declined" and row.compensable
    completed = [e for e in await events_of(pool, tenant_id, run_id)
                 if isinstance(e, ev.StepCompleted)]
    assert [(e.name, e.compensable) for e in completed] == [
        ("hotel", True), ("car", True), ("compensate:car", False), ("compensate:hotel", False)]


async def test_a_saga_cancelled_while_asleep_is_woken_compensates_and_ends_cancelled(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    calls: list[str] = []
    trip = saga(calls, sleep=True)
    run_id = await queued_workflow_run(pool, tenant_id, "travel.saga")
    await drive(pool, gateway, key, [trip], tenant_id, run_id, "suspended")
    r = await client.post(f"/v1/runs/{run_id}/cancel", headers=auth(key))
    assert r.status_code == 200, r.text
    assert r.json() == {"state": "scheduled", "cancel": "requested"}  # woken to compensate
    again = await client.post(f"/v1/runs/{run_id}/cancel", headers=auth(key))
    assert again.json()["cancel"] == "requested"  # asked once: nothing more is recorded
    await drive(pool, gateway, key, [trip], tenant_id, run_id, "cancelled")
    assert calls == ["book hotel", "book car", "undo car", "undo hotel"]  # never paid
    events = kinds(await events_of(pool, tenant_id, run_id))
    assert events[events.index("RunSuspended"):events.index("RunSuspended") + 3] == [
        "RunSuspended", "CancelRequested", "RunWoken"]
    assert events.count("CancelRequested") == 1 and events[-1] == "RunCancelled"
    assert await step_names(pool, tenant_id, run_id) == [
        "hotel", "car", "compensate:car", "compensate:hotel"]  # the sleep never fired


async def test_a_failed_compensation_reaches_the_dead_letters_even_when_cancelled(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    calls: list[str] = []
    trip = saga(calls, sleep=True, undo_fails=True)
    run_id = await queued_workflow_run(pool, tenant_id, "travel.saga")
    await drive(pool, gateway, key, [trip], tenant_id, run_id, "suspended")
    assert (await client.post(f"/v1/runs/{run_id}/cancel", headers=auth(key))).status_code == 200
    await drive(pool, gateway, key, [trip], tenant_id, run_id, "dead_lettered")
    row = await run_row(pool, tenant_id, run_id)
    assert row.last_error["type"] == "compensation_failed"
    assert "compensate:car" in row.last_error["message"]
    assert "undo hotel" not in calls  # stopped at the failed compensation, for an operator
    r = await client.get(f"/v1/dead-letters/{run_id}", headers=auth(key))
    assert r.status_code == 200, r.text
    assert r.json()["error_type"] == "compensation_failed"
