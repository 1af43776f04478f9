"""The transactional outbox and its relay.

`EventStore.append` writes one outbox row per append (its messages as parallel arrays: one per
topic and tenant, a wake-up; none if no event travels) in the writer's transaction, in the same
statement as the events (`messages` builds the arrays; eventlog.sql's `append_events` inserts
both). The relay takes a few rows in id order (SKIP LOCKED) and deletes them in one statement,
produces their messages in order, waits for the broker's acks, then commits; a failed send rolls
the deletion back. A crash between the acks and the commit re-publishes them: consumers read
what to do from PostgreSQL, so a second wake-up is harmless. A transaction that commits late
only delays its row to the next poll; there is no cursor that could skip it (id order is not
commit order, so we never track a high-water mark).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

import asyncpg
import msgspec

from ostinato.bus.codec import HEADER_EVENT_ID, HEADER_TENANT, HEADER_TYPE, Envelope, encode
from ostinato.bus.topics import Topics, tenant_key
from ostinato.clock import Clock
from ostinato.db.queries import load
from ostinato.domain.events import event_type
from ostinato.eventlog.records import NewEvent
from ostinato.telemetry import metrics

Q = load("ostinato.eventlog", "outbox.sql")
_json = msgspec.json.Encoder()
_headers = msgspec.json.Decoder(dict[str, str])
DRAIN_BATCHES = 16


Messages = tuple[list[str], list[bytes], list[bytes], list[str]]  # topic, key, value, headers


def messages(topics: Topics, events: Sequence[NewEvent], occurred_at: datetime) -> Messages:
    """The messages of the events that travel on a topic, as parallel arrays (one outbox row):
    one per (topic, tenant), the envelope of the tenant's last event on that topic, which says
    how many it stands for (messages are wake-ups: bus/codec.py `Envelope`)."""
    last: dict[tuple[str, uuid.UUID], tuple[NewEvent, int]] = {}
    for e in events:
        topic = topics.route(e.event)
        if topic is not None:
            seen = last.get((topic, e.tenant_id))
            last[(topic, e.tenant_id)] = (e, 1 if seen is None else seen[1] + 1)
    return wake_ups(last, occurred_at)


def wake_ups(last: Mapping[tuple[str, uuid.UUID], tuple[NewEvent, int]],
             occurred_at: datetime) -> Messages:
    """The messages, given each (topic, tenant)'s last event and how many it stands for."""
    rows: Messages = ([], [], [], [])
    for (topic, tenant_id), (e, count) in last.items():
        envelope = Envelope(
            event_id=e.event_id, stream_id=e.stream_id, version=e.version, tenant_id=tenant_id,
            occurred_at=occurred_at, actor=e.actor, epoch=e.epoch, traceparent=e.traceparent,
            event=e.event, coalesced=count,  # type: ignore[arg-type]
        )
        headers = {HEADER_EVENT_ID: str(e.event_id), HEADER_TYPE: event_type(e.event),
                   HEADER_TENANT: str(tenant_id)}
        if e.traceparent:
            headers["traceparent"] = e.traceparent
        rows[0].append(topic)
        rows[1].append(tenant_key(tenant_id))
        rows[2].append(encode(envelope))
        rows[3].append(_json.encode(headers).decode())
    return rows


class Producer(Protocol):
    """What the relay needs from a Kafka producer (aiokafka's AIOKafkaProducer fits)."""

    async def send(self, topic: str, value: bytes, key: bytes,
                   headers: list[tuple[str, bytes]]) -> asyncio.Future[Any]: ...


class OutboxRelay:
    """Publishes outbox rows, a batch per `publish_batch`. Services run it as a duty
    (`ostinato.runtime.duties.outbox_relay`), whose `wake()` lets in-process writers skip the
    poll delay."""

    def __init__(self, pool: asyncpg.Pool, producer: Producer, topics: Topics, *,
                 batch_size: int = 32, idle_poll_seconds: float = 0.2) -> None:
        """`batch_size`: outbox rows (appends) per relay transaction."""
        self.pool = pool
        self.producer = producer
        self.topics = topics
        self.batch_size = batch_size
        self.idle_poll_seconds = idle_poll_seconds
        self._idle = True  # the last batch found nothing: ask before opening a transaction

    async def publish_once(self) -> int:
        """Publish one batch of rows; return how many messages went out."""
        return (await self._publish_rows())[1]

    async def publish_batch(self) -> int:
        """Publish one batch of rows; return how many rows (appends) it took: `batch_size`
        means more are waiting."""
        return (await self._publish_rows())[0]

    async def _publish_rows(self) -> tuple[int, int]:
        """(rows, messages) published. After a batch that found nothing, one read first: an
        idle poll (every `idle_poll_seconds` in each service with a relay) is that read, not a
        transaction; a batch after a batch goes straight to the take (BEGIN, `take_messages`,
        COMMIT)."""
        async with self.pool.acquire() as conn:
            if self._idle and not await conn.fetchval(Q["any_messages"]):
                return 0, 0
            async with conn.transaction():
                rows = sorted(await conn.fetch(Q["take_messages"], self.batch_size),
                              key=lambda r: r["id"])
                self._idle = not rows
                if not rows:
                    return 0, 0
                futures = []
                for r in rows:
                    for topic, key, payload, headers in zip(r["topics"], r["keys"],
                                                            r["payloads"], r["headers"],
                                                            strict=True):
                        futures.append(await self.producer.send(
                            topic, value=payload, key=key,
                            headers=[(k, v.encode())
                                     for k, v in _headers.decode(headers).items()]))
                await asyncio.gather(*futures)
        for topic, n in Counter(t for r in rows for t in r["topics"]).items():
            metrics.OUTBOX_PUBLISHED.labels(topic=self.topics.logical(topic)).inc(n)
        return len(rows), len(futures)

    async def drain(self) -> None:
        """On stop: publish batch after batch while they come full (at most DRAIN_BATCHES), so
        what this process appended last leaves with it; any relay takes the rest later."""
        for _ in range(DRAIN_BATCHES):
            if await self.publish_batch() < self.batch_size:
                return


async def lag(conn: asyncpg.Connection, clock: Clock) -> tuple[int, timedelta]:
    row = await conn.fetchrow(Q["outbox_lag"], clock.db_now())
    return row["unpublished"], timedelta(seconds=row["oldest_age_seconds"])


class TenantBacklog(msgspec.Struct, frozen=True):
    """A tenant's messages in outbox rows older than a threshold, and the oldest row's time."""

    tenant_id: uuid.UUID
    tenant: str
    n: int
    since: datetime


async def waiting_by_tenant(conn: asyncpg.Connection, now: datetime | None, after: timedelta,
                            limit: int) -> list[TenantBacklog]:
    """Per tenant, messages unpublished for longer than `after` (database clock for None)."""
    return [TenantBacklog(**dict(r)) for r in
            await conn.fetch(Q["outbox_waiting_by_tenant"], now, after, limit)]
