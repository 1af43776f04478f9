"""The schedule-lag histogram `start_lag_minutes` (migration 0036) against the real PostgreSQL:
the RunStarted projection counts first attempts only, per minute, pool and 10 %-wide lag bucket;
OstinatoLagSLOBreach's p99 comes from it and its plan reads no event; a rebuild counts the same
starts again; the reconciler's retention deletes the minutes the rule no longer reads."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

from ostinato.clock import FakeClock
from ostinato.domain import events as ev
from ostinato.eventlog import start_lags
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.eventlog.records import StreamHead
from ostinato.stores import alerts as alert_store
from services.reconciler.checks.retention import expire_start_lags
from services.reconciler.loop import ReconcileConfig, start_lag_retention_duty
from tests.helpers.integration import new_tenant, store
from tests.helpers.run_stories import scheduled

pytestmark = pytest.mark.integration
T = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)  # runs start half a minute into 09:00
MINUTE = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=15)
ONE_SECOND, FIVE_HUNDRED = 73, 138  # the buckets of 1 s and 500 s (migration 0036)


async def start_runs(pool: asyncpg.Pool, tenant: uuid.UUID, lags: list[float], *,
                     at: datetime = T, pool_name: str = "default") -> list[StreamHead]:
    """Runs of `tenant` due `lag` seconds before `at`, scheduled, queued and started at `at`:
    one append per step for all of them, as a claim starts a batch."""
    clock = FakeClock(at)
    heads = [StreamHead(uuid.uuid4(), tenant) for _ in lags]
    steps = (
        lambda lag: msgspec.structs.replace(scheduled(pool=pool_name),
                                            due_at=at - timedelta(seconds=lag)),
        lambda lag: ev.RunQueued(pool=pool_name),
        lambda lag: ev.RunStarted(attempt=1, fencing_token=1, worker_id="w",
                                  lease_expires_at=at + timedelta(seconds=30)),
    )
    async with pool.acquire() as conn:
        for step in steps:
            async with conn.transaction():
                await store(clock).append(conn, [h.next(step(lag), "test")
                                                 for h, lag in zip(heads, lags, strict=True)])
    return heads


async def start_again(pool: asyncpg.Pool, heads: list[StreamHead], at: datetime) -> None:
    """The runs' attempts fail and their retries (attempt 2) start at `at`."""
    clock = FakeClock(at)
    steps = (ev.RunFailed(attempt=1, fencing_token=1, error_type="boom", message="m",
                          retryable=True),
             ev.RetryScheduled(retry_at=at, reason="retryable", counts=True, failures=1),
             ev.RunQueued(pool="default"),
             ev.RunStarted(attempt=2, fencing_token=2, worker_id="w",
                           lease_expires_at=at + timedelta(seconds=30)))
    async with pool.acquire() as conn:
        for step in steps:
            async with conn.transaction():
                await store(clock).append(conn, [h.next(step, "test") for h in heads])


async def histogram(pool: asyncpg.Pool, tenant: uuid.UUID) -> list[tuple[Any, ...]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT minute, pool, bucket, starts, max_seconds"
                                " FROM start_lag_minutes WHERE tenant_id = $1"
                                " ORDER BY minute, pool, bucket", tenant)
    return [tuple(r) for r in rows]


async def lag_signals(pool: asyncpg.Pool, tenant: uuid.UUID,
                      now: datetime) -> list[tuple[str, int, float | None]]:
    """The rule's signals of `tenant` at `now` (its window: the default 15 minutes)."""
    async with pool.acquire() as conn:
        signals = await alert_store.lag_by_pool(conn, now - WINDOW, now, 100)
    return [(s.pool, s.n, s.p99_seconds) for s in signals if s.tenant_id == tenant]


async def test_first_starts_are_counted_per_minute_pool_and_lag_bucket(
        pool: asyncpg.Pool) -> None:
    """99 runs start 1 s late, then (another claim, the same minute: its counts add up) 2 runs
    500 s late, and a run of pool etl before its due time (lag 0); the two late runs' retries
    start too but are no first attempts. Of the 101 lags, the nearest-rank p99 (the 100th) is
    500 s: the rule reports the 500 s bucket's largest lag and counts all 101 starts."""
    tenant, _ = await new_tenant(pool)
    await start_runs(pool, tenant, [1.0] * 99)
    late = await start_runs(pool, tenant, [500.0, 500.0])
    await start_runs(pool, tenant, [-5.0], pool_name="etl")
    await start_again(pool, late, T + timedelta(seconds=20))  # attempt 2: not counted
    assert await histogram(pool, tenant) == [
        (MINUTE, "default", ONE_SECOND, 99, 1.0),
        (MINUTE, "default", FIVE_HUNDRED, 2, 500.0),
        (MINUTE, "etl", 0, 1, 0.0)]
    assert await lag_signals(pool, tenant, T + timedelta(seconds=25)) == [
        ("default", 101, 500.0), ("etl", 1, 0.0)]


async def test_the_p99_is_the_bucket_the_99th_percentile_falls_in(pool: asyncpg.Pool) -> None:
    """100 runs 1 s late and one 500 s late: the 100th of 101 lags is 1 s, so one late run in
    101 is no breach of a 60 s SLO; lags spread within a bucket report its largest."""
    tenant, _ = await new_tenant(pool)
    await start_runs(pool, tenant, [1.0] * 100 + [500.0])
    assert await lag_signals(pool, tenant, T) == [("default", 101, 1.0)]
    spread, _ = await new_tenant(pool)
    await start_runs(pool, spread, [2.06, 2.1, 2.2])  # one bucket: [2.048 s, 2.253 s)
    assert [r[2:] for r in await histogram(pool, spread)] == [(81, 3, 2.2)]
    assert await lag_signals(pool, spread, T) == [("default", 3, 2.2)]


async def test_the_window_is_whole_minutes(pool: asyncpg.Pool) -> None:
    """A start 5 s before the window's first instant counts (its minute is in the window); one
    in the minute before does not."""
    tenant, _ = await new_tenant(pool)
    now = datetime(2026, 3, 2, 9, 0, 10, tzinfo=UTC)  # the window starts at 08:45:10
    await start_runs(pool, tenant, [1.0], at=datetime(2026, 3, 2, 8, 44, 59, tzinfo=UTC))
    await start_runs(pool, tenant, [2.0], at=datetime(2026, 3, 2, 8, 45, 5, tzinfo=UTC))
    assert await lag_signals(pool, tenant, now) == [("default", 1, 2.0)]
    assert await lag_signals(pool, tenant, now + timedelta(minutes=1)) == []


def relations(plan: Any) -> Iterator[str]:
    """Every relation an EXPLAIN (FORMAT JSON) plan reads."""
    if isinstance(plan, dict):
        if "Relation Name" in plan:
            yield plan["Relation Name"]
        for value in plan.values():
            yield from relations(value)
    elif isinstance(plan, list):
        for item in plan:
            yield from relations(item)


async def test_the_lag_rule_reads_the_histogram_not_the_log(pool: asyncpg.Pool) -> None:
    """Its cost no longer depends on how many runs started: the plan reads start_lag_minutes
    (a few rows per tenant, pool and minute) and tenants, and neither events nor runs."""
    tenant, _ = await new_tenant(pool)
    await start_runs(pool, tenant, [1.0] * 20 + [90.0])
    async with pool.acquire() as conn:
        plan = await conn.fetchval("EXPLAIN (FORMAT JSON) " + alert_store.Q["alert_lag_by_pool"],
                                   T - WINDOW, T, 100)
    read = set(relations(json.loads(plan) if isinstance(plan, str) else plan))
    assert read == {"start_lag_minutes", "tenants"}


async def test_a_rebuild_counts_the_same_first_starts(pool: asyncpg.Pool) -> None:
    tenant, _ = await new_tenant(pool)
    await start_runs(pool, tenant, [0.0005, 1.0, 1.0, 30.0])
    late = await start_runs(pool, tenant, [400.0], at=T + timedelta(minutes=1))
    await start_again(pool, late, T + timedelta(minutes=2))
    async with pool.acquire() as conn:
        live = (await snapshot(conn))["start_lag_minutes"]
        assert [(r["bucket"], r["starts"]) for r in live] == [(0, 1), (73, 2), (109, 1),
                                                               (136, 1)]
        await rebuild(conn)
        assert (await snapshot(conn))["start_lag_minutes"] == live


async def test_retention_deletes_the_minutes_the_rule_no_longer_reads(
        pool: asyncpg.Pool) -> None:
    """Kept: twice the rule's window, an hour at least. Each pass deletes a bounded number of
    rows, oldest first; the reconciler's duty passes again at once while passes are full."""
    assert start_lags.retention(timedelta(minutes=15)) == timedelta(hours=1)
    assert start_lags.retention(timedelta(minutes=45)) == timedelta(minutes=90)
    tenant, _ = await new_tenant(pool)
    ages = (timedelta(hours=3), timedelta(hours=2), timedelta(minutes=61),
            timedelta(minutes=59), timedelta(0))
    for age in ages:
        await start_runs(pool, tenant, [1.0], at=T - age)
    clock = FakeClock(T)
    assert await expire_start_lags(pool, clock, keep=timedelta(hours=1), limit=2) == 2
    assert [r[0] for r in await histogram(pool, tenant)] == [
        datetime(2026, 3, 2, 7, 59, tzinfo=UTC), datetime(2026, 3, 2, 8, 1, tzinfo=UTC), MINUTE]
    duty = start_lag_retention_duty(pool, clock, ReconcileConfig(), asyncio.Lock())
    assert duty.batch is not None and duty.batch > 2
    assert await duty.run_once(clock.now()) == 1  # 07:59 is over an hour before 09:00:30
    assert await duty.run_once(clock.now()) == 0
    assert [r[0] for r in await histogram(pool, tenant)] == [
        datetime(2026, 3, 2, 8, 1, tzinfo=UTC), MINUTE]
