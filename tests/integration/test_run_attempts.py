"""Attempts and executions shown apart (issue 42), end to end over the real PostgreSQL: a
workflow that sleeps three times and fails twice before it succeeds is claimed six times
(`attempt`/`executions` 6, the fencing token with them) but uses 3 of its 3 attempts; the API,
the CLI and the UI's run page say "3 of 3" and 6 executions, never "attempt 6 of 3"."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest

from ostinato.clock import FakeClock
from ostinato.sdk import RetryableError, Worker, WorkflowContext, workflow
from services.scheduler.tick import release_retries, wake_suspended
from tests.helpers.api import GATEWAY_BASE, auth
from tests.helpers.cli import cli
from tests.helpers.integration import (
    dispatch,
    login,
    new_tenant,
    queued_workflow_run,
    run_row,
    store,
)
from tests.helpers.waiting import until

pytestmark = pytest.mark.integration
SLEEPS, FAILURES = 3, 2


async def drive(pool: asyncpg.Pool, gw: httpx.AsyncClient, key: str, wf: object,
                tenant_id: uuid.UUID, run_id: uuid.UUID) -> None:
    """Work the run until it succeeds, waking its timers and releasing its retries at once."""
    worker = Worker(GATEWAY_BASE, key, [wf], http_client=gw, claim_wait_seconds=0.2,
                    shutdown_grace_seconds=0)
    running = asyncio.create_task(worker.run())
    try:
        async def moved() -> bool:
            row = await run_row(pool, tenant_id, run_id)
            if row.state == "suspended" and row.wake_at is not None:
                assert await wake_suspended(pool, store(), FakeClock(row.wake_at)) == 1
                assert await dispatch(pool) == 1
            elif row.state == "retry_scheduled":
                later = FakeClock(datetime.now(UTC) + timedelta(hours=1))  # past any backoff
                assert await release_retries(pool, store(), later) == 1
                assert await dispatch(pool) == 1
            return row.state == "succeeded"
        await until(moved, within=600, what=f"run {run_id} succeeded")  # a hang guard only
    finally:
        await worker.stop()
        await running


async def test_wake_ups_are_executions_and_only_failures_use_up_attempts(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient,
        api_url: str, tmp_path: Path) -> None:
    tenant_id, key = await new_tenant(pool)
    tries: list[int] = []

    async def flaky() -> str:
        tries.append(1)
        if len(tries) <= FAILURES:
            raise RetryableError("upstream down")
        return "done"

    @workflow("attempts.flaky")
    async def flaky_workflow(ctx: WorkflowContext, payload: None) -> str:
        for _ in range(SLEEPS):
            await ctx.sleep(timedelta(minutes=5))
        return await ctx.step("call", flaky)

    run_id = await queued_workflow_run(pool, tenant_id, "attempts.flaky")
    await drive(pool, gateway, key, flaky_workflow, tenant_id, run_id)
    row = await run_row(pool, tenant_id, run_id)
    assert row.attempt == 1 + SLEEPS + FAILURES == 6 and row.fencing_token >= 6  # every claim
    assert row.failures == FAILURES

    r = await client.get(f"/v1/runs/{run_id}", headers=auth(key))
    assert r.status_code == 200, r.text
    view = r.json()
    assert view["state"] == "succeeded"
    assert (view["attempt"], view["executions"]) == (6, 6)  # `attempt` kept as it was
    assert (view["failures"], view["retry_attempt"], view["max_attempts"]) == (2, 3, 3)
    r = await client.get("/v1/runs", params={"job_id": str(row.job_id)}, headers=auth(key))
    [listed] = r.json()["items"]
    assert (listed["executions"], listed["retry_attempt"], listed["max_attempts"]) == (6, 3, 3)

    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    code, out, err = await cli(tmp_path, "runs", "list", "--job", str(row.job_id), env=env)
    assert code == 0, err
    header, *lines = [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("─")]
    assert "ATTEMPT" in header and "EXECUTIONS" in header
    [line] = lines
    assert "3/3" in line.split() and "6" in line.split()
    code, out, err = await cli(tmp_path, "runs", "get", str(run_id), "-o", "json", env=env)
    assert code == 0, err
    got = json.loads(out)
    assert (got["executions"], got["retry_attempt"], got["max_attempts"]) == (6, 3, 3)

    await login(client, key)
    page = await client.get(f"/ui/runs/{run_id}")
    assert page.status_code == 200, page.text
    assert "3 of 3" in page.text and "<h2>Executions</h2>" in page.text
    assert "6 of" not in page.text
