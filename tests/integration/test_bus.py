"""The Kafka bus against the real broker: the outbox relay publishes tenant-keyed messages with
their trace context in headers, and a message delivered twice creates no second event."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import MessageSizeTooLargeError

from ostinato.bus.codec import HEADER_EVENT_ID, decode
from ostinato.bus.consumer import BatchConsumer, Delivered
from ostinato.bus.kafka import delete_topics_with_prefixes, ensure_topics, make_producer
from ostinato.bus.topics import Topics, tenant_key
from ostinato.clock import SystemClock
from ostinato.eventlog.outbox import OutboxRelay
from ostinato.eventlog.store import EventStore, read_stream
from services.scheduler.tick import fire_due
from tests.helpers.env import KAFKA_BOOTSTRAP, new_topic_prefix
from tests.helpers.integration import dispatch, new_job, new_tenant, pool_logging_statements

pytestmark = pytest.mark.integration
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def consume(topic: str, count: int, seconds: float = 30) -> list:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=KAFKA_BOOTSTRAP,
                                auto_offset_reset="earliest", group_id=None)
    await consumer.start()
    got: list = []
    try:
        async with asyncio.timeout(seconds):
            while len(got) < count:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got += records
    finally:
        await consumer.stop()
    return got


async def test_relay_publishes_keyed_by_tenant_with_trace_headers_and_redelivery_is_harmless(
        pool: asyncpg.Pool, topic_prefix: str) -> None:
    topics = Topics(prefix=topic_prefix, partitions=3)
    await ensure_topics(KAFKA_BOOTSTRAP, topics.all(), topics.partitions)
    store = EventStore(SystemClock(), topics)
    tenant_id, _ = await new_tenant(pool)
    job = await new_job(pool, tenant_id)
    producer = make_producer(KAFKA_BOOTSTRAP, "test")
    await producer.start()
    try:
        created = await fire_due(pool, store, SystemClock())
        assert len(created) == 1
        relay = OutboxRelay(pool, producer, topics)
        assert await relay.publish_once() == 1
        assert await relay.publish_once() == 0  # published rows left the outbox

        [record] = await consume(topics.due, 1)
        assert record.key == tenant_key(tenant_id)
        envelope = decode(record.value)
        assert envelope.tenant_id == tenant_id and envelope.event.job_id == job.id
        headers = dict(record.headers)
        assert headers[HEADER_EVENT_ID].decode() == str(envelope.event_id)

        # Deliver the very same message a second time, as a retried relay would.
        await producer.send_and_wait(topics.due, value=record.value, key=record.key,
                                     headers=list(record.headers))
    finally:
        await producer.stop()

    handled: list[int] = []
    seen: list[Delivered] = []
    both_seen = asyncio.Event()

    async def handle(batch: list[Delivered]) -> None:
        handled.append(await dispatch(pool))
        seen.extend(batch)
        if len(seen) >= 2:  # the original and its duplicate
            both_seen.set()

    consumer = BatchConsumer(bootstrap=KAFKA_BOOTSTRAP, group=f"{topic_prefix}dispatcher",
                             topics=[topics.due], handler=handle)
    await consumer.start()
    task = asyncio.create_task(consumer.run())
    try:
        await asyncio.wait_for(both_seen.wait(), 30)
    finally:
        consumer.stop()
        await task
        await consumer.close()
    assert [d.envelope.event_id for d in seen] == [envelope.event_id] * 2
    assert sum(handled) == 1
    async with pool.acquire() as conn:
        types = [r.type for r in await read_stream(conn, envelope.stream_id, tenant_id)]
    assert types == ["RunScheduled", "RunQueued"]


async def test_an_idle_relay_poll_is_one_read_and_a_busy_one_goes_straight_to_the_lock(
        db_url: str, topic_prefix: str) -> None:
    # Each service's relay polls five times a second: with nothing waiting that is one read,
    # no BEGIN; once a batch has found rows, the next one takes the lock without asking.
    topics = Topics(prefix=topic_prefix, partitions=3)
    await ensure_topics(KAFKA_BOOTSTRAP, topics.all(), topics.partitions)
    pool, statements = await pool_logging_statements(db_url)
    producer = make_producer(KAFKA_BOOTSTRAP, "test")
    await producer.start()
    try:
        relay = OutboxRelay(pool, producer, topics)
        statements.clear()
        assert await relay.publish_batch() == 0
        await asyncio.sleep(0)  # query loggers are called soon after a statement
        assert len(statements) == 1 and "FROM outbox" in statements[0], statements

        tenant_id, _ = await new_tenant(pool)
        for name in ("a", "b"):
            await new_job(pool, tenant_id, name=name)
            await fire_due(pool, EventStore(SystemClock(), topics), SystemClock())
        statements.clear()
        assert await relay.publish_batch() == 2  # asked, then took and published both
        await asyncio.sleep(0)
        assert "EXISTS" in statements[0] and statements[1].startswith("BEGIN"), statements
        # the take deletes what it locks: BEGIN, one statement, COMMIT
        assert len(statements) == 4 and "DELETE FROM outbox" in statements[2], statements
        assert statements[3].startswith("COMMIT"), statements
        await new_job(pool, tenant_id, name="c")
        await fire_due(pool, EventStore(SystemClock(), topics), SystemClock())
        statements.clear()
        assert await relay.publish_batch() == 1
        await asyncio.sleep(0)
        assert statements[0].startswith("BEGIN"), statements  # no question after a batch
        assert await relay.publish_batch() == 0  # found none: the next poll asks first
        statements.clear()
        assert await relay.publish_batch() == 0
        await asyncio.sleep(0)
        assert len(statements) == 1 and not statements[0].startswith("BEGIN"), statements
    finally:
        await producer.stop()
        await pool.close()
    assert len(await consume(topics.due, 3)) == 3


async def test_a_failed_send_leaves_the_taken_rows_in_the_outbox(
        pool: asyncpg.Pool, topic_prefix: str) -> None:
    # The take deletes the rows it locks; a send that fails (here the producer refuses any
    # message over 64 bytes) rolls the deletion back, and the next relay publishes them.
    topics = Topics(prefix=topic_prefix, partitions=3)
    await ensure_topics(KAFKA_BOOTSTRAP, topics.all(), topics.partitions)
    refusing = AIOKafkaProducer(bootstrap_servers=KAFKA_BOOTSTRAP, max_request_size=64)
    producer = make_producer(KAFKA_BOOTSTRAP, "test")
    await refusing.start()
    await producer.start()
    try:
        tenant_id, _ = await new_tenant(pool)
        await new_job(pool, tenant_id, name="a")
        await fire_due(pool, EventStore(SystemClock(), topics), SystemClock())
        with pytest.raises(MessageSizeTooLargeError):
            await OutboxRelay(pool, refusing, topics).publish_once()
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM outbox") == 1
        assert await OutboxRelay(pool, producer, topics).publish_once() == 1
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM outbox") == 0
    finally:
        await refusing.stop()
        await producer.stop()
    assert len(await consume(topics.due, 1)) == 1


async def test_trace_context_travels_from_the_job_to_the_published_message(
        pool: asyncpg.Pool, topic_prefix: str) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from ostinato.telemetry.tracing import context_from_traceparent

    topics = Topics(prefix=topic_prefix, partitions=3)
    await ensure_topics(KAFKA_BOOTSTRAP, topics.all(), topics.partitions)
    store = EventStore(SystemClock(), topics)
    tenant_id, _ = await new_tenant(pool)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("POST /v1/jobs", context=context_from_traceparent(
            TRACEPARENT)) as span:
        from ostinato.telemetry.tracing import current_traceparent

        parent = current_traceparent()
        assert parent is not None and parent.split("-")[1] == TRACEPARENT.split("-")[1]
        from ostinato.jobs import submit_job
        from ostinato.jobs.request import JobRequest

        async with pool.acquire() as conn:
            await submit_job(conn, store, SystemClock(), tenant_id=tenant_id,
                             request=JobRequest(name="traced"), pools=("default",),
                             max_payload_bytes=1024, actor="test", traceparent=parent)
    assert span.get_span_context().trace_id == int(TRACEPARENT.split("-")[1], 16)
    await fire_due(pool, store, SystemClock())
    producer = make_producer(KAFKA_BOOTSTRAP, "test")
    await producer.start()
    try:
        assert await OutboxRelay(pool, producer, topics).publish_once() == 1
    finally:
        await producer.stop()
    [record] = await consume(topics.due, 1)
    assert dict(record.headers)["traceparent"].decode() == parent
    assert decode(record.value).traceparent == parent
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_deleting_by_prefix_takes_those_topics_and_no_other() -> None:
    mine, other = new_topic_prefix(), new_topic_prefix()
    await ensure_topics(KAFKA_BOOTSTRAP, [f"{mine}a", f"{mine}b", f"{other}a"], 1)
    deleted = await delete_topics_with_prefixes(KAFKA_BOOTSTRAP, [mine])
    assert sorted(deleted) == [f"{mine}a", f"{mine}b"]
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        async with asyncio.timeout(60):  # deletion is asynchronous on the broker
            while True:
                listed = set(await admin.list_topics())
                if not {f"{mine}a", f"{mine}b"} & listed:
                    break
                await asyncio.sleep(0.2)
        assert f"{other}a" in listed
    finally:
        await admin.close()
