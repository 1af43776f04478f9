"""Jobs submitted on Kafka: the api consumes every tenant's submit topic and creates each job as
`POST /v1/jobs` does (docs/KAFKA.md).

- The tenant is the topic's: its SCRAM user may write only its own submit topic (ACLs), so
  nothing in a message can name another tenant.
- A message is a `POST /v1/jobs` body. Without an `idempotency_key` it gets one from its
  position (`kafka:<partition>:<offset>`), so a redelivery after a crash creates no second job;
  a producer that may send a message twice gives it its own key.
- A message that cannot be accepted is never lost: it goes to the tenant's rejects topic with the
  problem details (the same `type`, `status` and field `errors` the HTTP answer would carry),
  before the offset is committed.
- Each job created has its `job.create` audit row (actor `kafka:<topic>@<partition>:<offset>`,
  no key, role submitter) in the job's own transaction; a duplicate writes none.
- Nothing a tenant produces stalls the ingest: each message is settled as a job or as exactly one
  rejection (`problem_of` decides which errors are the message's fault: all but an outage of the
  database or broker, so an error no check foresaw rejects its message as the API's 500 would).
  The ingest is a settler under the one consumer loop (`ostinato.bus.consumer`), run as the
  api's `kafka_ingest` duty: only an outage is retried, per partition (sought back to the
  message and paused for a backoff while the others go on), and the offsets of every partition
  are committed up to the messages settled, after each poll. A message that keeps failing
  "transiently" while the database answers is rejected after the loop's
  `TRIES_BEFORE_GIVING_UP` tries (`give_up`). A rejection published but not yet committed is
  remembered, so a redelivery (a rebalance) does not publish it twice.
- While the database's storage is full (`services.api.storage`), submissions are left pending
  on their topics, neither created nor rejected: the assigned partitions are paused (the group
  membership and the lag gauge go on) and resumed once the level falls back; a message fetched
  meanwhile (a rebalance's) is retried as after an outage and never given up. Kafka keeps them
  (mind the topic's retention, docs/KAFKA.md), as the HTTP API's clients keep theirs.
- It reads the submit topics of the tenants in the database whose topic exists (`SubmitTopics`),
  never a pattern: a pattern makes the client read the metadata of every topic on the broker at
  each refresh, which on a broker shared with other applications costs more than the ingest
  itself.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import time
import uuid
from collections.abc import Mapping
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import msgspec
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from ostinato import jobs
from ostinato.bus.consumer import Batch, ConsumerLoop, Settler, Unsettled
from ostinato.bus.kafka import make_producer
from ostinato.bus.topics import Topics, tenant_key
from ostinato.clock import Clock
from ostinato.db.sqlstate import is_unavailable
from ostinato.domain import roles
from ostinato.domain.errors import PROBLEM_BASE, OstinatoError, StorageFull
from ostinato.eventlog.store import EventStore
from ostinato.runtime.duties import Duty, DutyRunner, kafka_consumer
from ostinato.runtime.problems import UNSTORABLE_TEXT
from ostinato.runtime.settings import Settings
from ostinato.stores import tenants as tenant_store
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger
from ostinato.wire.api import JobRequest
from services.api.auditing import record_keyless
from services.api.routes import definition
from services.api.storage import StorageGate

log = get_logger("ostinato.ingest")
# The consumer-lag label of every tenant's submit topic together (no tenant id in a label).
SUBMIT_TOPICS = "ostinato.submit"
FOLLOW_EVERY_SECONDS = 2.0  # a new tenant's topic is read within seconds
LOOKBACK = timedelta(minutes=1)  # a tenant committed after a later-stamped one is found too
MAX_MESSAGE_BYTES = 4 << 20  # as the API's body limit
# A rejection repeats the message unless that would make it longer than this (far below the
# broker's default 1 MB a message); a longer one gives the message's size and SHA-256 instead.
REJECTION_MAX_BYTES = 512 << 10
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
_decoder = msgspec.json.Decoder(JobRequest)


class Rejected(Exception):
    """A message that cannot become a job; `problem` is what the rejects topic gets."""

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem["detail"])
        self.problem = problem


def _problem(status: int, code: str, title: str, detail: str,
             errors: list[dict[str, str]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": PROBLEM_BASE + code, "title": title, "status": status,
                            "detail": detail}
    if errors:
        body["errors"] = errors
    return body


def decode_request(value: bytes | None) -> JobRequest:
    """The message as a `POST /v1/jobs` body, or Rejected with the problem the API would give."""
    if value is None:
        raise Rejected(_problem(400, "bad-request", "Bad request", "the message has no value"))
    if len(value) > MAX_MESSAGE_BYTES:
        raise Rejected(_problem(413, "payload-too-large", "Payload too large",
                                f"the message is {len(value)} bytes; at most "
                                f"{MAX_MESSAGE_BYTES} are accepted"))
    try:
        return _decoder.decode(value)
    except msgspec.ValidationError as exc:
        message = str(exc)
        field = message.rpartition(" - at `$.")[2].rstrip("`") if " - at `$." in message else "body"
        raise Rejected(_problem(422, "invalid-input", f"Invalid {field}", message,
                                [{"field": field, "message": message}])) from exc
    except (msgspec.DecodeError, RecursionError) as exc:
        detail = "the message is nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise Rejected(_problem(400, "bad-request", "Bad request", detail)) from exc


def problem_of(exc: BaseException) -> dict[str, Any] | None:
    """What the rejects topic gets for an error met while handling one message, or None when
    the error is an outage (database or broker away, a server refusing writes after a failover,
    a serialization failure, a lock or a concurrent write on the same key) and the message is to
    be retried. Anything else is the message's own: its problem, or, for an error no check
    foresaw, the API's 500 (logged by the caller), so that no message is retried for ever."""
    if isinstance(exc, Rejected):
        return exc.problem
    if isinstance(exc, StorageFull):  # left pending until there is room again
        return None
    if isinstance(exc, OstinatoError):
        return {**_problem(exc.status, exc.code, exc.title, exc.detail), **exc.extra}
    if isinstance(exc, UNSTORABLE_TEXT):
        return _problem(400, "bad-request", "Bad request",
                        "a text value holds a character that cannot be stored (U+0000, NUL)")
    if isinstance(exc, KafkaError | asyncpg.UniqueViolationError | asyncpg.LockNotAvailableError) \
            or is_unavailable(exc):
        return None
    return _problem(500, "internal", "Internal error",
                    f"the message could not be handled ({type(exc).__name__}); it has been "
                    "logged")


def rejection(topic: str, record: ConsumerRecord, problem: dict[str, Any]) -> bytes:
    """A rejects-topic value: the problem, the message's position and the message (as text, or
    `{"base64": ...}` when it is not UTF-8; its size and SHA-256 when repeating it would make
    the rejection longer than REJECTION_MAX_BYTES)."""
    value = record.value or b""
    try:
        original: Any = value.decode()
    except UnicodeDecodeError:
        original = {"base64": base64.b64encode(value).decode()}
    body = {"problem": problem, "topic": topic, "partition": record.partition,
            "offset": record.offset, "message": original}
    encoded = msgspec.json.encode(body)
    if len(encoded) > REJECTION_MAX_BYTES:
        body["message"] = {"omitted": "too long to repeat", "bytes": len(value),
                           "sha256": hashlib.sha256(value).hexdigest()}
        encoded = msgspec.json.encode(body)
    return encoded


def _traceparent(record: ConsumerRecord) -> str | None:
    for name, value in record.headers or ():
        if name.lower() == "traceparent":
            text = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
            return text if _TRACEPARENT.match(text) else None
    return None


class SubmitTopics:
    """The submit topics to read: those of the tenants in the database whose topic exists on the
    broker (it is made when the tenant's Kafka access is granted, which may come later).
    Tenants are read incrementally; a topic not there yet is asked about by name alone."""

    def __init__(self, topics: Topics, admin: AIOKafkaAdminClient) -> None:
        self.topics, self.admin = topics, admin
        self.reading: set[str] = set()
        self._missing: set[str] = set()
        self._seen: set[uuid.UUID] = set()
        self._since: datetime | None = None

    async def follow(self, conn: asyncpg.Connection) -> bool:
        """Take in new tenants and topics that have appeared; True when `reading` grew."""
        since = None if self._since is None else self._since - LOOKBACK
        for tenant in await tenant_store.created_since(conn, since):
            if tenant.id not in self._seen:
                self._seen.add(tenant.id)
                self._missing.add(self.topics.submit(tenant.id))
            self._since = max(self._since or tenant.created_at, tenant.created_at)
        if not self._missing:
            return False
        described = await self.admin.describe_topics(sorted(self._missing))
        there = {t["topic"] for t in described if t["error_code"] == 0} & self._missing
        self._missing -= there
        self.reading |= there
        return bool(there)


class SubmitIngest(Settler):
    """The consumer of every tenant's submit topic, run by the api service as its
    `kafka_ingest` duty (`duty()`): a settler under the one consumer loop
    (`ostinato.bus.consumer`), which polls, retries a partition after an outage and commits."""

    def __init__(self, pool: asyncpg.Pool, store: EventStore, clock: Clock,
                 settings: Settings, storage: StorageGate | None = None) -> None:
        self.pool, self.store, self.clock, self.settings = pool, store, clock, settings
        # the api's storage level (one of its own when not shared): full leaves messages pending
        self.storage = storage or StorageGate(lambda: pool, settings.storage_retry_after_seconds)
        self._held = False  # the assigned partitions paused for want of storage
        self.topics: Topics = settings.topics
        self.group = f"{settings.topic_prefix}ostinato.ingest"
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=settings.kafka_bootstrap,
            group_id=self.group,
            enable_auto_commit=False, auto_offset_reset="earliest",
            isolation_level="read_committed", max_poll_records=200,
            **settings.kafka_auth.options(),
        )
        self.loop = ConsumerLoop(self.consumer, self, group=self.group,
                                 lag_labels={SUBMIT_TOPICS}, label=lambda _topic: SUBMIT_TOPICS,
                                 max_records=200, poll_timeout_ms=200)
        self.admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap,
                                         client_id="ostinato-ingest",
                                         **settings.kafka_auth.options())
        self.submit_topics = SubmitTopics(self.topics, self.admin)
        self._followed_at = float("-inf")
        self.producer = make_producer(settings.kafka_bootstrap, "ostinato-ingest",
                                      settings.kafka_auth)
        self.started = self._closed = False
        self._runner: DutyRunner | None = None
        self._known: set[uuid.UUID] = set()
        # (topic, partition, offset) of rejections published and not committed yet
        self._published: set[tuple[str, int, int]] = set()

    def duty(self) -> Duty:
        """The ingest as a duty (`duty:kafka_ingest` on /readyz): a poll per tick; the broker
        away at the start or during a poll is retried by the runner (the HTTP API works
        meanwhile)."""
        return kafka_consumer("kafka_ingest", self)

    async def start(self) -> None:
        """Connect (the duty's first tick, again at each tick while the broker is away)."""
        await self.producer.start()
        await self.admin.start()
        await self.consumer.start()
        self.started = True

    async def run(self) -> None:
        """Run the duty until `stop()` (the api service runs `duty()` among its own)."""
        self._runner = DutyRunner(self.duty(), self.clock)
        await self._runner.run()

    def stop(self) -> None:
        if self._runner is not None:
            self._runner.stop()

    async def close(self) -> None:
        """Commit what is settled and disconnect (once)."""
        if self._closed:
            return
        self._closed = True
        with suppress(KafkaError):
            await self.loop.close()
        with suppress(KafkaError):
            await self.admin.close()
        with suppress(KafkaError):
            await self.producer.stop()

    async def poll_once(self) -> int:
        """One tick: connect if not yet, follow new tenants' topics every
        FOLLOW_EVERY_SECONDS, then one poll of the loop (messages fetched)."""
        if not self.started:
            await self.start()
        if time.monotonic() - self._followed_at >= FOLLOW_EVERY_SECONDS:
            self._followed_at = time.monotonic()
            await self.follow_tenants()
        if not self.submit_topics.reading:
            await asyncio.sleep(0.2)
            return 0
        await self._hold_while_full()
        return await self.loop.poll_once()

    async def _hold_while_full(self) -> None:
        """Pause every assigned partition while the storage is full (again at each poll: a
        rebalance assigns new ones), resume them when it is not (but those waiting out an
        outage's backoff: the loop resumes them)."""
        if await self.storage.refusal() is not None:
            if not self._held:
                log.warning("storage full: kafka submissions left pending on their topics",
                            alert="ostinato_new_work_refused")
            self._held = True
            self.consumer.pause(*self.consumer.assignment())
            return
        if self._held:
            self._held = False
            self.consumer.resume(*(self.consumer.assignment() - self.loop.retrying()))
            log.info("storage back under the refuse watermark: kafka submissions taken again")

    async def settle(self, batch: Batch) -> dict[TopicPartition, Unsettled]:
        """Settle each partition's messages in order, each as a job or a rejection; a
        partition stops at the message that met an outage (the loop retries it alone)."""
        unsettled: dict[TopicPartition, Unsettled] = {}
        for tp, records in batch.items():
            for record in records:
                try:
                    await self.handle(record)
                except Exception as exc:  # handle() rejects what is the message's fault
                    unsettled[tp] = Unsettled(record, exc)
                    break
        return unsettled

    async def give_up(self, record: ConsumerRecord, error: BaseException, tries: int) -> bool:
        """After TRIES_BEFORE_GIVING_UP transient failures of one message while the database
        answers, the failure is the message's: reject it (True when rejected)."""
        if isinstance(error, KafkaError | StorageFull):  # never the message's fault
            return False
        async with self.pool.acquire() as conn:
            await conn.fetchval("SELECT 1")
        tenant = self.topics.submit_tenant(record.topic)
        assert tenant is not None  # handle() dropped messages on topics of no tenant
        await self._reject(uuid.UUID(tenant), record, _problem(
            503, "service-unavailable", "Service unavailable",
            f"the message failed {tries} times with a transient error ({type(error).__name__})"
            " while the database answered"))
        log.error("kafka submission rejected after repeated transient failures",
                  partition=record.partition, offset=record.offset, tries=tries,
                  error=repr(error))
        return True

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Forget the rejections published below the offsets committed."""
        self._published = {(t, p, o) for t, p, o in self._published
                           if o >= offsets.get(TopicPartition(t, p), 0)}
        if len(self._published) > 100_000:  # partitions revoked for good: forget them
            self._published.clear()

    async def follow_tenants(self) -> None:
        """Read the submit topics of tenants new since the last look (a change of subscription
        makes the group rebalance; a new topic is read from its start)."""
        async with self.pool.acquire() as conn:
            grew = await self.submit_topics.follow(conn)
        if grew:
            self.consumer.subscribe(topics=sorted(self.submit_topics.reading))
            log.info("kafka ingest reads tenants' submit topics",
                     topics=len(self.submit_topics.reading))

    async def report_lag(self) -> dict[str, int]:
        """Set `ostinato_consumer_lag_messages{consumer=<group>, topic="ostinato.submit"}`: the
        messages of every tenant's submit topic assigned here not consumed yet, as every
        consumer under the one loop does (`ostinato.bus.consumer.report_lag`)."""
        return await self.loop.report_lag()

    async def handle(self, record: ConsumerRecord) -> str:
        """One message: `accepted`, `duplicate`, `rejected` or `dropped` (the metric's label).
        Raises only on an outage (`problem_of` gives None): the message is to be retried."""
        tenant = self.topics.submit_tenant(record.topic)
        if tenant is None or not await self._tenant_exists(uuid.UUID(tenant)):
            log.error("submission on a topic of no tenant dropped", topic=record.topic,
                      partition=record.partition, offset=record.offset)
            metrics.KAFKA_SUBMISSIONS.labels(outcome="dropped").inc()
            return "dropped"
        tenant_id = uuid.UUID(tenant)
        try:
            refused = await self.storage.refusal()
            if refused is not None:  # a message fetched before the pause: left pending
                raise refused
            request = decode_request(record.value)
            if request.idempotency_key is None:
                request = msgspec.structs.replace(
                    request, idempotency_key=f"kafka:{record.partition}:{record.offset}")
            job, created = await self._submit(tenant_id, request, record)
        except Exception as exc:
            problem = problem_of(exc)
            if problem is None:
                raise
            if problem["status"] >= 500:
                log.error("kafka submission failed unexpectedly", tenant_id=str(tenant_id),
                          partition=record.partition, offset=record.offset, error=repr(exc),
                          exc_info=exc)
            await self._reject(tenant_id, record, problem)
            return "rejected"
        outcome = "accepted" if created else "duplicate"
        metrics.KAFKA_SUBMISSIONS.labels(outcome=outcome).inc()
        log.info("job submitted on kafka", tenant_id=str(tenant_id), job_id=str(job.id),
                 outcome=outcome, partition=record.partition, offset=record.offset)
        return outcome

    async def _tenant_exists(self, tenant_id: uuid.UUID) -> bool:
        if tenant_id not in self._known:
            async with self.pool.acquire() as conn:
                if await tenant_store.name_of(conn, tenant_id) is None:
                    return False
            self._known.add(tenant_id)
        return True

    async def _submit(self, tenant_id: uuid.UUID, request: JobRequest,
                      record: ConsumerRecord) -> tuple[Any, bool]:
        s = self.settings
        actor = f"kafka:{self.topics.logical(record.topic)}@{record.partition}:{record.offset}"
        async with self.pool.acquire() as conn, conn.transaction():
            job, created = await jobs.submit_job(
                conn, self.store, self.clock, tenant_id=tenant_id, request=request,
                pools=s.pool_names, pool_retry=s.pool_retry,
                classes=[c.name for c in s.classes], max_payload_bytes=s.max_payload_bytes,
                actor=actor, traceparent=_traceparent(record))
            if created:
                await record_keyless(conn, tenant_id=tenant_id, actor=actor,
                                     role=roles.SUBMITTER, action="job.create",
                                     target_kind="job", target_id=str(job.id), status=201,
                                     after=definition(job))
            return job, created

    async def _reject(self, tenant_id: uuid.UUID, record: ConsumerRecord,
                      problem: dict[str, Any]) -> None:
        """Publish the message's one rejection (not again if this process published it and has
        not committed past it yet: a redelivery after a rebalance)."""
        position = (record.topic, record.partition, record.offset)
        if position in self._published:
            return
        await self.producer.send_and_wait(
            self.topics.rejects(tenant_id), rejection(self.topics.logical(record.topic), record,
                                                      problem),
            key=tenant_key(tenant_id), headers=[("problem-type", problem["type"].encode())])
        self._published.add(position)
        metrics.KAFKA_SUBMISSIONS.labels(outcome="rejected").inc()
        log.warning("kafka submission rejected", tenant_id=str(tenant_id),
                    partition=record.partition, offset=record.offset, problem=problem["title"])
