"""Workflow steps through the worker-gateway's HTTP routes and the real PostgreSQL: an SDK
`Worker` runs a workflow whose run fails after its first step and resumes on its retry without
rerunning it; step reports are fenced (409 and `StaleWriteRejected` for a stale token), repeats
are answered without a second record, and a resuming workflow reads its history in pages, large
outputs put back from the blob store."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from ostinato.clock import FakeClock, SystemClock
from ostinato.domain import events as ev
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import read_stream
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.sdk import RetryableError, Worker, WorkflowContext, workflow
from ostinato.sdk import protocol as p
from ostinato.stores import runs, steps
from ostinato.testing.waiting import until
from services.scheduler.tick import fire_due, release_retries
from services.worker_gateway.app import create_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.steps import INLINE_OUTPUT_BYTES
from services.worker_gateway.wakeups import ReadySignals

from .conftest import ADMIN, auth
from .helpers import dispatch, new_job, new_tenant, store

pytestmark = pytest.mark.integration
BASE = "http://gateway.test"


@pytest.fixture
async def gateway(pool: asyncpg.Pool, db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    service = Service("worker-gateway", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    transport = httpx.ASGITransport(app=create_app(service, attempts, ReadySignals()))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        yield c


async def queued_workflow_run(pool: asyncpg.Pool, tenant_id: uuid.UUID, task: str,
                              payload: Any = None) -> uuid.UUID:
    """A job of `task` due now, its run created by the scheduler's code and queued by the
    dispatcher's."""
    await new_job(pool, tenant_id, name=task, payload=payload)
    [created] = await fire_due(pool, store(), SystemClock())
    assert await dispatch(pool) == 1
    async with pool.acquire() as conn:
        [run] = await runs.page(conn, tenant_id, job_id=created.job_id, state=None,
                                after=(None, None), limit=1)
    return run.id


async def run_row(pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: uuid.UUID) -> runs.RunRow:
    async with pool.acquire() as conn:
        row = await runs.by_id(conn, tenant_id, run_id)
    assert row is not None
    return row


async def work_until(pool: asyncpg.Pool, gw: httpx.AsyncClient, key: str, task: Any,
                     tenant_id: uuid.UUID, run_id: uuid.UUID, state: str) -> None:
    """Run an SDK worker with `task` until the run reaches `state`."""
    worker = Worker(BASE, key, [task], http_client=gw, claim_wait_seconds=0.2,
                    shutdown_grace_seconds=0)
    running = asyncio.create_task(worker.run())
    try:
        async def reached() -> bool:
            return (await run_row(pool, tenant_id, run_id)).state == state
        await until(reached, within=60, what=f"run {run_id} {state}")
    finally:
        await worker.stop()
        await running


async def test_a_failed_workflow_resumes_on_its_retry_without_rerunning_its_first_step(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    effects: list[str] = []

    async def charge(amount: int) -> dict[str, int]:
        effects.append("charge")
        return {"charged": amount}

    async def receipt(charged: dict[str, int]) -> str:
        effects.append("receipt")
        if effects.count("receipt") == 1:
            raise RetryableError("smtp down")
        return f"sent {charged['charged']}"

    @workflow("billing.invoice")
    async def invoice(ctx: WorkflowContext, payload: dict[str, int]) -> str:
        charged = await ctx.step("charge", charge, payload["amount"])
        return await ctx.step("receipt", receipt, charged)

    run_id = await queued_workflow_run(pool, tenant_id, "billing.invoice", {"amount": 7})
    await work_until(pool, gateway, key, invoice, tenant_id, run_id, "retry_scheduled")
    assert (await run_row(pool, tenant_id, run_id)).steps_done == 1
    later = FakeClock(datetime.now(UTC) + timedelta(hours=1))  # past any retry backoff
    assert await release_retries(pool, store(), later) == 1
    assert await dispatch(pool) == 1
    await work_until(pool, gateway, key, invoice, tenant_id, run_id, "succeeded")

    assert effects == ["charge", "receipt", "receipt"]  # charge once, receipt on both attempts
    async with pool.acquire() as conn:
        stream = [r.event for r in await read_stream(conn, run_id, tenant_id)]
        recorded = await steps.page(conn, tenant_id, run_id, after=-1, limit=10)
    kinds = [type(e).__name__ for e in stream]
    assert kinds == ["RunScheduled", "RunQueued", "RunStarted", "StepCompleted", "RunFailed",
                     "RetryScheduled", "RetryDue", "RunQueued", "RunStarted", "StepCompleted",
                     "RunSucceeded"]
    step_events = [e for e in stream if isinstance(e, ev.StepCompleted)]
    assert [(e.seq, e.name, e.attempt) for e in step_events] == [(0, "charge", 1),
                                                                 (1, "receipt", 2)]
    assert [(s.seq, s.name, s.output) for s in recorded] == [
        (0, "charge", {"charged": 7}), (1, "receipt", "sent 7")]
    row = await run_row(pool, tenant_id, run_id)
    assert row.steps_done == 2 and row.attempt == 2


async def claimed_run(pool: asyncpg.Pool, gw: httpx.AsyncClient, tenant_id: uuid.UUID,
                      key: str) -> p.ClaimedRun:
    await queued_workflow_run(pool, tenant_id, "wf.raw")
    r = await gw.post(p.CLAIM_PATH, json={"worker_id": "w1", "max_runs": 1}, headers=auth(key))
    assert r.status_code == 200, r.text
    [run] = msgspec.json.decode(r.content, type=p.ClaimResponse).runs
    return run


async def send_steps(gw: httpx.AsyncClient, key: str,
                     items: list[dict[str, Any]]) -> list[p.BatchItemResult]:
    r = await gw.post(p.BATCH_PATH, json={"worker_id": "w1", "steps": items}, headers=auth(key))
    assert r.status_code == 200, r.text
    return msgspec.json.decode(r.content, type=p.BatchResponse).results


async def test_step_reports_are_fenced_repeats_are_idempotent_and_gaps_refused(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    step0 = {"run_id": run.run_id, "fencing_token": run.fencing_token, "seq": 0, "name": "a",
             "output": 1}
    stale = {**step0, "fencing_token": run.fencing_token - 1}
    gap = {**step0, "seq": 5, "name": "f"}
    results = await send_steps(gateway, key, [stale, step0, step0, gap])
    assert [r.status for r in results] == [409, 200, 200, 422]
    assert all(r.kind == "step" for r in results)
    run_id = uuid.UUID(run.run_id)
    async with pool.acquire() as conn:
        stream = [r.event for r in await read_stream(conn, run_id, tenant_id)]
    assert [type(e).__name__ for e in stream[3:]] == ["StaleWriteRejected", "StepCompleted"]
    assert stream[3].operation == "step"  # type: ignore[attr-defined]
    _, other_key = await new_tenant(pool)
    [foreign] = await send_steps(gateway, other_key, [{**step0, "seq": 1, "name": "b"}])
    assert foreign.status == 404  # another tenant's run does not exist for this key
    assert (await run_row(pool, tenant_id, run_id)).steps_done == 1


async def test_a_resuming_workflow_reads_its_history_in_pages_with_large_outputs_restored(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    big = "x" * (INLINE_OUTPUT_BYTES + 1)
    items = [{"run_id": run.run_id, "fencing_token": run.fencing_token, "seq": i,
              "name": f"s{i % 3}", "output": big if i == 1500 else i} for i in range(2500)]
    for start in range(0, len(items), p.MAX_BATCH_ITEMS):
        results = await send_steps(gateway, key, items[start:start + p.MAX_BATCH_ITEMS])
        assert {r.status for r in results} == {200}
    pages: list[list[p.StepRecord]] = []
    after = -1
    while True:
        r = await gateway.post(p.run_path(run.run_id, "steps"), headers=auth(key),
                               json={"fencing_token": run.fencing_token, "after": after})
        assert r.status_code == 200, r.text
        page = msgspec.json.decode(r.content, type=p.StepsResponse).steps
        if not page:
            break
        pages.append(page)
        after = page[-1].seq
    assert [len(page) for page in pages] == [1000, 1000, 500]
    seen = [s for page in pages for s in page]
    assert [s.seq for s in seen] == list(range(2500))
    assert seen[1500].output == big and seen[1499].output == 1499
    async with pool.acquire() as conn:
        [stored] = await steps.page(conn, tenant_id, uuid.UUID(run.run_id), after=1499, limit=1)
    assert stored.output is None and stored.output_ref is not None  # the event holds a ref
    r = await gateway.post(p.run_path(run.run_id, "steps"), headers=auth(key),
                           json={"fencing_token": run.fencing_token + 1})
    assert r.status_code == 409
    assert r.headers["content-type"].startswith("application/problem+json")


async def test_the_step_events_fold_into_the_runs_row(pool: asyncpg.Pool,
                                                     gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    await send_steps(gateway, key, [
        {"run_id": run.run_id, "fencing_token": run.fencing_token, "seq": 0, "name": "a"},
        {"run_id": run.run_id, "fencing_token": run.fencing_token, "seq": 1, "name": "b",
         "error": {"type": "declined", "message": "no", "retryable": False}}])
    run_id = uuid.UUID(run.run_id)
    async with pool.acquire() as conn:
        [locked] = await runs.lock(conn, [run_id])
        stream = await read_stream(conn, run_id, tenant_id)
    head = StreamHead.of(locked)
    assert head.version == len(stream) and head.state == "running"
    assert locked.steps_done == 2
    assert isinstance(stream[-1].event, ev.StepFailed)
    assert stream[-1].event.error_type == "declined"
