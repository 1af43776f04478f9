"""One run through the library code of each service, over the real PostgreSQL (Kafka is
replaced by reading the outbox rows the relay would publish): the event sequence, per-state
timestamps, fencing, and the duplicate-delivery guarantee of the dispatcher."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from ostinato.clock import SystemClock
from ostinato.eventlog.store import read_stream
from ostinato.stores.runs import Q as RUNS
from ostinato.wire import worker as p
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.integration import TOPICS, dispatch, drive_one_run, new_job, new_tenant, store
from tests.helpers.outbox import drain_outbox

pytestmark = pytest.mark.integration


async def test_a_run_goes_through_every_state_in_order(pool: asyncpg.Pool) -> None:
    tenant_id, run_id = await drive_one_run(pool, succeed=True)
    async with pool.acquire() as conn:
        stream = await read_stream(conn, run_id, tenant_id)
        run = await conn.fetchrow(RUNS["run_by_id"], run_id, tenant_id)
    assert [r.type for r in stream] == ["RunScheduled", "RunQueued", "RunStarted", "RunSucceeded"]
    assert [r.version for r in stream] == [1, 2, 3, 4]
    assert [r.actor for r in stream] == ["scheduler", "dispatcher", "worker:w1", "worker:w1"]
    assert stream[2].epoch == stream[3].epoch == 1
    assert run["state"] == "succeeded" and run["attempt"] == 1
    assert run["scheduled_at"] <= run["queued_at"] <= run["started_at"] <= run["finished_at"]
    # its slot freed, but no run waits for one: no `runs.finished` wake-up for the dispatcher
    # (test_columnar_append.py: one is written while a run waits)
    assert await drain_outbox(pool, TOPICS.finished) == []


async def test_a_stale_fencing_token_changes_nothing_but_is_recorded(pool: asyncpg.Pool) -> None:
    tenant_id, run_id = await drive_one_run(pool, succeed=False, stale_write=True)
    async with pool.acquire() as conn:
        stream = await read_stream(conn, run_id, tenant_id)
        run = await conn.fetchrow(RUNS["run_by_id"], run_id, tenant_id)
    assert [r.type for r in stream] == ["RunScheduled", "RunQueued", "RunStarted",
                                        "StaleWriteRejected", "RunFailed", "RetryScheduled"]
    rejected = stream[3].event
    assert rejected.presented_token == 0 and rejected.current_token == 1
    assert rejected.worker_id == "w0" and rejected.operation == "complete"
    assert run["state"] == "retry_scheduled" and run["last_error"]["type"] == "Boom"
    assert run["failures"] == 1 and run["retry_at"] is not None
    assert run["output_ref"] is None


async def test_a_run_is_queued_once_however_often_the_dispatcher_decides(
        pool: asyncpg.Pool) -> None:
    tenant_id, _ = await new_tenant(pool)
    await new_job(pool, tenant_id)
    await fire_due(pool, store(), SystemClock())
    due = await drain_outbox(pool, TOPICS.due)
    assert await dispatch(pool) == 1
    assert await dispatch(pool) == 0  # a second decision finds nothing waiting
    run_id = due[0].envelope.stream_id
    async with pool.acquire() as conn:
        types = [r.type for r in await read_stream(conn, run_id, tenant_id)]
    assert types == ["RunScheduled", "RunQueued"]


async def test_a_retried_outcome_report_is_answered_again_without_a_new_event(
        pool: asyncpg.Pool) -> None:
    tenant_id, run_id = await drive_one_run(pool, succeed=True)
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    [again] = await attempts.record(tenant_id, "w1", [Outcome(run_id, str(run_id), 1, "complete",
                                                              output={"ok": True})])
    assert again.status == 200
    other_tenant, _ = await new_tenant(pool)
    [foreign] = await attempts.record(other_tenant, "w1", [Outcome(run_id, str(run_id), 1,
                                                                   "complete")])
    assert foreign.status == 404
    async with pool.acquire() as conn:
        assert len(await read_stream(conn, run_id, tenant_id)) == 4


async def test_the_worker_protocol_is_tenant_scoped(pool: asyncpg.Pool) -> None:
    owner, _ = await new_tenant(pool)
    intruder, _ = await new_tenant(pool)
    await new_job(pool, owner)
    await fire_due(pool, store(), SystemClock())
    assert await dispatch(pool) == 1
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    assert await attempts.claim(intruder, p.ClaimRequest(worker_id="x", max_runs=10)) == []
    [claimed] = await attempts.claim(owner, p.ClaimRequest(worker_id="w", max_runs=10))
    item = p.HeartbeatItem(run_id=claimed.run_id, fencing_token=claimed.fencing_token)
    [hb] = await attempts.heartbeat(intruder, "x", [item])
    assert hb.status == 404
    [done] = await attempts.record(intruder, "x", [Outcome(
        uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "complete")])
    assert done.status == 404
    [hb] = await attempts.heartbeat(owner, "w", [item])
    assert hb.status == 200 and hb.lease_expires_at > claimed.lease_expires_at
    [stale] = await attempts.heartbeat(owner, "w", [p.HeartbeatItem(
        run_id=claimed.run_id, fencing_token=claimed.fencing_token + 5)])
    assert stale.status == 409
    async with pool.acquire() as conn:
        types = [r.type for r in await read_stream(conn, uuid.UUID(claimed.run_id), owner)]
    assert types == ["RunScheduled", "RunQueued", "RunStarted", "StaleWriteRejected"]
