"""Chunked fan-out (`ctx.fan_out`; `ostinato.runs.fanout`) through the worker-gateway's HTTP
routes, the dispatcher's and the scheduler's code and the real PostgreSQL: every chunk runs once,
the completion once, the number of chunk runs not final never exceeds the cap (computed from the
events, in log order), both failure policies, a resent or replayed step creates no second child,
and one tenant never sees another's fan-out."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from ostinato.clock import SystemClock
from ostinato.domain import events as ev
from ostinato.domain import fanout as fo
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.policy.fairness import DEFAULT_CLASSES
from ostinato.sdk import FanOutFailedError, PermanentError, WorkflowContext, task, workflow
from ostinato.wire import worker as p
from services.dispatcher.dispatcher import Dispatcher, fixed_capacity
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.reports import Outcome
from tests.helpers.api import auth
from tests.helpers.integration import (
    dispatch,
    new_job,
    new_tenant,
    queued_workflow_run,
    run_row,
    store,
)
from tests.helpers.workflows import drive, events_of, send_steps, tell_parents

pytestmark = pytest.mark.integration

FINAL = {"RunSucceeded", "RunDeadLettered", "RunCancelled", "RunMarkedSucceeded"}


Logged = list[tuple[uuid.UUID, str, Any]]


async def chunk_events(pool: asyncpg.Pool, parent_id: uuid.UUID) -> Logged:
    """(stream, type, data) of every event of the parent's chunk runs, in log order."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT e.stream_id, e.type, e.data FROM events AS e JOIN runs AS r"
            " ON r.id = e.stream_id WHERE r.parent_run_id = $1 AND r.trigger = 'fan_out'"
            " ORDER BY e.seq", parent_id)
    return [(r["stream_id"], r["type"], r["data"]) for r in rows]  # json: decoded by the pool


def most_at_once(events: Logged, start: str) -> int:
    """The largest number of chunk runs between `start` (RunScheduled: not final; RunStarted:
    running) and their end, replaying the log in order."""
    live: set[uuid.UUID] = set()
    most = 0
    for stream, kind, _ in events:
        if kind == start:
            live.add(stream)
        elif kind in FINAL or (start == "RunStarted" and kind in {"RunFailed",
                                                                  "AttemptTimedOut",
                                                                  "LeaseExpired"}):
            live.discard(stream)
        most = max(most, len(live))
    return most


async def children_of(pool: asyncpg.Pool, parent_id: uuid.UUID) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch("SELECT id, trigger, state, tenant_id FROM runs"
                                " WHERE parent_run_id = $1", parent_id)


async def finish(pool: asyncpg.Pool, gw: httpx.AsyncClient, key: str, tasks: list[Any],
                 tenant_id: uuid.UUID, run_id: uuid.UUID, state: str) -> None:
    """Drive the parent to `state`, then its completion run (if one was started) to its end:
    the parent goes on when the chunks are final, not waiting for the completion."""
    await drive(pool, gw, key, tasks, tenant_id, run_id, state)
    completion = fo.completion_run_id(run_id, 0)
    if any(k["id"] == completion for k in await children_of(pool, run_id)):
        await drive(pool, gw, key, tasks, tenant_id, completion, "succeeded")


def fanning(effects: list[Any], *, n: int, cap: int, on_failure: str = "fail",
            failing: frozenset[int] = frozenset()) -> list[Any]:
    @task("etl.chunk")
    async def chunk(payload: dict[str, int]) -> int:
        effects.append(("chunk", payload["i"]))
        if payload["i"] in failing:
            raise PermanentError(f"chunk {payload['i']} is bad", type="bad_chunk")
        return payload["i"] * 2

    @task("etl.done")
    async def done(payload: dict[str, Any]) -> None:
        effects.append(("done", payload["succeeded"], payload["failed"],
                        [f["index"] for f in payload["failures"]]))

    @workflow("etl.job")
    async def job(ctx: WorkflowContext, payload: None) -> Any:
        effects.append(("job",))
        try:
            summary = await ctx.fan_out(chunk, [{"i": i} for i in range(n)],
                                        max_concurrency=cap, on_complete=done,
                                        on_failure=on_failure)
        except FanOutFailedError as exc:
            effects.append(("failed", exc.type, str(exc)))
            raise
        return {"summary": summary}

    return [job, chunk, done]


async def test_every_chunk_runs_once_under_the_cap_and_the_completion_once(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    effects: list[Any] = []
    n, cap = 23, 4
    tasks = fanning(effects, n=n, cap=cap)
    run_id = await queued_workflow_run(pool, tenant_id, "etl.job")
    await finish(pool, gateway, key, tasks, tenant_id, run_id, "succeeded")

    chunks = sorted(e[1] for e in effects if e[0] == "chunk")
    assert chunks == list(range(n))  # every chunk once
    assert [e for e in effects if e[0] == "done"] == [("done", n, 0, [])]  # the completion once
    events = await chunk_events(pool, run_id)
    assert most_at_once(events, "RunScheduled") == cap  # the window filled, never exceeded
    assert most_at_once(events, "RunStarted") <= cap
    indices = sorted(d["fan_out_index"] for _, kind, d in events if kind == "RunScheduled")
    assert indices == list(range(n))
    kids = await children_of(pool, run_id)
    assert sorted(k["trigger"] for k in kids) == ["fan_out"] * n + ["fan_out_complete"]
    assert {k["id"] for k in kids if k["trigger"] == "fan_out"} == {
        fo.chunk_run_id(run_id, 0, i) for i in range(n)}

    parent = await events_of(pool, tenant_id, run_id)
    kinds = [type(e).__name__ for e in parent]
    assert kinds[:5] == ["RunScheduled", "RunQueued", "RunStarted", "FanOutStarted",
                         "RunSuspended"]
    assert kinds.count("FanOutCompleted") == 1 and kinds[-1] == "RunSucceeded"
    assert kinds.count("FanOutProgressed") <= n  # one per batch of ends, not more
    [done] = [e for e in parent if isinstance(e, ev.FanOutCompleted)]
    assert done.completion_run_id == fo.completion_run_id(run_id, 0)
    r = await client.get(f"/v1/runs/{run_id}", headers=auth(key))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["output"]["summary"] == {"total": n, "succeeded": n, "failed": 0,
                                         "failures": [],
                                         "completion_run_id": str(done.completion_run_id)}
    fan = body["fan_out"]
    assert {k: fan[k] for k in ("total", "succeeded", "failed", "running", "pending", "state",
                                "max_concurrency")} == {
        "total": n, "succeeded": n, "failed": 0, "running": 0, "pending": 0,
        "state": "succeeded", "max_concurrency": cap}
    async with pool.acquire() as conn:  # the fan-out record is a fold of the log
        live = await snapshot(conn)
        await rebuild(conn)
        assert await snapshot(conn) == live


async def test_failed_chunks_fail_the_parent_by_default(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    effects: list[Any] = []
    tasks = fanning(effects, n=6, cap=2, failing=frozenset({1, 4}))
    run_id = await queued_workflow_run(pool, tenant_id, "etl.job")
    await finish(pool, gateway, key, tasks, tenant_id, run_id, "dead_lettered")
    assert sorted(e[1] for e in effects if e[0] == "chunk") == list(range(6))
    assert not [e for e in effects if e[0] == "done"]  # no completion
    assert ("failed", "fan_out_failed", "2 of 6 chunks failed") in effects
    row = await run_row(pool, tenant_id, run_id)
    assert row.last_error is not None and row.last_error["type"] == "fan_out_failed"
    [done] = [e for e in await events_of(pool, tenant_id, run_id)
              if isinstance(e, ev.FanOutCompleted)]
    assert (done.outcome, done.failed, [f["index"] for f in done.failures]) == ("failed", 2,
                                                                               [1, 4])
    assert all(f["state"] == "dead_lettered" and f["error_type"] == "bad_chunk"
               for f in done.failures)
    assert "fan_out_complete" not in [k["trigger"] for k in await children_of(pool, run_id)]


async def test_failed_chunks_can_complete_with_the_failures_listed(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    effects: list[Any] = []
    tasks = fanning(effects, n=6, cap=2, on_failure="complete", failing=frozenset({3}))
    run_id = await queued_workflow_run(pool, tenant_id, "etl.job")
    await finish(pool, gateway, key, tasks, tenant_id, run_id, "succeeded")
    assert [e for e in effects if e[0] == "done"] == [("done", 5, 1, [3])]
    output = (await run_row(pool, tenant_id, run_id)).output_ref
    assert output is not None
    [done] = [e for e in await events_of(pool, tenant_id, run_id)
              if isinstance(e, ev.FanOutCompleted)]
    assert (done.outcome, done.succeeded, done.failed) == ("succeeded", 5, 1)
    assert [f["index"] for f in done.failures] == [3]


async def test_a_resent_or_replayed_fan_out_creates_no_second_child(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run_id = await queued_workflow_run(pool, tenant_id, "wf.raw")
    r = await gateway.post(p.CLAIM_PATH, json={"worker_id": "w1", "max_runs": 1},
                           headers=auth(key))
    [claimed] = msgspec.json.decode(r.content, type=p.ClaimResponse).runs
    item = {"run_id": claimed.run_id, "fencing_token": claimed.fencing_token, "seq": 0,
            "name": "fan_out:etl.chunk",
            "fan_out": {"task": "etl.chunk", "chunks": [{"i": i} for i in range(10)],
                        "max_concurrency": 3}}
    [first, again] = await send_steps(gateway, key, [item, item])  # one batch, twice
    assert first.status == 200 and first.suspended
    assert again.status == 409  # the run is suspended: the attempt is over
    [later] = await send_steps(gateway, key, [item])  # resent later: refused, nothing new
    assert later.status == 409
    kids = await children_of(pool, run_id)
    assert sorted(k["id"] for k in kids) == sorted(fo.chunk_run_id(run_id, 0, i)
                                                   for i in range(3))
    kinds = [type(e).__name__ for e in await events_of(pool, tenant_id, run_id)]
    assert kinds.count("FanOutStarted") == 1


async def test_a_parent_replayed_after_its_fan_out_runs_no_chunk_again(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    effects: list[Any] = []
    tasks = fanning(effects, n=5, cap=2)
    wf_id = await queued_workflow_run(pool, tenant_id, "etl.job")
    await finish(pool, gateway, key, tasks, tenant_id, wf_id, "succeeded")
    assert [e[0] for e in effects].count("job") == 2  # before the fan-out, and the replay
    assert sorted(e[1] for e in effects if e[0] == "chunk") == list(range(5))
    assert len(await children_of(pool, wf_id)) == 6  # five chunks and one completion


async def test_a_refused_fan_out_records_nothing(pool: asyncpg.Pool,
                                                 gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run_id = await queued_workflow_run(pool, tenant_id, "wf.raw")
    r = await gateway.post(p.CLAIM_PATH, json={"worker_id": "w1", "max_runs": 1},
                           headers=auth(key))
    [claimed] = msgspec.json.decode(r.content, type=p.ClaimResponse).runs
    [refused] = await send_steps(gateway, key, [{
        "run_id": claimed.run_id, "fencing_token": claimed.fencing_token, "seq": 0,
        "name": "f", "fan_out": {"task": "t", "chunks": [1], "pool": "nowhere"}}])
    assert refused.status == 422 and "fan_out.pool" in (refused.detail or "")
    assert await children_of(pool, run_id) == []
    assert (await run_row(pool, tenant_id, run_id)).state == "running"


async def test_a_claimed_chunk_says_its_parent_awaits_it_and_a_plain_run_does_not(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    # A chunk's end admits the next chunk, so the SDK sends its outcome without the linger
    # (ClaimedRun.awaited); the parent itself and a plain run are not awaited.
    tenant_id, key = await new_tenant(pool)
    await queued_workflow_run(pool, tenant_id, "wf.raw")
    r = await gateway.post(p.CLAIM_PATH, json={"worker_id": "w1", "max_runs": 1},
                           headers=auth(key))
    [parent] = msgspec.json.decode(r.content, type=p.ClaimResponse).runs
    assert not parent.awaited
    [started] = await send_steps(gateway, key, [{
        "run_id": parent.run_id, "fencing_token": parent.fencing_token, "seq": 0,
        "name": "fan_out:t", "fan_out": {"task": "t", "chunks": [1, 2], "max_concurrency": 5}}])
    assert started.suspended
    await new_job(pool, tenant_id, name="plain")
    while await fire_due(pool, store(), SystemClock()):
        pass
    assert await dispatch(pool) == 3
    r = await gateway.post(p.CLAIM_PATH, json={"worker_id": "w1", "max_runs": 10},
                           headers=auth(key))
    claimed = r.json()["runs"]
    chunks = {str(fo.chunk_run_id(uuid.UUID(parent.run_id), 0, i)) for i in range(2)}
    assert {c["run_id"]: c["awaited"] for c in claimed} == {
        c["run_id"]: c["run_id"] in chunks for c in claimed}
    assert sum(c["awaited"] for c in claimed) == 2 and len(claimed) == 3


async def test_a_tenant_sees_only_its_own_fan_out_and_chunks(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    a, key_a = await new_tenant(pool)
    b, key_b = await new_tenant(pool)
    effects: list[Any] = []
    run_a = await queued_workflow_run(pool, a, "etl.job")
    run_b = await queued_workflow_run(pool, b, "etl.job")
    await finish(pool, gateway, key_a, fanning(effects, n=4, cap=2), a, run_a, "succeeded")
    assert (await run_row(pool, b, run_b)).state == "queued"  # A's worker never took B's run
    assert {k["tenant_id"] for k in await children_of(pool, run_a)} == {a}
    assert (await client.get(f"/v1/runs/{run_a}", headers=auth(key_b))).status_code == 404
    chunk = fo.chunk_run_id(run_a, 0, 0)
    assert (await client.get(f"/v1/runs/{chunk}", headers=auth(key_b))).status_code == 404
    mine = (await client.get(f"/v1/runs/{run_a}", headers=auth(key_a))).json()
    assert mine["fan_out"]["succeeded"] == 4
    assert (await client.get(f"/v1/runs/{run_b}", headers=auth(key_b))).json()[
        "fan_out"] is None


async def test_a_huge_fan_out_is_a_cap_of_runs_and_delays_no_other_tenant(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    a, key_a = await new_tenant(pool)
    b, _ = await new_tenant(pool)
    parent = await queued_workflow_run(pool, a, "wf.raw")
    r = await gateway.post(p.CLAIM_PATH, json={"worker_id": "w1", "max_runs": 1},
                           headers=auth(key_a))
    [claimed] = msgspec.json.decode(r.content, type=p.ClaimResponse).runs
    [started] = await send_steps(gateway, key_a, [{
        "run_id": claimed.run_id, "fencing_token": claimed.fencing_token, "seq": 0,
        "name": "fan_out:etl.chunk",
        "fan_out": {"task": "etl.chunk", "chunks": [{"i": i} for i in range(20_000)],
                    "max_concurrency": 7}}])
    assert started.suspended
    await new_job(pool, b, name="plain")
    await fire_due(pool, store(), SystemClock())
    assert await dispatch(pool) == 7 + 1  # one round: A's window and B's run, nothing more
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT state FROM runs WHERE tenant_id = $1", b) == "queued"
        waiting = await conn.fetchval("SELECT count(*) FROM runs WHERE tenant_id = $1"
                                      " AND parent_run_id = $2", a, parent)
        stored = await conn.fetchval("SELECT count(*) FROM blobs WHERE tenant_id = $1"
                                     " AND id = ANY($2::uuid[])", a,
                                     [fo.chunk_payload_ref(parent, 0, i) for i in (0, 19_999)])
    assert (waiting, stored) == (7, 2)  # 20,000 chunks stored, 7 runs for the dispatcher


async def test_many_fan_outs_keep_another_tenants_runs_within_the_fairness_bound(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    """Tenant A's 3 fan-outs of 2,000 chunks (cap 50 each) against tenant B's 20 plain runs in
    one saturated pool (10 slots; between rounds a shared worker finishes every claimed run and
    the scheduler's duty admits the next chunks):
    equal weights, so docs/FAIRNESS.md's latency bound says B's m-th run (0-based) is among the
    next m + 1 + (m + 1) dispatches of the queue after B's runs arrived, whatever A's backlog.
    Checked from the log, in commit order of RunQueued."""
    a, key_a = await new_tenant(pool)
    b, _ = await new_tenant(pool)
    for i in range(3):
        await queued_workflow_run(pool, a, "wf.raw", payload={"fan": i})
    r = await gateway.post(p.CLAIM_PATH, json={"worker_id": "w1", "max_runs": 3},
                           headers=auth(key_a))
    parents = msgspec.json.decode(r.content, type=p.ClaimResponse).runs
    assert len(parents) == 3
    for parent in parents:
        [started] = await send_steps(gateway, key_a, [{
            "run_id": parent.run_id, "fencing_token": parent.fencing_token, "seq": 0,
            "name": "fan_out:etl.chunk",
            "fan_out": {"task": "etl.chunk", "chunks": [{"i": i} for i in range(2_000)],
                        "max_concurrency": 50}}])
        assert started.suspended
    for i in range(20):
        await new_job(pool, b, name=f"plain-{i}")
    while await fire_due(pool, store(), SystemClock()):
        pass
    async with pool.acquire() as conn:
        arrived = await conn.fetchval("SELECT max(seq) FROM events")
        waiting = dict(await conn.fetch("SELECT tenant_id, count(*) FROM runs WHERE state ="
                                        " 'scheduled' GROUP BY tenant_id"))
    assert waiting == {a: 150, b: 20}  # A's three windows, B's runs

    clock = SystemClock()
    dispatcher = Dispatcher(pool, store(clock), clock, classes=DEFAULT_CLASSES,
                            capacity=fixed_capacity(10, ["default"]))
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)

    async def queued() -> list[uuid.UUID]:
        async with pool.acquire() as conn:
            return [row["tenant_id"] for row in await conn.fetch(
                "SELECT r.tenant_id FROM events AS e JOIN runs AS r ON r.id = e.stream_id"
                " WHERE e.type = 'RunQueued' AND e.seq > $1 ORDER BY e.seq", arrived)]

    for _ in range(40):  # each round: the free slots, then the worker finishes all it claimed
        assert await dispatcher.run_round() > 0
        claimed = await attempts.claim(None, p.ClaimRequest(worker_id="shared", max_runs=100,
                                                            pools=["default"]))
        results = await attempts.record(None, "shared", [
            Outcome(uuid.UUID(c.run_id), c.run_id, c.fencing_token, "complete", output=1)
            for c in claimed])
        assert all(res.status == 200 for res in results)
        await tell_parents(pool)  # the scheduler's duty: ended chunks admit the next ones
        order = await queued()
        if order.count(b) == 20:
            break
    positions = [i for i, tenant_id in enumerate(order) if tenant_id == b]
    assert len(positions) == 20
    for m, position in enumerate(positions):  # among the first m + 1 + (m + 1) dispatches
        assert position + 1 <= 2 * m + 2, (m, position, order[:position + 1])
    assert order.count(a) >= 19  # A was served alongside, not starved either
    async with pool.acquire() as conn:
        backlog = await conn.fetchval("SELECT count(*) FROM runs WHERE tenant_id = $1"
                                      " AND trigger = 'fan_out' AND state = 'scheduled'", a)
    assert backlog == 150  # A's windows stayed full: its ended chunks were replaced


async def test_a_parent_restarted_before_its_fan_out_gets_the_record_again_and_no_chunk(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    effects: list[Any] = []
    tasks = fanning(effects, n=4, cap=2, failing=frozenset({2}))
    run_id = await queued_workflow_run(pool, tenant_id, "etl.job")
    await finish(pool, gateway, key, tasks, tenant_id, run_id, "dead_lettered")
    r = await client.post(f"/v1/runs/{run_id}/restart", headers=auth(key),
                          json={"from_seq": 0, "reason": "try again"})
    assert r.status_code == 200, r.text
    await finish(pool, gateway, key, tasks, tenant_id, run_id, "dead_lettered")
    assert sorted(e[1] for e in effects if e[0] == "chunk") == [0, 1, 2, 3]  # not again
    assert [e[0] for e in effects].count("failed") == 2  # the same record, raised again
    kinds = [type(e).__name__ for e in await events_of(pool, tenant_id, run_id)]
    assert (kinds.count("FanOutStarted"), kinds.count("FanOutCompleted")) == (1, 2)
    assert len(await children_of(pool, run_id)) == 4
