"""A workflow of 100,000 steps completes: the history has no size limit that ends a run, and a
resuming attempt reads it a page at a time (100 pages of 1,000 steps), holding one page.

The first 99,990 positions are recorded through the gateway's batch protocol under the run's
token, as an earlier attempt of the run would have recorded them one by one (a lone workflow
records about a hundred steps a second, so running all of them live would take this test tens
of minutes; `bench/workflows.py` runs a long workflow live and samples the worker's memory).
The run's next attempt is the SDK's: it replays the 99,990 recorded steps without running them
and runs the last ten."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from ostinato.clock import FakeClock
from ostinato.sdk import WorkflowContext, workflow
from ostinato.wire import worker as p
from services.scheduler.tick import release_retries
from tests.helpers.api import auth
from tests.helpers.integration import dispatch, new_tenant, run_row, store
from tests.helpers.workflows import claimed_run, send_steps, work_until

pytestmark = pytest.mark.integration

TOTAL, RECORDED = 100_000, 99_990


async def test_a_workflow_of_a_hundred_thousand_steps_completes(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)  # a run of task "wf.raw"
    run_id = uuid.UUID(run.run_id)
    for start in range(0, RECORDED, p.MAX_BATCH_ITEMS):
        items = [{"run_id": run.run_id, "fencing_token": run.fencing_token, "seq": i,
                  "name": "row", "output": i}
                 for i in range(start, min(start + p.MAX_BATCH_ITEMS, RECORDED))]
        assert {r.status for r in await send_steps(gateway, key, items)} == {200}
    assert (await run_row(pool, tenant_id, run_id)).steps_done == RECORDED
    # the attempt ends (its lease expires); the run's retry is the SDK's
    r = await gateway.post(p.BATCH_PATH, headers=auth(key), json={
        "worker_id": "w1", "failures": [{"run_id": run.run_id, "fencing_token":
                                         run.fencing_token, "error": {
                                             "type": "worker_lost", "message": "gone",
                                             "retryable": True}}]})
    assert r.status_code == 200, r.text
    assert (await run_row(pool, tenant_id, run_id)).state == "retry_scheduled"
    assert await release_retries(pool, store(), FakeClock(datetime.now(UTC) + timedelta(hours=1)))
    assert await dispatch(pool) == 1

    ran: list[int] = []
    pages: list[int] = []

    def one(i: int) -> int:
        ran.append(i)
        return i

    @workflow("wf.raw")
    async def long(ctx: WorkflowContext, payload: None) -> int:
        total = 0
        for i in range(TOTAL):
            total += await ctx.step("row", one, i)
        return total

    async def count_pages(request: httpx.Request) -> None:
        if request.url.path.endswith("/steps"):
            pages.append(1)

    gateway.event_hooks["request"].append(count_pages)
    await work_until(pool, gateway, key, long, tenant_id, run_id, "succeeded")
    assert ran == list(range(RECORDED, TOTAL))  # only the unrecorded steps ran
    assert len(pages) == RECORDED // p.MAX_STEPS_PAGE + 1  # 100 pages, one at a time
    row = await run_row(pool, tenant_id, run_id)
    assert row.steps_done == TOTAL and row.attempt == 2
    async with pool.acquire() as conn:
        output = await conn.fetchval("SELECT data FROM blobs WHERE id = $1", row.output_ref)
    assert output == sum(range(TOTAL))
