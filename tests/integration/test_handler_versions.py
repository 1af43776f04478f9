"""Versioned handlers through the worker-gateway, the dispatcher's and the reconciler's code and
the real PostgreSQL: a workflow run is pinned to the version that first started it, so a worker
serving another version never takes it; a pinned run no live worker serves is held by the
dispatcher with the reason "no worker serves <task> v<version>", shown by GET /v1/runs/{id} and
GET /v1/tasks, marked stuck once by the reconciler (event, gauge), and runs on once a worker
serving its version comes back."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from ostinato.clock import SystemClock
from ostinato.domain import events as ev
from ostinato.policy.fairness import DEFAULT_CLASSES
from ostinato.sdk import WorkflowContext, workflow
from ostinato.stores.runs import StuckThresholds
from services.dispatcher.dispatcher import Dispatcher, fixed_capacity, live_versions
from services.reconciler.checks.stuck import mark_stuck
from tests.helpers.api import auth
from tests.helpers.integration import dispatch, new_tenant, queued_workflow_run, run_row, store
from tests.helpers.workflows import events_of, signal, state_of, work

pytestmark = pytest.mark.integration
TTL = timedelta(seconds=35)


def billing(task: str, version: int, calls: list[str]) -> Any:
    @workflow(task, version=version)
    async def flow(ctx: WorkflowContext, payload: None) -> int:
        await ctx.step("charge", calls.append, f"charge v{version}")
        await ctx.wait_for_signal("go")
        await ctx.step("email", calls.append, f"email v{version}")
        return version

    return flow


async def suspended_on_v2(pool: asyncpg.Pool, gw: httpx.AsyncClient, key: str,
                          tenant_id: uuid.UUID, task: str, calls: list[str]) -> uuid.UUID:
    run_id = await queued_workflow_run(pool, tenant_id, task)
    await work(gw, key, [billing(task, 2, calls)],
               lambda: _is(pool, tenant_id, run_id, "suspended"), "the run suspended")
    return run_id


async def _is(pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: uuid.UUID, state: str) -> bool:
    return await state_of(pool, tenant_id, run_id) == state


async def test_a_started_workflow_is_only_resumed_by_a_worker_serving_its_version(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    calls: list[str] = []
    pinned = await suspended_on_v2(pool, gateway, key, tenant_id, "billing.pinned", calls)
    row = await run_row(pool, tenant_id, pinned)
    assert (row.task_version, row.pinned) == ("2", True)

    await signal(pool, tenant_id, pinned)
    assert await dispatch(pool) == 1  # no version check here: the claim must refuse it
    fresh = await queued_workflow_run(pool, tenant_id, "billing.pinned")
    # Claims take the oldest queued runs first: the claim that took the newer run would have
    # taken the pinned one too, had a v3 worker been allowed to.
    await work(gateway, key, [billing("billing.pinned", 3, calls)],
               lambda: _is(pool, tenant_id, fresh, "suspended"), "the new run suspended")
    assert await state_of(pool, tenant_id, pinned) == "queued"
    assert (await run_row(pool, tenant_id, fresh)).task_version == "3"

    await work(gateway, key, [billing("billing.pinned", 2, calls)],
               lambda: _is(pool, tenant_id, pinned, "succeeded"), "the pinned run succeeded")
    started = [e for e in await events_of(pool, tenant_id, pinned)
               if isinstance(e, ev.RunStarted)]
    assert [(e.task_version, e.pinned) for e in started] == [("2", True), ("2", True)]
    assert calls == ["charge v2", "charge v3", "email v2"]


async def test_a_run_no_worker_serves_waits_visibly_is_marked_stuck_once_and_runs_on(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    calls: list[str] = []
    task = "billing.stranded"
    run_id = await suspended_on_v2(pool, gateway, key, tenant_id, task, calls)
    r = await client.get("/v1/tasks", params={"task": task}, headers=auth(key))
    assert r.status_code == 200, r.text
    assert [(i["version"], i["suspended"], i["workers"]) for i in r.json()["items"]] \
        == [("2", 1, 0)]

    clock = SystemClock()
    dispatcher = Dispatcher(pool, store(clock), clock, classes=DEFAULT_CLASSES,
                            capacity=fixed_capacity(100, ["default"]), serving=live_versions(TTL))
    await signal(pool, tenant_id, run_id)
    assert await dispatcher.run_round() == 0  # no live worker serves v2: held, not queued
    r = await client.get(f"/v1/runs/{run_id}", headers=auth(key))
    assert r.json()["state"] == "scheduled"
    assert r.json()["waiting_reason"] == f"no worker serves {task} v2 in pool default"
    r = await client.get("/v1/tasks", params={"task": task}, headers=auth(key))
    [item] = r.json()["items"]
    assert (item["version"], item["waiting"], item["stranded"]) == ("2", 1, True)

    limits = StuckThresholds(suspended=timedelta(days=1), child_dead_lettered=timedelta(days=1),
                             unserved=timedelta(0), worker_ttl=TTL)
    assert await mark_stuck(pool, store(), clock, limits=limits) == 1
    assert await mark_stuck(pool, store(), clock, limits=limits) == 0  # once per episode
    [stuck] = [e for e in await events_of(pool, tenant_id, run_id) if isinstance(e, ev.RunStuck)]
    assert (stuck.reason, stuck.detail) == ("no_worker", f"no worker serves {task} v2 in pool "
                                                         "default")
    assert REGISTRY.get_sample_value("ostinato_runs_stuck",
                                     {"tenant": str(tenant_id), "reason": "no_worker"}) == 1

    await work(gateway, key, [billing(task, 2, calls)],
               lambda: _is(pool, tenant_id, run_id, "succeeded"), "the run succeeded",
               between=dispatcher.run_round)
    assert calls == ["charge v2", "email v2"]
    await mark_stuck(pool, store(), clock, limits=limits)
    assert REGISTRY.get_sample_value("ostinato_runs_stuck",
                                     {"tenant": str(tenant_id), "reason": "no_worker"}) == 0
