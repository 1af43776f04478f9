"""Workflow steps through the worker-gateway's HTTP routes and the real PostgreSQL: an SDK
`Worker` runs a workflow whose run fails after its first step and resumes on its retry without
rerunning it; step reports are fenced (409 and `StaleWriteRejected` for a stale token), repeats
are answered without a second record, and a resuming workflow reads its history in pages, large
outputs put back from the blob store."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest
from prometheus_client import REGISTRY

from ostinato.clock import FakeClock, SystemClock
from ostinato.domain import events as ev
from ostinato.domain.workflow import INLINE_OUTPUT_BYTES
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import read_stream
from ostinato.jobs.request import JobRequest
from ostinato.jobs.submit import submit_jobs
from ostinato.leases import attempts as attempt_leases
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.sdk import RetryableError, SignalTimeout, Worker, WorkflowContext, workflow
from ostinato.stores import limits, runs, steps
from ostinato.wire import worker as p
from services.reconciler.checks import pipeline
from services.scheduler.tick import fire_due, release_retries, wake_suspended
from services.worker_gateway.app import create_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.wakeups import ReadySignals
from tests.helpers.api import ADMIN, GATEWAY_BASE, assert_problem, auth
from tests.helpers.integration import dispatch, new_tenant, queued_workflow_run, run_row, store
from tests.helpers.waiting import until
from tests.helpers.workflows import claimed_run, events_of, send_steps, work_until

pytestmark = pytest.mark.integration


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


# -- timers and signals ----------------------------------------------------------------------

async def test_a_sleeping_workflow_frees_its_worker_and_wakes_at_its_due_time(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    effects: list[str] = []

    async def effect(name: str) -> str:
        effects.append(name)
        return name

    @workflow("billing.dunning")
    async def dunning(ctx: WorkflowContext, payload: None) -> str:
        await ctx.step("remind", effect, "remind")
        await ctx.sleep(timedelta(hours=1))
        return await ctx.step("escalate", effect, "escalate")

    run_id = await queued_workflow_run(pool, tenant_id, "billing.dunning")
    await work_until(pool, gateway, key, dunning, tenant_id, run_id, "suspended")
    row = await run_row(pool, tenant_id, run_id)
    assert (row.wait_reason, row.wait_seq, row.wait_name) == ("timer", 1, "sleep")
    assert row.wake_at is not None and row.steps_done == 1
    async with pool.acquire() as conn:
        assert await attempt_leases.current_tokens(conn, [run_id], tenant_id) == []  # no lease
        assert await limits.in_flight(conn) == []  # no dispatch slot held
    suspended = next(e for e in await events_of(pool, tenant_id, run_id)
                     if isinstance(e, ev.RunSuspended))
    assert suspended.wake_at == row.wake_at and suspended.reason == "timer"

    before = FakeClock(row.wake_at - timedelta(seconds=1))
    assert await wake_suspended(pool, store(), before) == 0  # not yet due
    first_due = row.due_at
    assert await wake_suspended(pool, store(), FakeClock(row.wake_at)) == 1
    woken = await run_row(pool, tenant_id, run_id)
    assert woken.state == "scheduled"
    assert first_due is not None and woken.due_at is not None and woken.due_at > first_due
    assert await dispatch(pool) == 1
    await work_until(pool, gateway, key, dunning, tenant_id, run_id, "succeeded")
    assert effects == ["remind", "escalate"]
    kinds = [type(e).__name__ for e in await events_of(pool, tenant_id, run_id)]
    assert kinds == ["RunScheduled", "RunQueued", "RunStarted", "StepCompleted", "RunSuspended",
                     "TimerFired", "RunWoken", "RunQueued", "RunStarted", "StepCompleted",
                     "RunSucceeded"]
    row = await run_row(pool, tenant_id, run_id)
    assert row.wake_at is None and row.wait_reason is None and row.steps_done == 3


def approval_workflow(seen: list[Any]) -> Any:
    @workflow("orders.approval")
    async def approval(ctx: WorkflowContext, payload: None) -> Any:
        try:
            answer = await ctx.wait_for_signal("approve", timeout=timedelta(hours=1))
        except SignalTimeout:
            answer = "timed out"
        seen.append(answer)
        return answer

    return approval


async def test_a_signal_wakes_a_waiting_workflow_and_one_sent_early_is_kept(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    seen: list[Any] = []
    approval = approval_workflow(seen)
    # after the wait: the workflow suspends, the signal wakes it
    late = await queued_workflow_run(pool, tenant_id, "orders.approval")
    await work_until(pool, gateway, key, approval, tenant_id, late, "suspended")
    assert (await run_row(pool, tenant_id, late)).wait_signal == "approve"
    r = await client.post(f"/v1/runs/{late}/signals/approve", json={"by": "ops"},
                          headers={**auth(key), "Idempotency-Key": "k1"})
    assert r.status_code == 202, r.text
    assert r.json()["delivered"] is True and r.json()["created"] is True
    again = await client.post(f"/v1/runs/{late}/signals/approve", json={"by": "ops"},
                              headers={**auth(key), "Idempotency-Key": "k1"})
    assert again.status_code == 200 and again.json()["signal_id"] == r.json()["signal_id"]
    assert (await run_row(pool, tenant_id, late)).state == "scheduled"
    assert await dispatch(pool) == 1
    await work_until(pool, gateway, key, approval, tenant_id, late, "succeeded")
    assert seen == [{"by": "ops"}]
    kinds = [type(e).__name__ for e in await events_of(pool, tenant_id, late)]
    assert kinds[3:] == ["RunSuspended", "SignalReceived", "SignalDelivered", "RunWoken",
                         "RunQueued", "RunStarted", "RunSucceeded"]  # the repeat added nothing

    # before the wait: kept, and the wait takes it without suspending
    early = await queued_workflow_run(pool, tenant_id, "orders.approval")
    r = await client.post(f"/v1/runs/{early}/signals/approve", json=7, headers=auth(key))
    assert r.status_code == 202 and r.json()["delivered"] is False
    await work_until(pool, gateway, key, approval, tenant_id, early, "succeeded")
    assert seen[-1] == 7
    kinds = [type(e).__name__ for e in await events_of(pool, tenant_id, early)]
    assert "RunSuspended" not in kinds and "SignalDelivered" in kinds

    # a finished run takes no signal; bad input changes nothing
    r = await client.post(f"/v1/runs/{early}/signals/approve", json=1, headers=auth(key))
    assert_problem(r, 409)
    r = await client.post(f"/v1/runs/{early}/signals/approve", content=b"{not json",
                          headers=auth(key))
    assert_problem(r, 422, "body")
    r = await client.post(f"/v1/runs/{early}/signals/approve", json="x" * 2000,
                          headers=auth(key))
    assert_problem(r, 413)
    r = await client.post(f"/v1/runs/{uuid.uuid4()}/signals/approve", json=1,
                          headers=auth(key))
    assert_problem(r, 404)
    _, other_key = await new_tenant(pool)
    r = await client.post(f"/v1/runs/{late}/signals/approve", json=1, headers=auth(other_key))
    assert_problem(r, 404)  # another tenant's run does not exist for this key


async def test_a_signal_wait_times_out_when_no_signal_comes(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    seen: list[Any] = []
    approval = approval_workflow(seen)
    run_id = await queued_workflow_run(pool, tenant_id, "orders.approval")
    await work_until(pool, gateway, key, approval, tenant_id, run_id, "suspended")
    row = await run_row(pool, tenant_id, run_id)
    assert row.wait_reason == "signal" and row.wake_at is not None
    r = await client.get(f"/v1/runs/{run_id}", headers=auth(key))
    assert r.json()["waiting_reason"].startswith("signal 'approve' until ")
    assert r.json()["current_step"] == "signal:approve"
    assert await wake_suspended(pool, store(), FakeClock(row.wake_at)) == 1
    assert await dispatch(pool) == 1
    await work_until(pool, gateway, key, approval, tenant_id, run_id, "succeeded")
    assert seen == ["timed out"]
    r = await client.get(f"/v1/runs/{run_id}/steps", headers=auth(key))
    assert r.status_code == 200, r.text
    [step] = r.json()["items"]
    assert step["name"] == "signal:approve" and step["succeeded"] is False
    assert step["error_type"] == "signal_timeout" and r.json()["steps_done"] == 1


async def test_cancelling_a_suspended_workflow_ends_it_at_once(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run_id = await queued_workflow_run(pool, tenant_id, "orders.approval")
    await work_until(pool, gateway, key, approval_workflow([]), tenant_id, run_id, "suspended")
    r = await client.post(f"/v1/runs/{run_id}/cancel", headers=auth(key))
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    row = await run_row(pool, tenant_id, run_id)
    assert row.state == "cancelled"
    assert await wake_suspended(pool, store(), FakeClock(row.wake_at)) == 0  # nothing to wake


async def test_a_long_workflow_resumes_by_reading_its_history_a_page_at_a_time(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    """3,000 steps through the real gateway, the run failing at step 2,500 once: its retry
    replays 2,500 steps from three pages of history and runs only the 500 left."""
    tenant_id, key = await new_tenant(pool)
    total, fail_at = 3000, 2500
    ran: list[int] = []

    async def one(i: int) -> int:
        ran.append(i)
        if i == fail_at and ran.count(i) == 1:
            raise RetryableError("once")
        return i

    @workflow("etl.long")
    async def long(ctx: WorkflowContext, payload: None) -> int:
        last = 0
        for i in range(total):
            last = await ctx.step("row", one, i)
        return last

    pages: list[str] = []

    async def count_pages(request: httpx.Request) -> None:
        if request.url.path.endswith("/steps"):
            pages.append(request.url.path)

    gateway.event_hooks["request"].append(count_pages)
    run_id = await queued_workflow_run(pool, tenant_id, "etl.long")
    await work_until(pool, gateway, key, long, tenant_id, run_id, "retry_scheduled")
    assert (await run_row(pool, tenant_id, run_id)).steps_done == fail_at
    assert pages == []  # the first attempt had no history to read
    assert await release_retries(pool, store(), FakeClock(datetime.now(UTC) + timedelta(hours=1)))
    assert await dispatch(pool) == 1
    await work_until(pool, gateway, key, long, tenant_id, run_id, "succeeded")
    assert len(pages) == 3  # 2,500 recorded steps, 1,000 a page
    # steps 0..2,500 on the first attempt (2,500 failed), then 2,500.. on the retry, once each
    assert ran == [*range(fail_at + 1), *range(fail_at, total)]
    assert (await run_row(pool, tenant_id, run_id)).steps_done == total


async def test_ten_thousand_sleeping_workflows_are_woken_and_finish(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    """10,000 workflow runs asleep at once hold no worker and no slot; the wake poll (under a
    fake clock past their due time) wakes every one exactly once and each finishes."""
    n = 10_000
    tenant_id, key = await new_tenant(pool)
    clock = SystemClock()
    async with pool.acquire() as conn:
        for lo in range(0, n, 1000):
            await submit_jobs(conn, store(), clock, tenant_id=tenant_id, requests=[
                JobRequest(name="nap.one") for _ in range(lo, min(n, lo + 1000))],
                pools=("default",), max_payload_bytes=1 << 20, actor="test")
    while await fire_due(pool, store(), clock, batch_size=1000):
        pass
    finished: list[int] = []

    async def done(i: int) -> int:
        finished.append(i)
        return i

    @workflow("nap.one")
    async def nap(ctx: WorkflowContext, payload: None) -> None:
        await ctx.sleep(timedelta(hours=1))
        await ctx.step("done", done, 1)

    worker = Worker(GATEWAY_BASE, key, [nap], http_client=gateway, claim_wait_seconds=0.2,
                    shutdown_grace_seconds=0, concurrency=500)
    running = asyncio.create_task(worker.run())
    try:
        await _dispatch_all(pool, tenant_id)
        await until(lambda: _all_in(pool, tenant_id, "suspended", n), 300,
                    "every workflow to fall asleep")
        async with pool.acquire() as conn:
            assert await limits.in_flight(conn) == []  # asleep: no slot held
        later = FakeClock(datetime.now(UTC) + timedelta(hours=2))
        woken = 0
        while woken < n:
            got = await wake_suspended(pool, store(), later)
            assert got > 0
            woken += got
        assert await wake_suspended(pool, store(), later) == 0  # each woken once
        await _dispatch_all(pool, tenant_id)
        await until(lambda: _all_in(pool, tenant_id, "succeeded", n), 300,
                    "every workflow to finish")
    finally:
        await worker.stop()
        await running
    assert len(finished) == n
    async with pool.acquire() as conn:
        fired = await conn.fetchval(COUNT_EVENTS, tenant_id, "TimerFired")
    assert fired == n


RUNS_IN_STATE = "SELECT count(*) FROM runs WHERE tenant_id = $1 AND state = $2"
COUNT_EVENTS = "SELECT count(*) FROM events WHERE tenant_id = $1 AND type = $2"


async def _dispatch_all(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> None:
    """Dispatcher rounds (1,000 slots) until no run of the tenant waits for one."""
    while await pool.fetchval(RUNS_IN_STATE, tenant_id, "scheduled"):
        if not await dispatch(pool, slots=1000):
            await asyncio.sleep(0.05)  # the slots are taken: the worker frees them


async def _all_in(pool: asyncpg.Pool, tenant_id: uuid.UUID, state: str, n: int) -> bool:
    return await pool.fetchval(RUNS_IN_STATE, tenant_id, state) == n


async def test_the_reconciler_counts_suspended_runs_and_alerts_on_an_overdue_wakeup(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)

    @workflow("nap.long")
    async def nap(ctx: WorkflowContext, payload: None) -> None:
        await ctx.sleep(timedelta(hours=1))

    run_id = await queued_workflow_run(pool, tenant_id, "nap.long")
    await work_until(pool, gateway, key, nap, tenant_id, run_id, "suspended")
    wake_at = (await run_row(pool, tenant_id, run_id)).wake_at
    assert wake_at is not None
    on_time = await pipeline.check_once(pool, FakeClock(wake_at + timedelta(seconds=5)),
                                        stuck_after=timedelta(minutes=1))
    assert on_time.stuck["suspended"] == 0  # due 5 s ago: the wake poll may still come
    assert metric_value("ostinato_workflows_suspended", reason="timer") >= 1
    late = await pipeline.check_once(pool, FakeClock(wake_at + timedelta(minutes=10)),
                                     stuck_after=timedelta(minutes=1))
    assert late.stuck["suspended"] == 1  # due 10 minutes ago and still asleep: an alert


def metric_value(name: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_a_cancelled_workflow_stops_at_its_running_step_and_runs_no_later_one(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    ran: list[str] = []
    started = asyncio.Event()

    async def slow() -> None:
        ran.append("slow")
        started.set()
        await asyncio.sleep(60)  # interrupted by the cancel (the usual cooperative cancel)

    async def after() -> None:
        ran.append("after")

    @workflow("cancel.me")
    async def flow(ctx: WorkflowContext, payload: None) -> None:
        await ctx.step("slow", slow)
        await ctx.step("after", after)

    run_id = await queued_workflow_run(pool, tenant_id, "cancel.me")
    worker = Worker(GATEWAY_BASE, key, [flow], http_client=gateway, claim_wait_seconds=0.2,
                    shutdown_grace_seconds=0)
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 60)
        r = await client.post(f"/v1/runs/{run_id}/cancel", headers=auth(key))
        assert r.status_code == 200 and r.json()["cancel"] == "requested"

        async def cancelled() -> bool:
            return (await run_row(pool, tenant_id, run_id)).state == "cancelled"

        await until(cancelled, 60, "the run to end cancelled")
    finally:
        await worker.stop()
        await running
    assert ran == ["slow"]
    kinds = [type(e).__name__ for e in await events_of(pool, tenant_id, run_id)]
    assert "StepCompleted" not in kinds and kinds[-1] == "RunCancelled"


async def test_a_workflow_asleep_past_its_deadline_is_woken_then_and_fails_for_good(
        pool: asyncpg.Pool, db_url: str) -> None:
    clock = FakeClock(datetime.now(UTC))  # the database clock of the gateway and the scheduler
    service = Service("worker-gateway", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    transport = httpx.ASGITransport(app=create_app(service, attempts, ReadySignals()))
    tenant_id, key = await new_tenant(pool)

    @workflow("bounded.nap", timeout=timedelta(hours=1))
    async def bounded(ctx: WorkflowContext, payload: None) -> None:
        await ctx.sleep(timedelta(hours=3))

    async with httpx.AsyncClient(transport=transport, base_url=GATEWAY_BASE) as gw:
        run_id = await queued_workflow_run(pool, tenant_id, "bounded.nap")
        await work_until(pool, gw, key, bounded, tenant_id, run_id, "suspended")
        row = await run_row(pool, tenant_id, run_id)
        assert row.deadline_at is not None and row.wake_at is not None
        assert row.deadline_at == row.scheduled_for + timedelta(hours=1) < row.wake_at
        clock.set(row.deadline_at)
        assert await wake_suspended(pool, store(clock), clock) == 1  # at the deadline
        events = await events_of(pool, tenant_id, run_id)
        assert isinstance(events[-1], ev.RunWoken) and events[-1].cause == "deadline"
        assert not any(isinstance(e, ev.TimerFired) for e in events)  # the timer did not fire
        assert await dispatch(pool, clock) == 1
        await work_until(pool, gw, key, bounded, tenant_id, run_id, "dead_lettered")
    row = await run_row(pool, tenant_id, run_id)
    assert row.last_error is not None and row.last_error["type"] == "workflow_timed_out"
