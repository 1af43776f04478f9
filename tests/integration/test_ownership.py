"""Ownership in storage: scheduler shard leases with epochs (acquire, renew, rebalance,
takeover after expiry, writes refused under a lost lease) and Kafka-side epoch fencing with the
dispatcher still finding the run a stale message named."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import asyncpg
import pytest

from ostinato.clock import FakeClock, SystemClock
from ostinato.eventlog.store import read_stream
from ostinato.leases.shard import SHARDS, ShardLeases, fair_share, shard_of, surplus
from ostinato.stores.runs import Q as RUNS
from ostinato.telemetry import metrics
from services.dispatcher.fence import EpochFence
from services.scheduler.tick import fire_due
from tests.helpers.integration import TOPICS, dispatch, new_job, new_tenant, store
from tests.helpers.outbox import drain_outbox

pytestmark = pytest.mark.integration


def test_fair_shares_and_surplus() -> None:
    assert [fair_share(n) for n in (1, 2, 3, 16, 40)] == [16, 8, 6, 1, 1]
    assert surplus({s: 1 for s in range(16)}, 2) == list(range(15, 7, -1))
    assert surplus({1: 1, 2: 1}, 3) == []


async def test_two_instances_split_the_shards_and_take_over_a_dead_ones(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(SystemClock().now())
    a = ShardLeases(pool, clock, "a", ttl=timedelta(seconds=10))
    b = ShardLeases(pool, clock, "b", ttl=timedelta(seconds=10))
    assert len((await a.refresh()).epochs) == SHARDS
    await b.refresh()  # b joins: a will give half back at its next renewal
    await a.refresh()
    await b.refresh()
    assert len(a.ownership.epochs) == len(b.ownership.epochs) == SHARDS // 2
    assert set(a.ownership.epochs).isdisjoint(b.ownership.epochs)
    before = dict(a.ownership.epochs)
    clock.advance(11)  # a dies (stops renewing); its leases expire by the database clock
    await b.refresh()
    assert len(b.ownership.epochs) == SHARDS
    assert all(b.ownership.epochs[s] > e for s, e in before.items())  # new epochs


async def test_a_scheduler_that_lost_its_lease_writes_nothing(pool: asyncpg.Pool) -> None:
    clock = FakeClock(SystemClock().now())
    tenant, _ = await new_tenant(pool)
    job = await new_job(pool, tenant, clock=clock)
    stale = ShardLeases(pool, clock, "stale", ttl=timedelta(seconds=10))
    await stale.refresh()
    frozen = dataclasses.replace(stale.ownership, epochs=dict(stale.ownership.epochs))
    clock.advance(11)  # "stale" was paused past its lease; "fresh" takes every shard over
    fresh = ShardLeases(pool, clock, "fresh", ttl=timedelta(seconds=10))
    await fresh.refresh()
    assert await fire_due(pool, store(clock), clock, ownership=frozen) == []
    assert frozen.epochs == {}  # it learnt its leases are gone
    created = await fire_due(pool, store(clock), clock, ownership=fresh.ownership)
    assert len(created) == 1
    async with pool.acquire() as conn:
        [run] = await conn.fetch(RUNS["list_runs"], tenant, job.id, None, None, None, 5)
        stream = await read_stream(conn, run["id"], tenant)
    assert stream[0].epoch == fresh.ownership.epochs[shard_of(job.id)]


async def test_kafka_side_fencing_drops_a_stale_epoch_and_the_run_is_still_dispatched(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(SystemClock().now())
    tenant, _ = await new_tenant(pool)
    job = await new_job(pool, tenant, clock=clock)
    leases = ShardLeases(pool, clock, "s", ttl=timedelta(seconds=10))
    await leases.refresh()
    await fire_due(pool, store(clock), clock, ownership=leases.ownership)
    [message] = await drain_outbox(pool, TOPICS.due)
    fence = EpochFence()
    shard = shard_of(job.id)
    assert fence.admit(shard, message.envelope.epoch + 1)  # a newer owner was seen already
    dropped = metrics.STALE_MESSAGES_DROPPED._value.get()
    assert fence.fresh([message]) == []  # no wake-up from a stale producer
    assert metrics.STALE_MESSAGES_DROPPED._value.get() == dropped + 1
    # The run itself was accepted by storage under a live lease: the next decision (a timer or
    # any other wake-up) finds it in the database, no message needed.
    assert await dispatch(pool, clock) == 1
    async with pool.acquire() as conn:
        types = [r.type for r in await read_stream(conn, message.envelope.stream_id, tenant)]
    assert types == ["RunScheduled", "RunQueued"]
