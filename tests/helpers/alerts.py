"""Alerting set-ups: a job with an owner, one run of it claimed and reported, an alert sink."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx

from ostinato.clock import Clock
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.policy.retry import RetrySpec
from ostinato.schedules import ScheduleSpec
from ostinato.stores.jobs import JobRow
from ostinato.wire import worker as p
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.api import auth
from tests.helpers.integration import dispatch, store


async def owned_job(pool: asyncpg.Pool, clock: Clock, tenant: uuid.UUID, owner: str | None,
                    name: str = "invoice", **fields: Any) -> JobRow:
    async with pool.acquire() as conn:
        row, _ = await submit_job(
            conn, store(clock), clock, tenant_id=tenant,
            request=JobRequest(name=name, schedule=ScheduleSpec(at=clock.now()), owner=owner,
                               retry=RetrySpec(max_attempts=1), **fields),
            pools=("default",), max_payload_bytes=1024, actor="test")
    return row


async def run_once(pool: asyncpg.Pool, clock: Clock, tenant: uuid.UUID, *,
                   succeed: bool) -> uuid.UUID:
    """The due run of the tenant, claimed and reported (a failure is permanent)."""
    assert len(await fire_due(pool, store(clock), clock)) == 1
    assert await dispatch(pool, clock) == 1
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w1", max_runs=1))
    error = None if succeed else p.ErrorInfo(type="Boom", message="boom", retryable=False)
    [result] = await attempts.record(tenant, "w1", [Outcome(
        uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token,
        "complete" if succeed else "fail", output=1, error=error)])
    assert result.status == 200
    return uuid.UUID(claimed.run_id)


async def put_sink(client: httpx.AsyncClient, key: str, name: str, **body: Any) -> dict:
    r = await client.put(f"/v1/alert-sinks/{name}", json=body, headers=auth(key))
    assert r.status_code == 200, r.text
    return r.json()
