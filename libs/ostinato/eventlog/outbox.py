"""The transactional outbox and its relay.

Rows are written by `EventStore.append` in the writer's transaction. The relay locks a batch in
id order (SKIP LOCKED), produces it, waits for the broker's acks, then deletes the rows and
commits. A crash between the acks and the commit re-publishes the batch: consumers deduplicate
by event id, so that is harmless. A transaction that commits late only delays its rows to the
next poll; there is no cursor that could skip them (id order is not commit order, so we never
track a high-water mark).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Protocol

import asyncpg
import msgspec

from ostinato.bus.codec import HEADER_EVENT_ID, HEADER_TENANT, HEADER_TYPE, Envelope, encode
from ostinato.bus.topics import Topics, tenant_key
from ostinato.clock import Clock
from ostinato.db.queries import load
from ostinato.eventlog.records import RecordedEvent
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

Q = load("ostinato.eventlog", "outbox.sql")
_json = msgspec.json.Encoder()
log = get_logger("ostinato.outbox")


async def enqueue(
    conn: asyncpg.Connection, topics: Topics, recorded: Sequence[RecordedEvent]
) -> int:
    rows: list[tuple[str, bytes, bytes, str]] = []
    for r in recorded:
        topic = topics.route(r.event)
        if topic is None:
            continue
        envelope = Envelope(
            event_id=r.event_id, stream_id=r.stream_id, version=r.version, tenant_id=r.tenant_id,
            occurred_at=r.occurred_at, actor=r.actor, epoch=r.epoch, traceparent=r.traceparent,
            event=r.event,  # type: ignore[arg-type]
        )
        headers = {HEADER_EVENT_ID: str(r.event_id), HEADER_TYPE: r.type,
                   HEADER_TENANT: str(r.tenant_id)}
        if r.traceparent:
            headers["traceparent"] = r.traceparent
        rows.append((topic, tenant_key(r.tenant_id), encode(envelope),
                     _json.encode(headers).decode()))
    if rows:
        await conn.execute(Q["enqueue_messages"], *map(list, zip(*rows, strict=True)))
    return len(rows)


class Producer(Protocol):
    """What the relay needs from a Kafka producer (aiokafka's AIOKafkaProducer fits)."""

    async def send(self, topic: str, value: bytes, key: bytes,
                   headers: list[tuple[str, bytes]]) -> asyncio.Future[Any]: ...


class OutboxRelay:
    """Publishes outbox rows. `wake()` lets in-process writers skip the poll delay."""

    def __init__(self, pool: asyncpg.Pool, producer: Producer, topics: Topics, *,
                 batch_size: int = 500, idle_poll_seconds: float = 0.2) -> None:
        self.pool = pool
        self.producer = producer
        self.topics = topics
        self.batch_size = batch_size
        self.idle_poll_seconds = idle_poll_seconds
        self._wake = asyncio.Event()
        self._stopping = False

    def wake(self) -> None:
        self._wake.set()

    async def publish_once(self) -> int:
        """Publish one batch; return how many messages went out."""
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(Q["claim_messages"], self.batch_size)
            if not rows:
                return 0
            futures = [
                await self.producer.send(
                    r["topic"], value=r["value"], key=r["key"],
                    headers=[(k, v.encode()) for k, v in msgspec.json.decode(r["headers"]).items()],
                )
                for r in rows
            ]
            await asyncio.gather(*futures)
            await conn.execute(Q["delete_messages"], [r["id"] for r in rows])
        for r in rows:
            metrics.OUTBOX_PUBLISHED.labels(topic=self.topics.logical(r["topic"])).inc()
        return len(rows)

    async def run(self) -> None:
        while not self._stopping:
            try:
                sent = await self.publish_once()
            except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
                log.warning("outbox relay failed; retrying", error=repr(exc))
                sent = 0
                await asyncio.sleep(1.0)
            except Exception as exc:
                log.error("outbox relay error; retrying", error=repr(exc))
                sent = 0
                await asyncio.sleep(1.0)
            if sent < self.batch_size:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), self.idle_poll_seconds)
                except TimeoutError:
                    pass

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()


async def lag(conn: asyncpg.Connection, clock: Clock) -> tuple[int, timedelta]:
    row = await conn.fetchrow(Q["outbox_lag"], clock.db_now())
    return row["unpublished"], timedelta(seconds=row["oldest_age_seconds"])
