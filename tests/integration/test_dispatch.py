"""The dispatcher over the real PostgreSQL: backpressure by declared slots, limits enforced from
the database, pauses, rate limits that survive a restart, and the reasons a waiting run shows.
The decision itself is pinned by tests/unit/test_fairness.py; here, its wiring."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import asyncpg
import httpx
import pytest

from ostinato import dispatch_controls as controls
from ostinato.clock import FakeClock, SystemClock
from ostinato.domain import events as ev
from ostinato.eventlog.store import read_stream
from ostinato.jobs import submit_jobs
from ostinato.jobs.request import JobRequest
from ostinato.policy.fairness import DEFAULT_CLASSES, FairState, parse_classes
from ostinato.stores import limits as limit_store
from ostinato.stores import runs as run_store
from ostinato.stores import tenants
from ostinato.telemetry import metrics
from ostinato.wire import worker as p
from ostinato.workers import registry
from services.dispatcher import snapshot
from services.dispatcher.dispatcher import Dispatcher, fixed_capacity, live_workers
from services.dispatcher.snapshot import CapacitySource
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.api import ADMIN, assert_problem, auth, tenant
from tests.helpers.integration import new_tenant, pool_logging_statements, store

pytestmark = pytest.mark.integration


async def runs_of(db: asyncpg.Pool, clock: FakeClock, tenant_id: uuid.UUID, n: int,
                  **fields: object) -> None:
    """`n` jobs due now, each made a waiting run by the scheduler."""
    requests = [JobRequest(name=f"j{i}", task="work", **fields) for i in range(n)]  # type: ignore[arg-type]
    async with db.acquire() as conn:
        await submit_jobs(conn, store(clock), clock, tenant_id=tenant_id, requests=requests,
                          pools=("default", "long"), max_payload_bytes=1 << 20, actor="test")
    while await fire_due(db, store(clock), clock):
        pass


def dispatcher(pool: asyncpg.Pool, clock: FakeClock, capacity: CapacitySource) -> Dispatcher:
    return Dispatcher(pool, store(clock), clock, classes=DEFAULT_CLASSES, capacity=capacity)


async def states(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> dict[str, int]:
    async with pool.acquire() as conn:
        rows = await run_store.page(conn, tenant_id, job_id=None, state=None,
                                    after=(None, None), limit=1000)
    out: dict[str, int] = {}
    for r in rows:
        out[r.state] = out.get(r.state, 0) + 1
    return out


async def complete_all(pool: asyncpg.Pool, clock: FakeClock, tenant_id: uuid.UUID) -> int:
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    claimed = await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w", max_runs=100,
                                                             pools=["default", "long"]))
    await attempts.record(tenant_id, "w", [Outcome(uuid.UUID(c.run_id), c.run_id,
                                                   c.fencing_token, "complete") for c in claimed])
    return len(claimed)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(SystemClock().now())


async def test_backpressure_admits_only_free_slots_and_more_as_runs_finish(
        pool: asyncpg.Pool, clock: FakeClock) -> None:
    t, _ = await new_tenant(pool)
    await runs_of(pool, clock, t, 12)
    d = dispatcher(pool, clock, fixed_capacity(10, ["default"]))
    # 10 slots: 9 for class default, 1 never lent (critical's non-lendable reservation).
    assert await d.run_round() == 9
    assert await d.run_round() == 0  # queued runs hold their slots until claimed and done
    assert await states(pool, t) == {"queued": 9, "scheduled": 3}
    async with pool.acquire() as conn:
        holds = [h for (h,) in await conn.fetch("SELECT reason FROM dispatch_holds")]
    assert len(holds) == 3
    assert all(h.startswith("pool default saturated for class default (1 free slots "
                            "reserved for critical); behind ") for h in holds)
    assert await complete_all(pool, clock, t) == 9
    assert await d.run_round() == 3
    assert await states(pool, t) == {"succeeded": 9, "queued": 3}
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM dispatch_holds") == 0


async def test_a_round_with_no_run_waiting_is_one_read_and_no_transaction(
        db_url: str, clock: FakeClock) -> None:
    # A freed slot wakes the dispatcher whether or not a run waits for one: with none waiting
    # the round is one read of runs_dispatchable, without BEGIN; with one, the decision follows.
    pool, statements = await pool_logging_statements(db_url)
    try:
        t, _ = await new_tenant(pool)
        d = dispatcher(pool, clock, fixed_capacity(10, ["default"]))
        statements.clear()
        assert await d.run_round() == 0
        await asyncio.sleep(0)  # query loggers are called soon after, not during
        assert len(statements) == 1 and "runs_dispatchable" in statements[0], statements

        await runs_of(pool, clock, t, 2)
        statements.clear()
        assert await d.run_round() == 2
        await asyncio.sleep(0)
        assert any(s.startswith("BEGIN") for s in statements), statements
        assert await states(pool, t) == {"queued": 2}
    finally:
        await pool.close()


async def test_a_round_after_one_that_left_runs_waiting_skips_the_question(
        db_url: str, clock: FakeClock) -> None:
    # In a burst the question steps over the dead entries queued runs leave at the head of
    # runs_dispatchable; after a round that left runs waiting its answer is known.
    pool, statements = await pool_logging_statements(db_url)
    try:
        t, _ = await new_tenant(pool)
        d = dispatcher(pool, clock, fixed_capacity(10, ["default"]))
        await runs_of(pool, clock, t, 12)
        assert await d.run_round() == 9  # 3 left waiting: the pool is full
        statements.clear()
        assert await d.run_round() == 0
        await asyncio.sleep(0)
        assert statements[0].startswith("BEGIN"), statements
        assert await complete_all(pool, clock, t) == 9
        statements.clear()
        assert await d.run_round() == 3  # still skipped; this round queues every run it saw
        await asyncio.sleep(0)
        assert statements[0].startswith("BEGIN"), statements
        statements.clear()
        assert await d.run_round() == 0  # nothing was left: the question again, and no round
        await asyncio.sleep(0)
        assert len(statements) == 1 and "runs_dispatchable" in statements[0], statements
    finally:
        await pool.close()


async def test_a_round_that_queues_runs_is_eight_statements(
        db_url: str, clock: FakeClock) -> None:
    # The lock, one read of the small tables (fairness, tenants, limits, pauses, busy slots,
    # buckets), the candidates, the locked heads, the append, one write of what the round
    # leaves (holds, buckets, fairness): each statement is a round trip on both sides.
    pool, statements = await pool_logging_statements(db_url)
    try:
        t, _ = await new_tenant(pool)
        async with pool.acquire() as conn:
            await controls.set_limit(conn, store(clock), tenant_id=t, actor="test",
                                     limit=ev.LimitSet(scope="tenant", name="",
                                                       rate_per_second=100.0, burst=100.0))
        await runs_of(pool, clock, t, 21)
        d = dispatcher(pool, clock, fixed_capacity(10, ["default"]))
        assert await d.run_round() == 9  # 12 held: the pool is full
        assert await complete_all(pool, clock, t) == 9
        statements.clear()  # the connection has met every statement and type of a round
        assert await d.run_round() == 9  # 3 still held; 9 holds dropped, buckets, fairness
        await asyncio.sleep(0)
        assert statements[0].startswith("BEGIN") and statements[-1] == "COMMIT;", statements
        assert len(statements) == 8, statements
        assert "FROM token_buckets" in statements[2] and "dispatch_holds" in statements[-2]
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM dispatch_holds h JOIN runs r"
                                       " ON r.id = h.run_id WHERE r.tenant_id = $1", t) == 3
            assert await conn.fetchval("SELECT tokens FROM token_buckets WHERE tenant_id = $1",
                                       t) == 82.0
            assert await conn.fetchval("SELECT written_by FROM dispatch_fairness") == d.instance
    finally:
        await pool.close()


async def test_the_rounds_one_read_returns_what_the_stores_read(
        pool: asyncpg.Pool, clock: FakeClock) -> None:
    a, _ = await new_tenant(pool)
    b, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        await controls.set_limit(conn, store(clock), tenant_id=a, actor="test",
                                 limit=ev.LimitSet(scope="task", name="work", max_concurrency=2))
        await controls.set_limit(conn, store(clock), tenant_id=a, actor="test", limit=ev.LimitSet(
            scope="resource", name="crm", rate_per_second=1.5, burst=3.0))
        await controls.set_paused(conn, store(clock), pool="long", tenant_id=b, paused=True,
                                  reason="fragile API", actor="test")
    await runs_of(pool, clock, a, 3, resource="crm", concurrency_key="k")
    await runs_of(pool, clock, b, 2)
    other = dispatcher(pool, clock, fixed_capacity(100, ["default"]))
    await other.run_round()  # the fairness memory saved by `other`
    assert await states(pool, a) == {"queued": 1, "scheduled": 2}  # one at a time for key k
    assert await states(pool, b) == {"queued": 2}
    mine = FairState({("default", "normal", "nobody"): 7.0})
    async with pool.acquire() as conn:
        state, snap = await snapshot.load(conn, clock.now(), None, fixed_capacity(3, ["x"]),
                                          uuid.uuid4(), mine)
        own_state, _ = await snapshot.load(conn, clock.now(), None, fixed_capacity(3, ["x"]),
                                           other.instance, mine)
        assert set(snap.tenants) == set(await tenants.weights(conn))
        assert set(snap.limits) == set(await limit_store.every_limit(conn))
        assert set(snap.paused) == set(await limit_store.paused_pools(conn))
        assert set(snap.in_flight) == set(await limit_store.in_flight(conn))
        assert set(snap.buckets) == {snapshot.SavedBucket(*r) for r in await conn.fetch(
            "SELECT tenant_id, scope, name, tokens, updated_at FROM token_buckets")}
    assert {x.tenant_id for x in snap.in_flight} >= {a, b}
    assert any(x.tenant_id == a and x.rate_per_second == 1.5 for x in snap.limits)
    assert any(x.tenant_id == b and x.pool == "long" for x in snap.paused)
    assert any(x.tenant_id == a and x.name == "crm" for x in snap.buckets)
    assert snap.capacity == [registry.PoolCapacity(tenant_id=None, pool="x", slots=3)]
    assert state == other.state != mine  # stored by another instance: the stored memory
    assert own_state == mine  # this instance wrote it last: its own


async def test_capacity_comes_from_live_workers_of_the_right_scope(
        pool: asyncpg.Pool, clock: FakeClock) -> None:
    owner, _ = await new_tenant(pool)
    other, _ = await new_tenant(pool)
    await runs_of(pool, clock, owner, 5)
    await runs_of(pool, clock, other, 5)
    d = dispatcher(pool, clock, live_workers(timedelta(seconds=35)))
    assert await d.run_round() == 0  # no worker anywhere: nothing is piled into ready topics
    async with pool.acquire() as conn:
        await registry.touch(conn, "own", owner, ["default"], 2, clock.db_now())
    assert await d.run_round() == 2
    # The other tenant has no worker of its own and there is no shared one: it waits, and its
    # runs never take the owner's slots.
    assert await states(pool, other) == {"scheduled": 5}
    async with pool.acquire() as conn:
        await registry.touch(conn, "shared", None, ["default"], 4, clock.db_now())
    assert await d.run_round() == 4
    assert await states(pool, other) == {"queued": 4, "scheduled": 1}
    clock.advance(36)  # both workers silent past the TTL: their slots are gone
    await complete_all(pool, clock, owner)
    assert await d.run_round() == 0


async def test_concurrency_key_task_and_tenant_limits_hold_across_decisions(
        pool: asyncpg.Pool, clock: FakeClock) -> None:
    t, _ = await new_tenant(pool)
    await runs_of(pool, clock, t, 3, concurrency_key="customer-1")
    await runs_of(pool, clock, t, 3, concurrency_key="customer-2")
    d = dispatcher(pool, clock, fixed_capacity(100, ["default"]))
    assert await d.run_round() == 2  # one per key
    assert await d.run_round() == 0
    await complete_all(pool, clock, t)
    assert await d.run_round() == 2

    u, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        await controls.set_limit(conn, store(clock), tenant_id=u, actor="test",
                                 limit=ev.LimitSet(scope="task", name="work", max_concurrency=2))
    await runs_of(pool, clock, u, 5)
    assert await d.run_round() == 2
    async with pool.acquire() as conn:
        await controls.set_limit(conn, store(clock), tenant_id=u, actor="test",
                                 limit=ev.LimitSet(scope="task", name="work"))  # lifted
        await controls.set_limit(conn, store(clock), tenant_id=u, actor="test",
                                 limit=ev.LimitSet(scope="tenant", name="", max_concurrency=4))
    assert await d.run_round() == 2  # 4 in flight: the tenant's limit
    assert await states(pool, u) == {"queued": 4, "scheduled": 1}
    [row] = [r async for r in _waiting(pool, u)]
    async with pool.acquire() as conn:
        hold = await conn.fetchval("SELECT reason FROM dispatch_holds WHERE run_id = $1", row)
    assert hold.startswith("concurrency limit tenant ") and hold.endswith("reached (4/4)")


async def _waiting(pool: asyncpg.Pool, tenant_id: uuid.UUID):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        for r in await run_store.page(conn, tenant_id, job_id=None, state=None,
                                      after=(None, None), limit=1000):
            if r.state == "scheduled":
                yield r.id


async def test_a_resource_rate_limit_survives_a_dispatcher_restart(
        pool: asyncpg.Pool, clock: FakeClock) -> None:
    t, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        await controls.set_limit(conn, store(clock), tenant_id=t, actor="test", limit=ev.LimitSet(
            scope="resource", name="crm", rate_per_second=1.0, burst=2.0))
    await runs_of(pool, clock, t, 6, resource="crm")
    capacity = fixed_capacity(100, ["default"])
    assert await dispatcher(pool, clock, capacity).run_round() == 2  # the burst
    # A new dispatcher (a restart) reads the bucket as the last decision left it: empty.
    assert await dispatcher(pool, clock, capacity).run_round() == 0
    clock.advance(1.0)
    assert await dispatcher(pool, clock, capacity).run_round() == 1
    clock.advance(0.5)
    assert await dispatcher(pool, clock, capacity).run_round() == 0
    assert await states(pool, t) == {"queued": 3, "scheduled": 3}


async def test_pausing_a_pool_or_one_tenants_queue_holds_runs_and_is_recorded(
        pool: asyncpg.Pool, clock: FakeClock) -> None:
    a, _ = await new_tenant(pool)
    b, _ = await new_tenant(pool)
    await runs_of(pool, clock, a, 2)
    await runs_of(pool, clock, b, 2)
    d = dispatcher(pool, clock, fixed_capacity(100, ["default"]))
    async with pool.acquire() as conn:
        assert await controls.set_paused(conn, store(clock), pool="default", tenant_id=None,
                                         paused=True, reason="db upgrade", actor="admin")
        assert not await controls.set_paused(conn, store(clock), pool="default", tenant_id=None,
                                             paused=True, reason="again", actor="admin")
    assert await d.run_round() == 0
    async with pool.acquire() as conn:
        reasons = {r for (r,) in await conn.fetch("SELECT reason FROM dispatch_holds")}
        assert reasons == {"pool default paused"}
        await controls.set_paused(conn, store(clock), pool="default", tenant_id=None,
                                  paused=False, reason=None, actor="admin")
        await controls.set_paused(conn, store(clock), pool="default", tenant_id=a, paused=True,
                                  reason="fragile API", actor="tenant:a")
    assert await d.run_round() == 2
    assert await states(pool, a) == {"scheduled": 2} and await states(pool, b) == {"queued": 2}
    async with pool.acquire() as conn:
        stream = await read_stream(conn, controls.pool_stream("default", None),
                                   controls.SYSTEM_TENANT)
    assert [type(r.event).__name__ for r in stream] == ["PoolPaused", "PoolResumed"]
    assert stream[0].actor == "admin" and stream[0].event.reason == "db upgrade"


async def test_the_api_explains_waiting_runs_and_steers_pools_and_limits(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    key = await tenant(client, "acme")
    ids = []
    for i in range(3):
        r = await client.post("/v1/jobs", json={"name": f"j{i}", "task": "work",
                                                "concurrency_key": "cust-7"}, headers=auth(key))
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    clock = SystemClock()
    await fire_due(pool, store(), clock)
    runs = (await client.get("/v1/runs", headers=auth(key))).json()["items"]
    assert len(runs) == 3
    before = (await client.get(f"/v1/runs/{runs[0]['id']}", headers=auth(key))).json()
    assert before["waiting_reason"].startswith("waiting for the dispatcher; behind ")
    await Dispatcher(pool, store(), clock, classes=DEFAULT_CLASSES,
                     capacity=fixed_capacity(10, ["default"])).run_round()
    views = [(await client.get(f"/v1/runs/{r['id']}", headers=auth(key))).json() for r in runs]
    waiting = [v for v in views if v["state"] == "scheduled"]
    assert len(waiting) == 2 and all(v["concurrency_key"] == "cust-7" for v in views)
    assert all(v["waiting_reason"].startswith("concurrency limit key cust-7 of tenant acme "
                                              "reached (1/1)") for v in waiting)
    assert [v["waiting_reason"] for v in views if v["state"] == "queued"] == [None]

    pools = (await client.get("/v1/pools", headers=auth(key))).json()["items"]
    default = next(x for x in pools if x["name"] == "default")
    assert default["classes"]["default"]["waiting"] == 2
    assert default["classes"]["default"]["in_flight"] == 1

    r = await client.post("/v1/pools/default/pause", json={"reason": "migrating"},
                          headers=auth(key))
    assert r.status_code == 200 and r.json()["scope"] == "this tenant's queue"
    pools = (await client.get("/v1/pools", headers=auth(key))).json()["items"]
    default = next(x for x in pools if x["name"] == "default")
    assert default["queue_paused"] and not default["paused"]
    assert_problem(await client.post("/v1/pools/nope/pause", headers=auth(key)), 404)
    assert (await client.post("/v1/pools/default/resume", headers=auth(key))).json()["changed"]

    r = await client.put("/v1/limits/resources/crm", json={"rate_per_second": 5, "burst": 10},
                         headers=auth(key))
    assert r.status_code == 200, r.text
    assert_problem(await client.put("/v1/limits/resources/crm", json={"burst": 0.5},
                                    headers=auth(key)), 422, "burst")
    assert_problem(await client.put("/v1/limits/tasks/work", json={"weight": 2},
                                    headers=auth(key)), 422, "weight")
    limits = (await client.get("/v1/limits", headers=auth(key))).json()["items"]
    assert [(x["scope"], x["name"], x["rate_per_second"]) for x in limits] == [
        ("resource", "crm", 5.0)]
    me = (await client.get("/v1/tenants/me", headers=auth(key)))
    tenant_id = me.json()["id"] if me.status_code == 200 else await _tenant_id(pool, "acme")
    assert_problem(await client.put(f"/v1/tenants/{tenant_id}/limits", json={"weight": 3},
                                    headers=auth(key)), 403)
    r = await client.put(f"/v1/tenants/{tenant_id}/limits", json={"weight": 3,
                         "max_concurrency": 50}, headers=auth(ADMIN))
    assert r.status_code == 200, r.text
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT weight FROM tenants WHERE name = 'acme'") == 3.0

    bad = await client.post("/v1/jobs", json={"name": "x", "priority": "urgent"},
                            headers=auth(key))
    assert_problem(bad, 422, "priority")


async def _tenant_id(pool: asyncpg.Pool, name: str) -> uuid.UUID:
    async with pool.acquire() as conn:
        tenant_id = await tenants.id_by_name(conn, name)
    assert tenant_id is not None, name
    return tenant_id


async def test_two_dispatchers_deciding_at_once_never_exceed_a_global_limit(
        pool: asyncpg.Pool, clock: FakeClock) -> None:
    t, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        await controls.set_limit(conn, store(clock), tenant_id=t, actor="test",
                                 limit=ev.LimitSet(scope="tenant", name="", max_concurrency=5))
    await runs_of(pool, clock, t, 30)
    capacity = fixed_capacity(100, ["default"])
    a, b = dispatcher(pool, clock, capacity), dispatcher(pool, clock, capacity)
    for _ in range(3):
        admitted = await asyncio.gather(*(d.run_round() for d in (a, b, a, b)))
        assert sum(admitted) <= 5
        assert await states(pool, t) == {"queued": 5, "scheduled": 25}
    await complete_all(pool, clock, t)
    assert sum(await asyncio.gather(a.run_round(), b.run_round())) == 5


async def test_two_dispatchers_taking_turns_decide_as_one_fair_sequence(
        pool: asyncpg.Pool, clock: FakeClock) -> None:
    # Two tenants of equal weight, one free slot a round: one dispatcher alternates them. Two
    # taking turns must too: each round reads the memory the other one saved
    # (dispatch_fairness), else the second instance, not knowing the first just served the
    # tenant with the older runs, serves it again.
    first, _ = await new_tenant(pool)
    second, _ = await new_tenant(pool)
    await runs_of(pool, clock, first, 6)
    clock.advance(1)  # the first tenant's runs waited longer
    await runs_of(pool, clock, second, 6)
    one_class = parse_classes("default:1")  # one slot, one run admitted a round
    a, b = (Dispatcher(pool, store(clock), clock, classes=one_class,
                       capacity=fixed_capacity(1, ["default"])) for _ in range(2))
    served: list[uuid.UUID] = []
    writers: list[uuid.UUID] = []
    for d in (a, b) * 4:
        assert await d.run_round() == 1
        for t in (first, second):
            if await complete_all(pool, clock, t):
                served.append(t)
        async with pool.acquire() as conn:
            writers.append(await conn.fetchval("SELECT written_by FROM dispatch_fairness"))
    assert served == [first, second] * 4
    assert writers == [a.instance, b.instance] * 4


async def test_queue_depth_and_oldest_wait_are_exported_per_tenant_class_and_pool(
        pool: asyncpg.Pool, clock: FakeClock) -> None:
    t, _ = await new_tenant(pool)
    await runs_of(pool, clock, t, 4, priority="bulk", pool="long")
    clock.advance(7)
    d = dispatcher(pool, clock, fixed_capacity(0, ["long"]))
    await d.run_round()
    await d.export_depth()
    labels = {"tenant": str(t), "class": "bulk", "pool": "long"}
    assert metrics.QUEUE_DEPTH.labels(**labels)._value.get() == 4
    assert metrics.OLDEST_WAITING.labels(**labels)._value.get() >= 7
