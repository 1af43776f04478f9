"""Changing a workflow's code while runs are in flight (`ctx.patched`) through the worker-gateway
and the real PostgreSQL: a run under the new code records the patch marker as a step of its own,
ahead of the new path's step; a run under the old code records none. (Runs crossing a deploy,
old history replayed by the new code, are tested over the in-memory journal in
tests/unit/test_workflow_steps.py.)"""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.domain import events as ev
from ostinato.sdk import WorkflowContext, workflow
from tests.helpers.integration import new_tenant, queued_workflow_run
from tests.helpers.workflows import drive, events_of

pytestmark = pytest.mark.integration


def billing(calls: list[str], *, deployed: bool) -> Any:
    @workflow("billing.versioned")
    async def flow(ctx: WorkflowContext, payload: None) -> str:
        if deployed and await ctx.patched("fee-v2"):
            fee = await ctx.step("fee", calls.append, "new")
        else:
            fee = await ctx.step("fee", calls.append, "old")
        return str(fee)

    return flow


async def test_a_patch_marker_is_recorded_as_a_step_of_the_run_that_took_the_new_path(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    calls: list[str] = []
    new_run = await queued_workflow_run(pool, tenant_id, "billing.versioned")
    await drive(pool, gateway, key, [billing(calls, deployed=True)], tenant_id, new_run,
                "succeeded")
    old_run = await queued_workflow_run(pool, tenant_id, "billing.versioned")
    await drive(pool, gateway, key, [billing(calls, deployed=False)], tenant_id, old_run,
                "succeeded")
    assert calls == ["new", "old"]
    new_steps = [(e.seq, e.name) for e in await events_of(pool, tenant_id, new_run)
                 if isinstance(e, ev.StepCompleted)]
    assert new_steps == [(0, "patch:fee-v2"), (1, "fee")]
    old_steps = [(e.seq, e.name) for e in await events_of(pool, tenant_id, old_run)
                 if isinstance(e, ev.StepCompleted)]
    assert old_steps == [(0, "fee")]  # no marker: the old code had none
