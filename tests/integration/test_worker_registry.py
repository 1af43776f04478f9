"""The worker registry over the real PostgreSQL: capacity sums per (tenant scope, pool), expiry
by TTL, separate scopes for one worker id, and the gateway's once-a-second write throttle."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from ostinato.clock import FakeClock
from ostinato.wire import worker as p
from ostinato.workers import registry
from ostinato.workers.registry import PoolCapacity
from services.worker_gateway.presence import WorkerPresence

pytestmark = pytest.mark.integration
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TTL = timedelta(seconds=35)


def capacity(rows: list[PoolCapacity]) -> set[tuple[uuid.UUID | None, str, int]]:
    return {(c.tenant_id, c.pool, c.slots) for c in rows}


async def test_live_capacity_sums_declared_slots_per_scope_and_pool(pool: asyncpg.Pool) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    async with pool.acquire() as conn:
        await registry.touch(conn, "a1", a, ["default", "long"], 4, T0)
        await registry.touch(conn, "a2", a, ["default"], 2, T0 + timedelta(seconds=5))
        await registry.touch(conn, "s1", None, ["default"], 8, T0)
        await registry.touch(conn, "s2", None, ["default", "long"], 1, T0)
        await registry.touch(conn, "b1", b, ["default"], 3, T0 - timedelta(seconds=60))  # gone
        now = T0 + timedelta(seconds=10)
        assert capacity(await registry.live_capacity(conn, now, TTL)) == {
            (None, "default", 9), (None, "long", 1), (a, "default", 6), (a, "long", 4)}

        # A later touch replaces pools and slots; a worker past the TTL stops counting.
        await registry.touch(conn, "a1", a, ["long"], 5, T0 + timedelta(seconds=20))
        later = T0 + timedelta(seconds=38)  # a2 (seen at +5s) is still live, s1/s2 are not
        assert capacity(await registry.live_capacity(conn, later, TTL)) == {
            (a, "default", 2), (a, "long", 5)}
        assert await registry.live_capacity(conn, T0 + timedelta(hours=1), TTL) == []


async def test_one_worker_id_under_two_scopes_is_two_registrations(pool: asyncpg.Pool) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    async with pool.acquire() as conn:
        await registry.touch(conn, "w", a, ["default"], 4, T0)
        await registry.touch(conn, "w", None, ["default"], 2, T0)
        await registry.touch(conn, "other", b, ["default"], 3, T0)
        assert capacity(await registry.live_capacity(conn, T0, TTL)) == {
            (a, "default", 4), (None, "default", 2), (b, "default", 3)}

        mine = await registry.list_workers(conn, a)  # its own and the shared ones, not b's
        assert {(w.worker_id, w.tenant_id, w.slots) for w in mine} == {("w", a, 4),
                                                                        ("w", None, 2)}
        assert {(w.worker_id, w.tenant_id) for w in await registry.list_workers(conn, None)} == {
            ("w", a), ("w", None), ("other", b)}

        assert await registry.forget(conn, "w", a) is True  # only that scope's row
        assert await registry.forget(conn, "w", a) is False
        assert capacity(await registry.live_capacity(conn, T0, TTL)) == {
            (None, "default", 2), (b, "default", 3)}


async def test_seen_refreshes_only_registered_workers_and_stale_rows_are_purged(
        pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        assert await registry.seen(conn, "never-claimed", None, T0) is False
        assert await registry.list_workers(conn, None) == []
        await registry.touch(conn, "w", None, ["default"], 2, T0)
        assert await registry.seen(conn, "w", None, T0 + timedelta(seconds=30)) is True
        [w] = await registry.list_workers(conn, None)
        assert w.seen_at == T0 + timedelta(seconds=30) and w.pools == ["default"]
        assert await registry.forget_stale(conn, T0 + timedelta(minutes=30),
                                           timedelta(hours=1)) == 0
        assert await registry.forget_stale(conn, T0 + timedelta(hours=2),
                                           timedelta(hours=1)) == 1
        assert await registry.list_workers(conn, None) == []


async def test_the_gateway_writes_a_worker_at_most_twice_a_second(pool: asyncpg.Pool) -> None:
    """Throttled to one write per half second: the SDK's pings (one a second) all land."""
    clock = FakeClock(T0)
    presence = WorkerPresence(pool, clock)
    tenant = uuid.uuid4()
    claim = p.ClaimRequest(worker_id="w", pools=["default"], max_runs=3)  # no slots: max_runs

    async def seen_at() -> datetime:
        async with pool.acquire() as conn:
            [w] = await registry.list_workers(conn, tenant)
        assert w.slots == 3
        return w.seen_at

    await presence.claimed(tenant, claim)
    assert await seen_at() == T0
    clock.advance(0.25)
    await presence.claimed(tenant, claim)
    await presence.reported(tenant, "w")
    assert await seen_at() == T0  # throttled
    clock.advance(0.3)
    await presence.reported(tenant, "w")
    assert await seen_at() == T0 + timedelta(seconds=0.55)

    assert await presence.goodbye(tenant, "w") is True
    clock.advance(5)
    await presence.reported(tenant, "w")  # a late heartbeat does not bring it back
    async with pool.acquire() as conn:
        assert await registry.list_workers(conn, tenant) == []
    await presence.claimed(tenant, p.ClaimRequest(worker_id="w", max_runs=1, slots=7))
    async with pool.acquire() as conn:
        [w] = await registry.list_workers(conn, tenant)
    assert w.slots == 7


async def test_a_gateway_stopping_counts_as_a_restart_until_it_is_no_longer_live(
        pool: asyncpg.Pool) -> None:
    """What the reconciler's `abandoned_leases` reads: the latest start of a live instance."""
    latest = ("SELECT max(started_at) FROM gateway_instances "
              "WHERE seen_at > $1::timestamptz - interval '3 seconds'")
    async with pool.acquire() as conn:
        await registry.gateway_seen(conn, "g1", T0)
        await registry.gateway_seen(conn, "g2", T0 + timedelta(seconds=5))
        await registry.gateway_seen(conn, "g1", T0 + timedelta(seconds=60))
        await registry.gateway_seen(conn, "g2", T0 + timedelta(seconds=60))
        assert await conn.fetchval(latest, T0 + timedelta(seconds=61)) == T0 + timedelta(
            seconds=5)  # seen again, not started again
        await registry.gateway_gone(conn, "g1", T0 + timedelta(seconds=62))
        assert await conn.fetchval(latest, T0 + timedelta(seconds=63)) == T0 + timedelta(
            seconds=62)  # its workers' silence counts from its stop
        await registry.gateway_seen(conn, "g2", T0 + timedelta(seconds=66))
        assert await conn.fetchval(latest, T0 + timedelta(seconds=66)) == T0 + timedelta(
            seconds=5)  # g1 gone for good: g2's start again
        await registry.gateway_gone(conn, "g2", T0 + timedelta(hours=2))  # g1 an hour gone
        assert await conn.fetchval("SELECT array_agg(id) FROM gateway_instances") == ["g2"]
