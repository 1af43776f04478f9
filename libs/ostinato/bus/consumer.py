"""Batch consumption: poll a batch, handle it (the handler opens one PostgreSQL transaction and
writes ledger rows for the event ids it handled), then commit the offsets.

A crash before the commit redelivers the batch; the ledger makes the second delivery a no-op.
A handler error seeks back to the batch start and retries after a pause, so no message is
skipped. Every `LAG_EVERY_SECONDS` the consumer sets `ostinato_consumer_lag_messages{consumer,
topic}`: per logical topic, the high watermarks its fetches saw minus its positions, over the
partitions assigned to it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from ostinato.bus.codec import Envelope, decode
from ostinato.bus.kafka import NO_AUTH, KafkaAuth
from ostinato.bus.topics import logical_name
from ostinato.telemetry import metrics, tracing
from ostinato.telemetry.logging import RateLimitedLogger, get_logger

log = get_logger("ostinato.bus")
LAG_EVERY_SECONDS = 1.0
# How long the broker holds a fetch that finds nothing: it answers as soon as a message arrives,
# so this sets only how often an idle consumer asks again (Kafka's default; at 100 ms each
# consumer sent ten empty fetches a second: half of an idle broker's CPU, bench/README.md).
FETCH_MAX_WAIT_MS = 500


def lag_by_topic(partitions: Sequence[tuple[str, int | None, int | None]],
                 label: Callable[[str], str] = logical_name) -> dict[str, int]:
    """(topic, high watermark, position) per partition → messages behind per topic label
    (`label(topic)`, the logical name by default); a partition not fetched yet (no watermark or
    position) counts 0 (nothing known)."""
    out: dict[str, int] = {}
    for topic, high, position in partitions:
        name = label(topic)
        behind = max(0, high - position) if high is not None and position is not None else 0
        out[name] = out.get(name, 0) + behind
    return out


async def report_lag(consumer: AIOKafkaConsumer, group: str, labels: Iterable[str],
                     label: Callable[[str], str] = logical_name) -> dict[str, int]:
    """Set `ostinato_consumer_lag_messages{consumer=group}` from what `consumer`'s fetches saw,
    per topic label (`label(topic)`); each of `labels` with no partition assigned (another
    member has it, or not yet) is set to 0. Returns the lag per label."""
    parts = []
    for tp in consumer.assignment():
        position: int | None = None
        high: int | None = None
        # A partition revoked meanwhile (a rebalance) raises: it counts 0 this time.
        with suppress(KafkaError, AssertionError, TimeoutError):
            high = consumer.highwater(tp)
            position = await asyncio.wait_for(consumer.position(tp), 0.5)
        parts.append((tp.topic, high, position))
    lag = lag_by_topic(parts, label)
    for topic in set(labels) - set(lag):
        lag[topic] = 0
    for topic, n in lag.items():
        metrics.CONSUMER_LAG.labels(consumer=group, topic=topic).set(n)
    return lag


@dataclass(frozen=True, slots=True)
class Delivered:
    topic: str
    partition: int
    offset: int
    headers: Sequence[tuple[str, bytes]]
    envelope: Envelope


Handler = Callable[[list[Delivered]], Awaitable[None]]


class BatchConsumer:
    def __init__(self, *, bootstrap: str, group: str | None, topics: Sequence[str],
                 handler: Handler, max_records: int = 500, poll_timeout_ms: int = 100,
                 name: str | None = None, commit_every_seconds: float = 0.0,
                 auth: KafkaAuth = NO_AUTH) -> None:
        """`group=None` reads every partition from the latest offset and commits nothing: for
        notifications that each instance must see (the gateway's wake-ups).
        `commit_every_seconds`: commit offsets at most that often (and on close) rather than
        after every batch, for handlers for which a redelivery costs nothing (wake-ups): an
        offset commit is a broker round trip, as dear as the batch itself."""
        self.group = name or group or "broadcast"
        self.commits = group is not None
        self.topics = list(topics)
        self.handler = handler
        self.max_records = max_records
        self.poll_timeout_ms = poll_timeout_ms
        self.commit_every_seconds = commit_every_seconds
        self._committed_at = float("-inf")
        self._uncommitted = False
        self.consumer = AIOKafkaConsumer(
            *self.topics,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest" if group is not None else "latest",
            isolation_level="read_committed",
            max_poll_records=max_records,
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
            **auth.options(),
        )
        self._stopping = asyncio.Event()
        self.started = False
        self._lag_at = float("-inf")
        # one line per 10 s while every redelivery fails the same way (a database outage)
        self._failures = RateLimitedLogger("ostinato.bus")

    async def start(self) -> None:
        await self.consumer.start()
        self.started = True

    def stop(self) -> None:
        self._stopping.set()

    async def close(self) -> None:
        if self.commits and self._uncommitted:
            with suppress(KafkaError):
                await self.consumer.commit()
        await self.consumer.stop()
        self.started = False

    def assigned(self) -> bool:
        return bool(self.consumer.assignment())

    def pause(self) -> None:
        """Backpressure: stop fetching (e.g. while a local buffer is full)."""
        self.consumer.pause(*self.consumer.assignment())

    def resume(self) -> None:
        self.consumer.resume(*self.consumer.assignment())

    async def _commit(self) -> None:
        now = time.monotonic()
        if now - self._committed_at >= self.commit_every_seconds:
            await self.consumer.commit()
            self._committed_at, self._uncommitted = now, False
        else:
            self._uncommitted = True

    async def report_lag(self) -> dict[str, int]:
        """Set the consumer-lag gauge from what the fetches saw; returns it per topic."""
        return await report_lag(self.consumer, self.group, {logical_name(t) for t in self.topics})

    async def run(self) -> None:
        while not self._stopping.is_set():
            batches = await self.consumer.getmany(timeout_ms=self.poll_timeout_ms,
                                                  max_records=self.max_records)
            if time.monotonic() - self._lag_at >= LAG_EVERY_SECONDS:
                self._lag_at = time.monotonic()
                await self.report_lag()
            if not batches:
                continue
            delivered: list[Delivered] = []
            for tp, records in batches.items():
                for rec in records:
                    try:
                        envelope = decode(rec.value)
                    except Exception as exc:
                        log.error("undecodable message skipped", topic=tp.topic,
                                  partition=tp.partition, offset=rec.offset, error=repr(exc))
                        continue
                    delivered.append(Delivered(tp.topic, tp.partition, rec.offset,
                                               rec.headers or (), envelope))
            metrics.MESSAGES_CONSUMED.labels(consumer=self.group).inc(len(delivered))
            try:
                with metrics.CONSUMER_BATCH_SECONDS.labels(consumer=self.group).time(), \
                        tracing.consumer_span(self.topics[0] if len(self.topics) == 1 else
                                              "multiple", delivered[0].headers if delivered else (),
                                              batch_size=len(delivered)):
                    if delivered:
                        await self.handler(delivered)
                if self.commits:
                    await self._commit()
            except Exception as exc:
                self._failures.error("batch handling failed; will redeliver", exc,
                                     consumer=self.group, exc_info=exc)
                for tp, records in batches.items():
                    self.consumer.seek(TopicPartition(tp.topic, tp.partition), records[0].offset)
                await asyncio.sleep(1.0)
