"""Runs that finished long ago, for the tests of archive-then-remove (migration 0046, the
archiver duty): driven through the scheduler's, dispatcher's and gateway's code under a fake
clock set in the past, so their events, rows and timestamps are what production writes, only
older. The removal procedure judges them by the database's clock (now)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import asyncpg

from ostinato import jobs
from ostinato.clock import FakeClock, SystemClock
from ostinato.jobs.request import JobRequest
from ostinato.schedules import ScheduleSpec
from ostinato.wire import worker as p
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.integration import dispatch, new_job, store

APP_ROLE_CALL = "SELECT * FROM ostinato_remove_runs($1::uuid[], $2::int[])"


def days_ago(days: float) -> datetime:
    return SystemClock().now() - timedelta(days=days)


async def finished_run(pool: asyncpg.Pool, tenant_id: uuid.UUID, *, ended: datetime,
                       succeed: bool = True, output: object = None,
                       payload: object = None) -> uuid.UUID:
    """A one-off job's run, succeeded (with `output`) or failed for good (dead-lettered) at
    about `ended`; its id."""
    clock = FakeClock(ended - timedelta(seconds=5))
    await new_job(pool, tenant_id, payload=payload if payload is not None else {"n": 1},
                  clock=clock)
    created = await fire_due(pool, store(clock), clock)
    assert len(created) == 1
    clock.advance(1)
    assert await dispatch(pool, clock) == 1
    clock.advance(1)
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    [claimed] = await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w1", max_runs=5))
    run_id = uuid.UUID(claimed.run_id)
    clock.advance(3)
    kind = "complete" if succeed else "fail"
    error = None if succeed else p.ErrorInfo(type="Boom", message="boom", retryable=False,
                                                     classified=True)
    [result] = await attempts.record(tenant_id, "w1", [Outcome(
        run_id, claimed.run_id, claimed.fencing_token, kind,
        output=output if output is not None else {"ok": True}, error=error)])
    assert result.status == 200
    return run_id


async def recurring_runs(pool: asyncpg.Pool, tenant_id: uuid.UUID, *, first_slot: datetime,
                         states: list[str]) -> tuple[uuid.UUID, list[uuid.UUID]]:
    """A job every minute from `first_slot`, its first len(`states`) slots fired and ended as
    told (`succeeded` or `dead_lettered`, a permanent failure); (job id, run ids by slot)."""
    clock = FakeClock(first_slot)
    async with pool.acquire() as conn:
        job, _ = await jobs.submit_job(
            conn, store(clock), clock, tenant_id=tenant_id,
            request=JobRequest(name="every-minute", schedule=ScheduleSpec(
                every="1m", start_at=first_slot)),
            pools=("default",), max_payload_bytes=1024, actor="test")
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    run_ids = []
    for k, state in enumerate(states):
        clock.set(first_slot + timedelta(minutes=k, seconds=1))
        assert len(await fire_due(pool, store(clock), clock)) == 1
        assert await dispatch(pool, clock) == 1
        [claimed] = await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w1", max_runs=5))
        run_id = uuid.UUID(claimed.run_id)
        succeed = state == "succeeded"
        error = None if succeed else p.ErrorInfo(type="Boom", message="boom", retryable=False,
                                                     classified=True)
        [result] = await attempts.record(tenant_id, "w1", [Outcome(
            run_id, claimed.run_id, claimed.fencing_token, "complete" if succeed else "fail",
            output={"k": k}, error=error)])
        assert result.status == 200
        run_ids.append(run_id)
    return job.id, run_ids


async def stream_version(conn: asyncpg.Connection, run_id: uuid.UUID) -> int:
    return await conn.fetchval("SELECT max(version) FROM events WHERE stream_id = $1", run_id)
