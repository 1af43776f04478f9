"""Workflow runs driven through the worker-gateway in-process: an SDK worker until a run reaches a
state (doing the dispatcher's and the scheduler's part), raw step reports, a run's events, and
the sample workflows (a saga, a napper) several tests share."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import msgspec

from ostinato.eventlog.store import EventStore, read_stream
from ostinato.runs.children import notify_parents
from ostinato.runs.signals import send_signal
from ostinato.sdk import (
    PermanentError,
    Worker,
    WorkflowContext,
    workflow,
)
from ostinato.stores import runs, steps
from ostinato.wire import worker as p
from tests.helpers.api import GATEWAY_BASE, auth
from tests.helpers.integration import dispatch, queued_workflow_run, run_row, store
from tests.helpers.waiting import until


async def work_until(pool: asyncpg.Pool, gw: httpx.AsyncClient, key: str, task: Any,
                     tenant_id: uuid.UUID, run_id: uuid.UUID, state: str) -> None:
    """Run an SDK worker with `task` until the run reaches `state`."""
    worker = Worker(GATEWAY_BASE, key, [task], http_client=gw, claim_wait_seconds=0.2,
                    shutdown_grace_seconds=0)
    running = asyncio.create_task(worker.run())
    try:
        async def reached() -> bool:
            return (await run_row(pool, tenant_id, run_id)).state == state
        await until(reached, within=600, what=f"run {run_id} {state}")  # a hang guard only
    finally:
        await worker.stop()
        await running


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


async def events_of(pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: uuid.UUID) -> list[Any]:
    async with pool.acquire() as conn:
        return [r.event for r in await read_stream(conn, run_id, tenant_id)]


async def tell_parents(pool: asyncpg.Pool, event_store: EventStore | None = None) -> int:
    async with pool.acquire() as conn:
        return await notify_parents(conn, event_store or store(), batch_size=500,
                                    actor="scheduler")


async def drive(pool: asyncpg.Pool, gw: httpx.AsyncClient, key: str, tasks: list[Any],
                tenant_id: uuid.UUID, run_id: uuid.UUID, state: str) -> None:
    """Run an SDK worker with `tasks`, doing the dispatcher's and the scheduler's part (dispatch,
    tell parents) between looks, until the run reaches `state`."""
    worker = Worker(GATEWAY_BASE, key, tasks, http_client=gw, claim_wait_seconds=0.2,
                    shutdown_grace_seconds=0)
    running = asyncio.create_task(worker.run())
    try:
        async def reached() -> bool:
            await dispatch(pool)
            await tell_parents(pool)
            async with pool.acquire() as conn:
                row = await runs.by_id(conn, tenant_id, run_id)  # a child: maybe not yet
            return row is not None and row.state == state
        await until(reached, within=600, what=f"run {run_id} {state}")  # a hang guard only
    finally:
        await worker.stop()
        await running


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


def saga(calls: list[str], *, fail: bool = False, sleep: bool = False,
         undo_fails: bool = False) -> Any:
    def book(what: str) -> str:
        calls.append(f"book {what}")
        return what

    def undo(what: str) -> None:
        calls.append(f"undo {what}")
        if undo_fails and what == "car":
            raise PermanentError("the car is gone", type="not_found")

    def pay() -> None:
        calls.append("pay")
        if fail:
            raise PermanentError("card declined", type="card_declined")

    @workflow("travel.saga")
    async def trip(ctx: WorkflowContext, payload: None) -> str:
        await ctx.step("hotel", book, "hotel", compensate=undo, compensate_retries=1)
        await ctx.step("car", book, "car", compensate=undo, compensate_retries=1)
        if sleep:
            await ctx.sleep(timedelta(days=1))
        await ctx.step("pay", pay)
        return "booked"

    return trip


async def step_names(pool: asyncpg.Pool, tenant_id: Any, run_id: Any) -> list[str]:
    async with pool.acquire() as conn:
        return [s.name for s in await steps.page(conn, tenant_id, run_id, after=-1, limit=100)]


def napper(ran: list[str]) -> object:
    @workflow("ops.nap")
    async def nap(ctx: WorkflowContext, payload: None) -> str:
        await ctx.step("before", ran.append, "before")
        await ctx.sleep(timedelta(hours=1))
        await ctx.step("after", ran.append, "after")
        return "rested"

    return nap


async def work(gw: httpx.AsyncClient, key: str, tasks: list[Any], reached: Any,
               what: str, between: Any = None) -> None:
    """An SDK worker with `tasks` until `reached()` holds (`between()` each look)."""
    worker = Worker(GATEWAY_BASE, key, tasks, http_client=gw, claim_wait_seconds=0.2,
                    shutdown_grace_seconds=0)
    running = asyncio.create_task(worker.run())
    try:
        async def look() -> bool:
            if between is not None:
                await between()
            return bool(await reached())
        await until(look, within=600, what=what)  # a hang guard only
    finally:
        await worker.stop()
        await running


async def state_of(pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: uuid.UUID) -> str:
    return (await run_row(pool, tenant_id, run_id)).state


async def signal(pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: uuid.UUID) -> None:
    async with pool.acquire() as conn:
        await send_signal(conn, store(), tenant_id=tenant_id, run_id=run_id, name="go",
                          payload=None, actor="test", idempotency_key=None,
                          max_payload_bytes=1000)
