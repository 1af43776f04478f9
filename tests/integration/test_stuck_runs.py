"""Stuck runs made visible by the reconciler's code, over real runs through the worker-gateway
and the real PostgreSQL: a workflow suspended too long on a signal, one waiting on a
dead-lettered child, and one dead-lettered by a failed compensation each get one `RunStuck`
with its reason, count in `ostinato_runs_stuck{tenant,reason}`, and leave the gauge when they
stop being stuck. (The no-worker reason: tests/integration/test_handler_versions.py.)"""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from ostinato.clock import SystemClock
from ostinato.domain import events as ev
from ostinato.runs.commands import triage
from ostinato.runs.signals import send_signal
from ostinato.sdk import PermanentError, WorkflowContext, task, workflow
from ostinato.stores.runs import StuckThresholds
from services.reconciler.checks.stuck import mark_stuck
from tests.helpers.integration import dispatch, new_tenant, queued_workflow_run, store
from tests.helpers.workflows import drive, events_of, saga, signal, state_of, work

pytestmark = pytest.mark.integration
NOW = timedelta(0)  # thresholds of zero: anything in the state counts at once
LIMITS = StuckThresholds(suspended=NOW, child_dead_lettered=NOW, unserved=timedelta(days=1),
                         worker_ttl=timedelta(seconds=35))


def gauge(tenant_id: object, reason: str) -> float | None:
    return REGISTRY.get_sample_value("ostinato_runs_stuck",
                                     {"tenant": str(tenant_id), "reason": reason})


async def stuck_events(pool: asyncpg.Pool, tenant_id: object, run_id: object) -> list[ev.RunStuck]:
    return [e for e in await events_of(pool, tenant_id, run_id)  # type: ignore[arg-type]
            if isinstance(e, ev.RunStuck)]


async def test_a_workflow_suspended_too_long_is_marked_once_and_clears_when_woken(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)

    @workflow("stuck.waiting")
    async def waits(ctx: WorkflowContext, payload: None) -> str:
        await ctx.wait_for_signal("approve")
        return "approved"

    run_id = await queued_workflow_run(pool, tenant_id, "stuck.waiting")
    await drive(pool, gateway, key, [waits], tenant_id, run_id, "suspended")
    clock = SystemClock()
    assert await mark_stuck(pool, store(), clock, limits=LIMITS) >= 1
    assert await mark_stuck(pool, store(), clock, limits=LIMITS) == 0  # once per episode
    [stuck] = await stuck_events(pool, tenant_id, run_id)
    assert (stuck.reason, stuck.detail) == ("suspended_too_long",
                                            "waiting for signal 'approve'")
    assert gauge(tenant_id, "suspended_too_long") == 1

    await signal(pool, tenant_id, run_id)  # a different signal name: still waiting
    await mark_stuck(pool, store(), clock, limits=LIMITS)
    assert gauge(tenant_id, "suspended_too_long") == 1
    assert len(await stuck_events(pool, tenant_id, run_id)) == 2  # a new episode: it moved

    async with pool.acquire() as conn:
        await send_signal(conn, store(), tenant_id=tenant_id, run_id=run_id, name="approve",
                          payload=None, actor="test", idempotency_key=None,
                          max_payload_bytes=1000)
    await mark_stuck(pool, store(), clock, limits=LIMITS)
    assert gauge(tenant_id, "suspended_too_long") == 0


async def test_a_parent_waiting_on_a_dead_lettered_child_is_marked_stuck(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)

    @task("stuck.capture")
    async def capture(payload: None) -> None:
        raise PermanentError("card declined", type="declined")

    @workflow("stuck.order")
    async def order(ctx: WorkflowContext, payload: None) -> None:
        await ctx.child("stuck.capture")

    run_id = await queued_workflow_run(pool, tenant_id, "stuck.order")
    children: list[object] = []

    async def child_dead() -> bool:  # the parents are never told: the scheduler is "down"
        await dispatch(pool)
        if not children:
            children.extend(e.child_run_id for e in await events_of(pool, tenant_id, run_id)
                            if isinstance(e, ev.ChildStarted))
        return bool(children) and await state_of(pool, tenant_id, children[0]) == "dead_lettered"

    await work(gateway, key, [order, capture], child_dead, "the child dead-lettered")
    await mark_stuck(pool, store(), SystemClock(), limits=LIMITS)
    reasons = [(e.reason, e.detail) for e in await stuck_events(pool, tenant_id, run_id)]
    assert reasons == [("child_dead_lettered",
                        f"child run {children[0]} (stuck.capture) is dead-lettered: declined")]
    assert gauge(tenant_id, "child_dead_lettered") == 1


async def test_a_failed_compensation_is_stuck_until_its_dead_letter_is_triaged(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    calls: list[str] = []
    run_id = await queued_workflow_run(pool, tenant_id, "travel.saga")
    await drive(pool, gateway, key, [saga(calls, fail=True, undo_fails=True)], tenant_id,
                run_id, "dead_lettered")
    clock = SystemClock()
    await mark_stuck(pool, store(), clock, limits=LIMITS)
    [stuck] = await stuck_events(pool, tenant_id, run_id)
    assert stuck.reason == "compensation_failed" and "compensate:car" in stuck.detail
    assert gauge(tenant_id, "compensation_failed") == 1
    async with pool.acquire() as conn:
        await triage(conn, store(), tenant_id=tenant_id, run_id=run_id, state="fixed",
                     comment="car returned by hand", actor="test")
    await mark_stuck(pool, store(), clock, limits=LIMITS)
    assert gauge(tenant_id, "compensation_failed") == 0
    assert len(await stuck_events(pool, tenant_id, run_id)) == 1
