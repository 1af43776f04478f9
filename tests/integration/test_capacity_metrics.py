"""The capacity metrics the shipped Prometheus rules and Grafana dashboard read
(infra/prometheus, infra/grafana) are exported with values, against the real PostgreSQL and
Kafka: the reconciler's `ostinato_pool_slots{pool,scope}`, `ostinato_pool_busy_slots{pool}` and
`ostinato_pool_utilisation{pool}` from the worker registry and the attempt leases, and a
consumer's `ostinato_consumer_lag_messages{consumer,topic}` from its fetches."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from prometheus_client import REGISTRY

from ostinato import workers
from ostinato.bus.consumer import BatchConsumer, Delivered
from ostinato.bus.kafka import ensure_topics, make_producer
from ostinato.bus.topics import Topics
from ostinato.clock import FakeClock
from ostinato.wire import worker as p
from services.reconciler.checks.pipeline import check_once
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts
from tests.helpers.env import KAFKA_BOOTSTRAP
from tests.helpers.integration import dispatch, new_job, new_tenant, store

pytestmark = pytest.mark.integration
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def test_the_reconciler_exports_slots_busy_slots_and_utilisation_per_pool(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    async with pool.acquire() as conn:  # a shared worker in two pools, one gone long ago
        await workers.touch(conn, "shared-1", None, ["default", "etl"], 6, clock.db_now())
        await workers.touch(conn, "gone", None, ["etl"], 50, T0 - timedelta(hours=1))
        await workers.touch(conn, "own-1", tenant, ["default"], 2, clock.db_now())
    await new_job(pool, tenant, at=T0, clock=clock)
    assert len(await fire_due(pool, store(clock), clock)) == 1
    assert await dispatch(pool, clock) == 1
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    [_] = await attempts.claim(tenant, p.ClaimRequest(worker_id="own-1", max_runs=1))
    await check_once(pool, clock, stuck_after=timedelta(minutes=5),
                     worker_ttl=timedelta(seconds=35))
    assert sample("ostinato_pool_slots", pool="default", scope="shared") == 6
    assert sample("ostinato_pool_slots", pool="default", scope="own") == 2
    assert sample("ostinato_pool_slots", pool="etl", scope="shared") == 6  # not the gone one
    assert sample("ostinato_pool_busy_slots", pool="default") == 1
    assert sample("ostinato_pool_utilisation", pool="default") == pytest.approx(1 / 8)
    assert sample("ostinato_pool_utilisation", pool="etl") == 0

    clock.advance(60)  # every worker is past its TTL now; the lease is still held
    await check_once(pool, clock, stuck_after=timedelta(minutes=5),
                     worker_ttl=timedelta(seconds=35))
    assert sample("ostinato_pool_slots", pool="default", scope="shared") == 0
    assert sample("ostinato_pool_slots", pool="etl", scope="shared") == 0
    assert sample("ostinato_pool_busy_slots", pool="default") == 1
    assert sample("ostinato_pool_utilisation", pool="default") == 0


async def test_a_consumer_exports_its_lag_per_logical_topic(topic_prefix: str) -> None:
    topics = Topics(prefix=topic_prefix, partitions=1)
    await ensure_topics(KAFKA_BOOTSTRAP, [topics.due], 1)
    producer = make_producer(KAFKA_BOOTSTRAP, "test")
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topics.due, value=b"x%d" % i, key=b"k")
    finally:
        await producer.stop()

    async def handle(batch: list[Delivered]) -> None:
        return None

    group = f"{topic_prefix}lagging"
    consumer = BatchConsumer(bootstrap=KAFKA_BOOTSTRAP, group=group, topics=[topics.due],
                             handler=handle, max_records=1)
    await consumer.start()
    try:
        got = 0
        async with asyncio.timeout(30):
            while not got:  # one message taken, four still on the broker
                got = sum(len(r) for r in (await consumer.consumer.getmany(
                    timeout_ms=200, max_records=1)).values())
        assert await consumer.report_lag() == {"ostinato.runs.due": 4}
        assert sample("ostinato_consumer_lag_messages", consumer=group,
                      topic="ostinato.runs.due") == 4
        async with asyncio.timeout(30):
            while got < 5:
                got += sum(len(r) for r in (await consumer.consumer.getmany(
                    timeout_ms=200, max_records=5)).values())
        assert await consumer.report_lag() == {"ostinato.runs.due": 0}
        assert sample("ostinato_consumer_lag_messages", consumer=group,
                      topic="ostinato.runs.due") == 0
    finally:
        await consumer.close()
