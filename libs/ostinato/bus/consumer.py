"""The one Kafka consumer loop. Every consumer (the dispatcher's and the gateway's wake-ups,
the api's ingest of tenants' submissions) is a `Settler` plugged into a `ConsumerLoop`, which
each service runs as a duty (`ostinato.runtime.duties.kafka_consumer`, on /readyz).

One `poll_once` fetches a batch, hands it to the settler and commits, partition by partition,
the offsets of the messages settled. The one error policy:

- a message's own fault (undecodable, invalid) is settled by the settler's rejection path:
  the wake-up consumers log and skip it, the ingest publishes one rejection;
- an outage (the settler raised, or reported a partition `Unsettled`) is retried per partition:
  that partition is sought back to its first unsettled message and paused for a backoff
  (`backoff`: 0.5 s doubling to 5 s) while the others go on, and nothing past that message is
  committed. After `TRIES_BEFORE_GIVING_UP` tries of one message the settler's `give_up` may
  settle it (the ingest rejects it if the database answers; the wake-up consumers never give
  up);
- an error of the poll or of a commit's broker call is the duty runner's (retried with backoff,
  a permanent one shown on /readyz): a failed commit is tried again after the next poll, the
  messages staying settled.

A crash before the commit redelivers what was settled; settlers are idempotent (the ledger, an
idempotency key). `BatchConsumer` reads logged events' wake-ups: its settler decodes each
message's envelope and hands the whole batch to one handler (one transaction). Every
`LAG_EVERY_SECONDS` the loop sets `ostinato_consumer_lag_messages{consumer, topic}`: per topic
label, the high watermarks its fetches saw minus its positions, over the partitions assigned
to it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
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
RETRY_FIRST_SECONDS, RETRY_MOST_SECONDS = 0.5, 5.0  # a partition's backoff after an outage
# Tries of one message failing with an outage before the settler may settle it otherwise
# (`Settler.give_up`): the ingest then asks the database whether it answers.
TRIES_BEFORE_GIVING_UP = 10
Batch = Mapping[TopicPartition, list[ConsumerRecord]]


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


def backoff(tries: int) -> float:
    """Seconds a partition waits before its unsettled message is tried again (tries >= 1)."""
    return min(RETRY_FIRST_SECONDS * 2 ** min(tries - 1, 16), RETRY_MOST_SECONDS)


@dataclass(frozen=True, slots=True)
class Unsettled:
    """A partition's first message not settled, for an outage (`error`); the messages after it
    in the batch are not settled either."""

    record: ConsumerRecord
    error: BaseException


class Settler:
    """What a consumer does with its messages (the loop does the rest: module docstring)."""

    async def settle(self, batch: Batch) -> Mapping[TopicPartition, Unsettled]:
        """Settle the batch's messages, each partition's in order; return the partitions
        stopped by an outage (raising means every partition of the batch was)."""
        raise NotImplementedError

    async def give_up(self, record: ConsumerRecord, error: BaseException, tries: int) -> bool:
        """After TRIES_BEFORE_GIVING_UP outages of `record`: settle it some other way (True),
        or keep retrying it (False, the default)."""
        return False

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """The offsets just committed (the next message to read, per partition)."""


@dataclass(slots=True)
class _Retry:
    """A partition whose message at `offset` met an outage `tries` times in a row."""

    offset: int
    tries: int
    resume_at: float


class ConsumerLoop:
    """Polls `consumer` and settles what it fetched through `settler` under the one error
    policy (module docstring). `commits=False` for a consumer outside a group (it reads from
    the latest offset and commits nothing); `commit_every_seconds`: commit at most that often
    (and on close), for settlers whose redeliveries cost nothing (wake-ups): an offset commit
    is a broker round trip, as dear as the batch itself. `lag_labels` and `label`: the topic
    labels of the lag gauge (each topic's logical name by default)."""

    def __init__(self, consumer: AIOKafkaConsumer, settler: Settler, *, group: str,
                 commits: bool = True, lag_labels: Iterable[str] = (),
                 label: Callable[[str], str] = logical_name, max_records: int = 500,
                 poll_timeout_ms: int = 100, commit_every_seconds: float = 0.0) -> None:
        self.consumer, self.settler, self.group = consumer, settler, group
        self.commits = commits
        self.lag_labels, self.label = set(lag_labels), label
        self.max_records, self.poll_timeout_ms = max_records, poll_timeout_ms
        self.commit_every_seconds = commit_every_seconds
        self._committed_at = float("-inf")
        self._lag_at = float("-inf")
        self._settled: dict[TopicPartition, int] = {}  # the next offset to commit, by partition
        self._retrying: dict[TopicPartition, _Retry] = {}
        # one line per 10 s while every retry fails the same way (a database outage)
        self._failures = RateLimitedLogger("ostinato.bus")

    async def poll_once(self) -> int:
        """One poll: resume the partitions whose backoff is over, fetch, settle, commit.
        Returns how many messages were fetched (settled or not)."""
        self._resume_due()
        batch = await self.consumer.getmany(timeout_ms=self.poll_timeout_ms,
                                            max_records=self.max_records)
        if time.monotonic() - self._lag_at >= LAG_EVERY_SECONDS:
            self._lag_at = time.monotonic()
            await self.report_lag()
        if batch:
            await self._settle(batch)
        await self.commit()
        return sum(len(records) for records in batch.values())

    async def _settle(self, batch: Batch) -> None:
        metrics.MESSAGES_CONSUMED.labels(consumer=self.group).inc(
            sum(len(records) for records in batch.values()))
        try:
            with metrics.CONSUMER_BATCH_SECONDS.labels(consumer=self.group).time():
                unsettled = await self.settler.settle(batch)
        except Exception as exc:  # met by the batch as a whole: every partition is retried
            self._failures.error("batch handling failed; will redeliver", exc,
                                 consumer=self.group, exc_info=exc)
            unsettled = {tp: Unsettled(records[0], exc) for tp, records in batch.items()}
        for tp, records in batch.items():
            miss = unsettled.get(tp)
            if miss is None:
                self._retrying.pop(tp, None)
                self._settled[tp] = records[-1].offset + 1
                continue
            if miss.record.offset > records[0].offset:
                self._settled[tp] = miss.record.offset
            await self._outage(tp, miss)

    async def _outage(self, tp: TopicPartition, miss: Unsettled) -> None:
        """Retry the partition from its unsettled message after a backoff, unless the settler
        gives the message up after TRIES_BEFORE_GIVING_UP tries."""
        offset = miss.record.offset
        retry = self._retrying.get(tp)
        tries = 1 + (retry.tries if retry and retry.offset == offset else 0)
        if tries >= TRIES_BEFORE_GIVING_UP and await self._give_up(miss, tries):
            self._retrying.pop(tp, None)
            self._settled[tp] = offset + 1
            with suppress(KafkaError, AssertionError):  # revoked meanwhile: its next owner has it
                self.consumer.seek(tp, offset + 1)  # the rest of the batch comes again
            return
        delay = backoff(tries)
        self._retrying[tp] = _Retry(offset, tries, time.monotonic() + delay)
        with suppress(KafkaError, AssertionError):  # revoked meanwhile: its next owner has it
            self.consumer.seek(tp, offset)
            self.consumer.pause(tp)
        self._failures.warning("message will be retried", miss.error, kind=tp,
                               consumer=self.group, topic=tp.topic, partition=tp.partition,
                               offset=offset, tries=tries, retry_in=delay)

    async def _give_up(self, miss: Unsettled, tries: int) -> bool:
        try:
            return await self.settler.give_up(miss.record, miss.error, tries)
        except Exception as exc:
            log.warning("a message still cannot be settled", consumer=self.group,
                        error=repr(exc))
            return False

    def _resume_due(self) -> None:
        """Resume the partitions whose backoff is over (forget those no longer assigned)."""
        assigned, now = self.consumer.assignment(), time.monotonic()
        for tp, retry in list(self._retrying.items()):
            if tp not in assigned:
                del self._retrying[tp]
            elif retry.resume_at <= now and tp in self.consumer.paused():
                self.consumer.resume(tp)

    def retrying(self) -> set[TopicPartition]:
        """The partitions waiting out a backoff after an outage."""
        return set(self._retrying)

    async def commit(self, *, now: bool = False) -> None:
        """Commit each assigned partition's offset past the messages settled on it (at most
        every `commit_every_seconds` unless `now`); a failed commit is tried again after the
        next poll (the messages stay settled)."""
        if not self.commits:
            self._settled.clear()
            return
        if not self._settled or (
                not now and time.monotonic() - self._committed_at < self.commit_every_seconds):
            return
        assigned = self.consumer.assignment()
        offsets = {tp: n for tp, n in self._settled.items() if tp in assigned}
        if not offsets:
            self._settled.clear()
            return
        try:
            await self.consumer.commit(offsets)
        except KafkaError as exc:
            self._settled = offsets
            self._failures.warning("offsets not committed yet", exc, consumer=self.group)
            return
        self._settled.clear()
        self._committed_at = time.monotonic()
        self.settler.committed(offsets)

    async def report_lag(self) -> dict[str, int]:
        """Set the consumer-lag gauge from what the fetches saw; returns it per topic label."""
        return await report_lag(self.consumer, self.group, self.lag_labels, self.label)

    async def close(self) -> None:
        """Commit what is settled and leave the group."""
        with suppress(KafkaError):
            await self.commit(now=True)
        await self.consumer.stop()


@dataclass(frozen=True, slots=True)
class Delivered:
    topic: str
    partition: int
    offset: int
    headers: Sequence[tuple[str, bytes]]
    envelope: Envelope


Handler = Callable[[list[Delivered]], Awaitable[None]]


class _Envelopes(Settler):
    """Logged events' messages: each decoded (an undecodable one is logged and skipped: its
    rejection path), the batch handed to one handler; its error retries every partition."""

    def __init__(self, handler: Handler, topics: Sequence[str]) -> None:
        self.handler = handler
        self.span_topic = topics[0] if len(topics) == 1 else "multiple"

    async def settle(self, batch: Batch) -> Mapping[TopicPartition, Unsettled]:
        delivered: list[Delivered] = []
        for tp, records in batch.items():
            for rec in records:
                try:
                    envelope = decode(rec.value)
                except Exception as exc:
                    log.error("undecodable message skipped", topic=tp.topic,
                              partition=tp.partition, offset=rec.offset, error=repr(exc))
                    continue
                delivered.append(Delivered(tp.topic, tp.partition, rec.offset,
                                           rec.headers or (), envelope))
        if delivered:
            with tracing.consumer_span(self.span_topic, delivered[0].headers,
                                       batch_size=len(delivered)):
                await self.handler(delivered)
        return {}


class BatchConsumer:
    """A consumer of logged events' wake-ups on `topics`: `handler` gets each batch's decoded
    messages (`Delivered`) at once, under the one loop (`ConsumerLoop`)."""

    def __init__(self, *, bootstrap: str, group: str | None, topics: Sequence[str],
                 handler: Handler, max_records: int = 500, poll_timeout_ms: int = 100,
                 name: str | None = None, commit_every_seconds: float = 0.0,
                 auth: KafkaAuth = NO_AUTH) -> None:
        """`group=None` reads every partition from the latest offset and commits nothing: for
        notifications that each instance must see (the gateway's wake-ups).
        `commit_every_seconds`: as `ConsumerLoop`'s (wake-ups: a redelivery costs nothing)."""
        self.group = name or group or "broadcast"
        self.commits = group is not None
        self.topics = list(topics)
        self.handler = handler
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
        self.loop = ConsumerLoop(
            self.consumer, _Envelopes(handler, self.topics), group=self.group,
            commits=self.commits, lag_labels={logical_name(t) for t in self.topics},
            max_records=max_records, poll_timeout_ms=poll_timeout_ms,
            commit_every_seconds=commit_every_seconds)
        self._stopping = asyncio.Event()
        self.started = False

    async def start(self) -> None:
        await self.consumer.start()
        self.started = True

    def stop(self) -> None:
        self._stopping.set()

    async def close(self) -> None:
        if self.started:
            await self.loop.close()
        self.started = False

    def assigned(self) -> bool:
        return bool(self.consumer.assignment())

    def pause(self) -> None:
        """Backpressure: stop fetching (e.g. while a local buffer is full)."""
        self.consumer.pause(*self.consumer.assignment())

    def resume(self) -> None:
        """Fetch again (a partition waiting out an outage's backoff stays paused)."""
        self.consumer.resume(*(self.consumer.assignment() - self.loop.retrying()))

    async def report_lag(self) -> dict[str, int]:
        """Set the consumer-lag gauge from what the fetches saw; returns it per topic."""
        return await self.loop.report_lag()

    async def poll_once(self) -> int:
        """One poll of the loop, the consumer started first if it is not yet (a tick of the
        service's `kafka_consumer` duty)."""
        if not self.started:
            await self.start()
        return await self.loop.poll_once()

    async def run(self) -> None:
        """Poll until `stop()` (for tests and benchmarks; services run `poll_once` as a duty)."""
        while not self._stopping.is_set():
            await self.poll_once()
