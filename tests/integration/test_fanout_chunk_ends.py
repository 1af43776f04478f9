"""A fan-out's chunk ends told in the transaction that records them
(`services.worker_gateway.reports.tell_chunk_parents`, issue 44), against the real PostgreSQL:
the end is counted and the next chunk admitted in that transaction, the scheduler's poll never
counts it again, a parent another transaction holds is not waited for (its chunks' ends are
told once, by the poll or by the next report ending one of its chunks), and a report rolled
back leaves nothing counted."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg
import httpx
import msgspec
import pytest

from ostinato.clock import SystemClock
from ostinato.domain import fanout as fo
from ostinato.stores import fan_outs
from ostinato.stores import runs as run_store
from ostinato.wire import worker as p
from services.worker_gateway.attempts import Attempts, append_outcomes
from services.worker_gateway.reports import (
    Outcome,
    record_outcomes,
    tell_chunk_parents,
    tell_with_ends,
)
from tests.helpers.api import auth
from tests.helpers.integration import dispatch, new_tenant, queued_workflow_run, store
from tests.helpers.workflows import send_steps, tell_parents

pytestmark = pytest.mark.integration


async def fanned_out(pool: asyncpg.Pool, gw: httpx.AsyncClient, n: int,
                     cap: int) -> tuple[uuid.UUID, uuid.UUID]:
    """A tenant's workflow run suspended on a fan-out of `n` chunks, cap `cap` (tenant, run)."""
    tenant_id, key = await new_tenant(pool)
    run_id = await queued_workflow_run(pool, tenant_id, "wf.raw")
    r = await gw.post(p.CLAIM_PATH, json={"worker_id": "w1", "max_runs": 1}, headers=auth(key))
    [claimed] = msgspec.json.decode(r.content, type=p.ClaimResponse).runs
    [started] = await send_steps(gw, key, [{
        "run_id": claimed.run_id, "fencing_token": claimed.fencing_token, "seq": 0,
        "name": "fan_out:etl.chunk",
        "fan_out": {"task": "etl.chunk", "chunks": [{"i": i} for i in range(n)],
                    "max_concurrency": cap}}])
    assert started.status == 200 and started.suspended
    return tenant_id, run_id


async def claim_chunks(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> list[p.ClaimedRun]:
    await dispatch(pool)
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    return await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w1", max_runs=100,
                                                          tasks=["etl.chunk"]))


async def report(conn: asyncpg.Connection, claimed: Sequence[p.ClaimedRun],
                 failing: frozenset[uuid.UUID] = frozenset()) -> int:
    """A report's transaction as the gateway's (`Attempts.record`): the outcomes (the runs of
    `failing` fail permanently: dead-lettered), then the chunk ends told; returns how many ends
    were told."""
    error = p.ErrorInfo(type="bad_chunk", message="bad", retryable=False, classified=True)
    items = []
    for c in claimed:
        rid = uuid.UUID(c.run_id)
        items.append(Outcome(rid, c.run_id, c.fencing_token, "fail", error=error)
                     if rid in failing else
                     Outcome(rid, c.run_id, c.fencing_token, "complete", output=1))
    async with conn.transaction():
        rows = {r.id: r for r in await run_store.lock_reported(
            conn, [o.run_id for o in items if o.run_id is not None], with_policy=bool(failing))}
        done = record_outcomes(rows, "w1", items, datetime.now(UTC))
        assert all(res.status == 200 for res in done.results)
        with_ends = await tell_with_ends(conn, rows, done.events)
        await append_outcomes(store(), conn, done.events, done.finished, with_ends.events)
        return await tell_chunk_parents(conn, store(), rows, done.finished, with_ends=with_ends)


async def fan_out_of(pool: asyncpg.Pool, run_id: uuid.UUID) -> fan_outs.FanOutRow:
    async with pool.acquire() as conn:
        return (await fan_outs.of_parents(conn, [run_id]))[run_id, 0]


async def chunk_kinds(pool: asyncpg.Pool, run_id: uuid.UUID) -> list[str]:
    async with pool.acquire() as conn:
        return [r["type"] for r in await conn.fetch(
            "SELECT e.type FROM events AS e JOIN runs AS r ON r.id = e.stream_id"
            " WHERE r.parent_run_id = $1 ORDER BY e.seq", run_id)]


async def test_a_chunk_end_admits_the_next_chunk_in_its_report_and_is_counted_once(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, run_id = await fanned_out(pool, gateway, n=5, cap=2)
    rounds = []
    while claimed := await claim_chunks(pool, tenant_id):
        async with pool.acquire() as conn:
            told = await report(conn, claimed,
                                failing=frozenset({fo.chunk_run_id(run_id, 0, 1)}))
        assert told == len(claimed)  # counted by the report's own transaction
        assert await tell_parents(pool) == 0  # nothing left for the scheduler's poll
        fan = await fan_out_of(pool, run_id)
        rounds.append((len(claimed), fan.admitted, fan.succeeded, fan.failed))
    assert rounds == [(2, 4, 1, 1), (2, 5, 3, 1), (1, 5, 4, 1)]
    fan = await fan_out_of(pool, run_id)
    assert (fan.state, fan.total, fan.succeeded, fan.failed) == ("failed", 5, 4, 1)
    assert [(f["index"], f["state"]) for f in fan.listed_failures] == [(1, "dead_lettered")]
    kinds = await chunk_kinds(pool, run_id)
    assert kinds.count("RunScheduled") == 5 and kinds.count("ParentNotified") == 5
    async with pool.acquire() as conn:
        parent = [r["type"] for r in await conn.fetch(
            "SELECT type FROM events WHERE stream_id = $1 ORDER BY version", run_id)]
    assert parent.count("FanOutProgressed") == 3 and parent.count("FanOutCompleted") == 1
    done = parent.index("FanOutCompleted")
    assert parent[done + 1] == "RunWoken"  # woken (to raise the failure) in the same report


async def test_a_busy_parent_is_not_waited_for_and_the_poll_counts_its_chunk_ends_once(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, run_id = await fanned_out(pool, gateway, n=4, cap=2)
    claimed = await claim_chunks(pool, tenant_id)
    assert len(claimed) == 2
    async with pool.acquire() as holder, pool.acquire() as conn:
        async with holder.transaction():  # as the scheduler's poll or a cancel holds it
            await holder.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", run_id)
            # a hang guard only: a report waiting for the parent would never end here
            told = await asyncio.wait_for(report(conn, claimed), 120)
        assert told == 0
    kinds = await chunk_kinds(pool, run_id)
    assert (kinds.count("RunSucceeded"), kinds.count("ParentNotified")) == (2, 0)
    fan = await fan_out_of(pool, run_id)
    assert (fan.admitted, fan.succeeded) == (2, 0)  # recorded, not counted yet
    assert await tell_parents(pool) == 2  # the poll counts them, once
    assert await tell_parents(pool) == 0
    fan = await fan_out_of(pool, run_id)
    assert (fan.admitted, fan.succeeded) == (4, 2)



async def test_a_busy_parents_chunk_end_is_told_by_the_next_report_ending_one_of_its_chunks(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, run_id = await fanned_out(pool, gateway, n=5, cap=2)
    first, second = await claim_chunks(pool, tenant_id)
    async with pool.acquire() as holder, pool.acquire() as conn:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", run_id)
            assert await asyncio.wait_for(report(conn, [first]), 120) == 0  # a hang guard
        assert await report(conn, [second]) == 2  # its own end and the one left
    fan = await fan_out_of(pool, run_id)
    assert (fan.admitted, fan.succeeded) == (4, 2)
    assert await tell_parents(pool) == 0
    kinds = await chunk_kinds(pool, run_id)
    assert kinds.count("ParentNotified") == 2 and kinds.count("RunScheduled") == 4

async def test_a_report_rolled_back_counts_nothing(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, run_id = await fanned_out(pool, gateway, n=3, cap=1)
    [chunk] = await claim_chunks(pool, tenant_id)

    class Crash(Exception):
        pass

    async with pool.acquire() as conn:
        with pytest.raises(Crash):
            async with conn.transaction():  # the gateway dies before its commit
                assert await report(conn, [chunk]) == 1
                raise Crash
    fan = await fan_out_of(pool, run_id)
    assert (fan.admitted, fan.succeeded) == (1, 0)
    assert await chunk_kinds(pool, run_id) == ["RunScheduled", "RunQueued", "RunStarted"]
    async with pool.acquire() as conn:  # the worker's resent report is counted, once
        assert await report(conn, [chunk]) == 1
    fan = await fan_out_of(pool, run_id)
    assert (fan.admitted, fan.succeeded) == (2, 1)
    assert fo.chunk_run_id(run_id, 0, 1) in {
        uuid.UUID(c.run_id) for c in await claim_chunks(pool, tenant_id)}



async def test_the_gateways_report_tells_the_chunk_ends_it_records(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    """Through `Attempts.record` (the batch route's outcomes): no poll between a chunk's end
    and the next chunk's admission."""
    tenant_id, run_id = await fanned_out(pool, gateway, n=3, cap=2)
    claimed = await claim_chunks(pool, tenant_id)
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    results = await attempts.record(tenant_id, "w1", [
        Outcome(uuid.UUID(c.run_id), c.run_id, c.fencing_token, "complete", output=1)
        for c in claimed])
    assert [r.status for r in results] == [200, 200]
    fan = await fan_out_of(pool, run_id)
    assert (fan.admitted, fan.succeeded) == (3, 2)
    assert await tell_parents(pool) == 0
    async with pool.acquire() as conn:  # each end told by the statement that recorded it
        for c in claimed:
            last = await conn.fetch(
                "SELECT type, occurred_at FROM events WHERE stream_id = $1"
                " ORDER BY version DESC LIMIT 2", uuid.UUID(c.run_id))
            assert [e["type"] for e in last] == ["ParentNotified", "RunSucceeded"]
            assert last[0]["occurred_at"] == last[1]["occurred_at"]
