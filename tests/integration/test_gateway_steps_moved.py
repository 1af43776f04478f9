"""A run's steps reported one after another, the run moved by another writer in between: each
step is judged against where the run stands in storage, never against where the gateway last
left it (issue 44: a lone step's latency may lean on the gateway's memory of the run's head
only under a check in the same statement). Raw batch reports through the worker-gateway on the
real PostgreSQL: a run paused between two steps gets its next step recorded and is suspended;
a run given back (`LeaseReleased`), due again and claimed again refuses the former attempt's
step (409, StaleWriteRejected, nothing recorded); a resent step is answered and recorded once;
the read models of such a run are its log's (a rebuild gives the same rows)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from ostinato.clock import FakeClock
from ostinato.domain import events as ev
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.wire import worker as p
from services.scheduler.tick import release_retries
from tests.helpers.api import auth
from tests.helpers.integration import dispatch, new_tenant, run_row, store
from tests.helpers.workflows import claimed_run, events_of, send_steps

pytestmark = pytest.mark.integration


def _step(run: p.ClaimedRun, seq: int, token: int | None = None) -> dict[str, Any]:
    return {"run_id": run.run_id, "fencing_token": run.fencing_token if token is None else token,
            "seq": seq, "name": f"s{seq}", "output": seq}


async def _steps_in_a_row(gw: httpx.AsyncClient, key: str, run: p.ClaimedRun, n: int) -> None:
    for seq in range(n):
        [done] = await send_steps(gw, key, [_step(run, seq)])
        assert done.status == 200 and not done.suspended, done


async def _recorded(pool: asyncpg.Pool, run_id: uuid.UUID) -> list[int]:
    async with pool.acquire() as conn:
        return [r["seq"] for r in await conn.fetch(
            "SELECT seq FROM run_steps WHERE run_id = $1 ORDER BY seq", run_id)]


async def test_a_run_paused_between_two_steps_is_suspended_at_the_next(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    run_id = uuid.UUID(run.run_id)
    await _steps_in_a_row(gateway, key, run, 3)
    r = await client.post(f"/v1/runs/{run_id}/pause", headers=auth(key))
    assert r.status_code == 200 and r.json()["changed"] is True
    [done] = await send_steps(gateway, key, [_step(run, 3)])
    assert done.status == 200 and done.suspended  # recorded, then the run leaves the worker
    row = await run_row(pool, tenant_id, run_id)
    assert row.state == "suspended" and row.paused and row.steps_done == 4
    last = (await events_of(pool, tenant_id, run_id))[-2:]
    assert isinstance(last[0], ev.StepCompleted) and last[0].seq == 3
    assert isinstance(last[1], ev.RunSuspended) and last[1].reason == "paused"


async def test_a_run_claimed_again_refuses_the_step_of_its_former_attempt(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    run_id = uuid.UUID(run.run_id)
    await _steps_in_a_row(gateway, key, run, 3)
    r = await gateway.post(p.BATCH_PATH, headers=auth(key), json={
        "worker_id": "w1", "releases": [{"run_id": run.run_id,
                                         "fencing_token": run.fencing_token}]})
    assert r.status_code == 200 and r.json()["results"][0]["status"] == 200, r.text
    later = FakeClock(datetime.now(UTC) + timedelta(hours=1))  # past any retry backoff
    assert await release_retries(pool, store(), later) == 1
    assert await dispatch(pool) == 1  # queued again
    r = await gateway.post(p.CLAIM_PATH, json={"worker_id": "w2", "max_runs": 1},
                           headers=auth(key))
    [again] = msgspec.json.decode(r.content, type=p.ClaimResponse).runs
    assert again.run_id == run.run_id and again.fencing_token > run.fencing_token
    [stale] = await send_steps(gateway, key, [_step(run, 3)])
    assert stale.status == 409, stale
    assert await _recorded(pool, run_id) == [0, 1, 2]
    rejected = [e for e in await events_of(pool, tenant_id, run_id)
                if isinstance(e, ev.StaleWriteRejected)]
    assert [(e.operation, e.presented_token) for e in rejected] == [
        ("step", run.fencing_token)]
    [done] = await send_steps(gateway, key, [_step(again, 3)])  # the new attempt's is recorded
    assert done.status == 200 and await _recorded(pool, run_id) == [0, 1, 2, 3]


async def test_a_resent_step_is_answered_and_recorded_once(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    run_id = uuid.UUID(run.run_id)
    await _steps_in_a_row(gateway, key, run, 3)
    [again] = await send_steps(gateway, key, [_step(run, 2)])  # its answer was lost
    assert again.status == 200
    [gap] = await send_steps(gateway, key, [_step(run, 5)])
    assert gap.status == 422  # a position beyond the next: nothing recorded
    assert await _recorded(pool, run_id) == [0, 1, 2]
    completed = [e.seq for e in await events_of(pool, tenant_id, run_id)
                 if isinstance(e, ev.StepCompleted)]
    assert completed == [0, 1, 2]
    assert (await run_row(pool, tenant_id, run_id)).steps_done == 3


async def test_the_read_models_of_steps_in_a_row_are_their_logs(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    await _steps_in_a_row(gateway, key, run, 5)
    [failed] = await send_steps(gateway, key, [{**_step(run, 5), "output": None, "error": {
        "type": "declined", "message": "no", "retryable": False}}])
    assert failed.status == 200

    def mine(rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
        rid = uuid.UUID(run.run_id)
        return {"runs": [r for r in rows["runs"] if r["id"] == rid],
                "run_steps": [r for r in rows["run_steps"] if r["run_id"] == rid]}

    async with pool.acquire() as conn:
        live = mine(await snapshot(conn))
        assert len(live["run_steps"]) == 6 and live["runs"][0]["steps_done"] == 6
        assert [s["succeeded"] for s in live["run_steps"]] == [True] * 5 + [False]
        await rebuild(conn)
        assert mine(await snapshot(conn)) == live
