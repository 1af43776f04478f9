"""Tenant-scoped Kafka producers against the real broker's SASL/SCRAM listener and ACLs
(docs/KAFKA.md): a new tenant gets a SCRAM user that may write its own submit topic and nothing
else; a wrong password is refused; the api's ingest turns each accepted message into exactly one
job (also when produced twice, or redelivered), and a message it cannot accept lands in the
tenant's rejects topic with the problem the HTTP API would give."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    TopicAuthorizationFailedError,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ostinato.bus.kafka import ensure_topics
from ostinato.bus.topics import Topics
from ostinato.clock import SystemClock
from ostinato.db.pool import create_pool
from ostinato.eventlog.store import read_stream
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.runtime.service import Service
from services.api.app import create_app
from services.api.ingest import REJECTION_MAX_BYTES, SubmitIngest, SubmitTopics
from tests.helpers.api import ADMIN, assert_problem, auth
from tests.helpers.env import KAFKA_BOOTSTRAP
from tests.helpers.integration import kafka_settings, store
from tests.helpers.integration import new_tenant as new_tenant_row
from tests.helpers.waiting import until

from . import job_bodies

pytestmark = pytest.mark.integration
ENOUGH = 60.0  # a safety net for a broken ingest, never a bound on how fast it is
# Tens of generated messages, each produced and settled in turn: bounded so CI stays fast.
FUZZ = settings(max_examples=int(os.environ.get("OSTINATO_INGEST_FUZZ_EXAMPLES", "40")),
                deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@asynccontextmanager
async def running_api(pool: asyncpg.Pool, db_url: str, topic_prefix: str,
                      ingest_pool: asyncpg.Pool | None = None,
                      ) -> AsyncIterator[tuple[httpx.AsyncClient, SubmitIngest]]:
    """The api in-process with Kafka submission on, and its ingest consumer running (on
    `ingest_pool` if given)."""
    s = kafka_settings(db_url, topic_prefix)
    service = Service("api", s)
    service.pool = pool
    ingest = SubmitIngest(ingest_pool or pool, store(), SystemClock(), s)
    running = asyncio.create_task(ingest.run())
    transport = httpx.ASGITransport(app=create_app(service, store()))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as c:
            yield c, ingest
    finally:
        ingest.stop()
        await running
        await ingest.close()


@pytest.fixture
async def kafka_api(pool: asyncpg.Pool, db_url: str,
                    topic_prefix: str) -> AsyncIterator[tuple[httpx.AsyncClient, SubmitIngest]]:
    """The api in-process with Kafka submission on, and its ingest consumer running."""
    async with running_api(pool, db_url, topic_prefix) as api:
        yield api


async def new_tenant(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    r = await client.post("/v1/tenants", json={"name": name}, headers=auth(ADMIN))
    assert r.status_code == 201, r.text
    assert r.json()["kafka"] is not None, r.json()
    return r.json()


def sasl(access: dict[str, Any], password: str | None = None) -> dict[str, Any]:
    return {"bootstrap_servers": access["bootstrap_servers"],
            "security_protocol": access["security_protocol"],
            "sasl_mechanism": access["sasl_mechanism"],
            "sasl_plain_username": access["username"],
            "sasl_plain_password": password or access["password"]}


async def produce(access: dict[str, Any], *values: bytes, topic: str | None = None) -> list[int]:
    """Produce as the tenant's own SCRAM user; the offsets the values got."""
    producer = AIOKafkaProducer(**sasl(access), enable_idempotence=True, acks="all",
                                max_request_size=2 << 20)
    await producer.start()
    try:
        return [(await producer.send_and_wait(topic or access["topic"], value)).offset
                for value in values]
    finally:
        await producer.stop()


async def jobs_named(client: httpx.AsyncClient, key: str, name: str) -> list[dict[str, Any]]:
    r = await client.get("/v1/jobs", params={"limit": 500}, headers=auth(key))
    assert r.status_code == 200, r.text
    return [j for j in r.json()["items"] if j["name"] == name]


async def until_job(client: httpx.AsyncClient, key: str, name: str) -> dict[str, Any]:
    async with asyncio.timeout(ENOUGH):
        while True:
            found = await jobs_named(client, key, name)
            if found:
                return found[0]
            await asyncio.sleep(0.2)


async def rejects(access: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """The tenant's rejects, read as the services read (the internal listener)."""
    consumer = AIOKafkaConsumer(access["rejects_topic"], bootstrap_servers=KAFKA_BOOTSTRAP,
                                auto_offset_reset="earliest", group_id=None)
    await consumer.start()
    got: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(ENOUGH):
            while len(got) < count:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(msgspec.json.decode(r.value) for r in records)
    finally:
        await consumer.stop()
    return got


def job(name: str, **extra: Any) -> bytes:
    return msgspec.json.encode({"name": name, "task": "hello", "payload": {"n": 1}, **extra})


async def test_a_tenant_may_write_its_own_submit_topic_and_nothing_else(
        kafka_api: tuple[httpx.AsyncClient, SubmitIngest]) -> None:
    client, _ = kafka_api
    a, b = await new_tenant(client, "kafka-a"), await new_tenant(client, "kafka-b")
    access = a["kafka"]
    assert access["topic"].endswith(f"ostinato.submit.{a['id']}")
    await produce(access, job("own-topic"))  # allowed
    assert (await until_job(client, a["api_key"], "own-topic"))["task"] == "hello"

    with pytest.raises(TopicAuthorizationFailedError):
        await produce(access, job("smuggled"), topic=b["kafka"]["topic"])
    assert await jobs_named(client, b["api_key"], "smuggled") == []

    for topic in (access["topic"], access["rejects_topic"], b["kafka"]["topic"]):
        for group in (f"g-{uuid.uuid4()}", None):  # in a consumer group, and reading alone
            await refused_reading(access, topic, group)


async def refused_reading(access: dict[str, Any], topic: str, group: str | None) -> None:
    consumer = AIOKafkaConsumer(topic, **sasl(access), group_id=group,
                                auto_offset_reset="earliest")
    try:
        with pytest.raises((GroupAuthorizationFailedError, TopicAuthorizationFailedError)) as e:
            await consumer.start()
            async with asyncio.timeout(ENOUGH):
                while True:
                    await consumer.getmany(timeout_ms=500)
        if group is None:  # no group to refuse: the topic read itself is refused
            assert isinstance(e.value, TopicAuthorizationFailedError), (topic, e.value)
    finally:
        await consumer.stop()


async def test_a_wrong_password_is_refused(
        kafka_api: tuple[httpx.AsyncClient, SubmitIngest]) -> None:
    client, _ = kafka_api
    access = (await new_tenant(client, "kafka-pw"))["kafka"]
    await produce(access, job("right-password"))  # the same settings with the right one work
    producer = AIOKafkaProducer(**sasl(access, password="not-the-password"))
    with pytest.raises(KafkaConnectionError):
        try:
            await producer.start()
        finally:
            await producer.stop()


async def test_a_new_password_replaces_the_old_one(
        kafka_api: tuple[httpx.AsyncClient, SubmitIngest]) -> None:
    client, _ = kafka_api
    tenant = await new_tenant(client, "kafka-rotate")
    old = tenant["kafka"]
    r = await client.post("/v1/kafka/credentials", headers=auth(tenant["api_key"]))
    assert r.status_code == 201, r.text
    new = r.json()
    assert new["password"] != old["password"] and new["topic"] == old["topic"]
    await produce(new, job("after-rotation"))
    await until_job(client, tenant["api_key"], "after-rotation")
    producer = AIOKafkaProducer(**sasl(old))
    with pytest.raises(KafkaConnectionError):
        try:
            await producer.start()
        finally:
            await producer.stop()


async def test_a_message_produced_twice_is_one_job_and_a_redelivery_creates_none(
        kafka_api: tuple[httpx.AsyncClient, SubmitIngest], pool: asyncpg.Pool) -> None:
    client, ingest = kafka_api
    tenant = await new_tenant(client, "kafka-twice")
    access, key = tenant["kafka"], tenant["api_key"]
    twice = job("twice", idempotency_key="order-42")
    await produce(access, twice, twice, job("unkeyed"), job("sentinel"))
    await until_job(client, key, "sentinel")  # one partition: the others were handled first
    [created] = await jobs_named(client, key, "twice")
    assert created["idempotency_key"] == "order-42"
    [unkeyed] = await jobs_named(client, key, "unkeyed")
    assert unkeyed["idempotency_key"] == "kafka:0:2"  # its position: partition 0, offset 2
    async with pool.acquire() as conn:
        stream = await read_stream(conn, uuid.UUID(created["id"]), uuid.UUID(tenant["id"]))
    assert stream[0].type == "JobCreated"
    assert stream[0].actor.startswith("kafka:") and stream[0].actor.endswith("@0:0")

    again = ConsumerRecord(topic=access["topic"], partition=0, offset=2, timestamp=0,
                           timestamp_type=0, key=None, value=job("unkeyed"), checksum=None,
                           serialized_key_size=-1, serialized_value_size=0, headers=())
    assert await ingest.handle(again) == "duplicate"
    assert len(await jobs_named(client, key, "unkeyed")) == 1

    # One job.create audit row per job created, by the message's position and no key; the
    # message produced again and the redelivery wrote none.
    rows = await pool.fetch("SELECT * FROM audit WHERE tenant_id = $1 AND action = 'job.create'",
                            uuid.UUID(tenant["id"]))
    by_target = {r["target_id"]: r for r in rows}
    assert len(rows) == len(by_target) == 3
    assert set(by_target) == {created["id"], unkeyed["id"],
                              (await jobs_named(client, key, "sentinel"))[0]["id"]}
    row = by_target[created["id"]]
    assert row["actor"] == stream[0].actor and row["actor"].endswith("@0:0")
    assert row["key_id"] is None and row["key_name"] == "" and row["role"] == "submitter"
    assert (row["status"], row["outcome"], row["target_kind"]) == (201, "done", "job")
    assert row["after"]["name"] == "twice"
    assert by_target[unkeyed["id"]]["actor"].endswith("@0:2")


async def test_a_message_that_cannot_be_accepted_lands_in_rejects_with_its_problem(
        kafka_api: tuple[httpx.AsyncClient, SubmitIngest]) -> None:
    client, _ = kafka_api
    tenant = await new_tenant(client, "kafka-rejects")
    access, key = tenant["kafka"], tenant["api_key"]
    await produce(access, b"{not json", job("bad-priority", priority="high"),
                  job("bad-pool", pool="nowhere"), b"\xff\xfe",
                  job("reused", idempotency_key="k1"),
                  job("reused-other", idempotency_key="k1"), job("sentinel"))
    await until_job(client, key, "sentinel")
    got = await rejects(access, 5)
    by_offset = {g["offset"]: g for g in got}
    assert sorted(by_offset) == [0, 1, 2, 3, 5]  # offset 4 became a job, 6 the sentinel
    assert by_offset[0]["problem"]["status"] == 400 and by_offset[0]["message"] == "{not json"
    assert by_offset[1]["problem"]["status"] == 422
    assert by_offset[1]["problem"]["errors"][0]["field"] == "priority"
    assert by_offset[2]["problem"]["status"] == 422
    assert "pool" in [e["field"] for e in by_offset[2]["problem"]["errors"]]
    assert by_offset[3]["problem"]["status"] == 400 and "base64" in by_offset[3]["message"]
    for g in got:
        assert g["problem"]["type"].startswith("https://") and g["problem"]["detail"]
    names = {j["name"] for j in (await client.get(
        "/v1/jobs", headers=auth(key))).json()["items"]}
    assert names == {"reused", "sentinel"}
    assert by_offset[5]["problem"]["status"] == 409  # the key k1 with another body


async def test_credentials_are_refused_where_kafka_submission_is_off(
        client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/tenants", json={"name": "no-kafka"}, headers=auth(ADMIN))
    assert r.status_code == 201 and r.json()["kafka"] is None
    r = await client.post("/v1/kafka/credentials", headers=auth(r.json()["api_key"]))
    assert_problem(r, 409)


async def test_the_ingest_subscribes_to_tenants_topics_by_name_never_by_pattern(
        kafka_api: tuple[httpx.AsyncClient, SubmitIngest], topic_prefix: str) -> None:
    """A topic that looks like a submit topic but is no tenant's is not read: the consumer asks
    the broker about the topics it names, so its cost does not grow with the broker's topics."""
    client, ingest = kafka_api
    stray = Topics(prefix=topic_prefix).submit(uuid.uuid4())
    await ensure_topics(KAFKA_BOOTSTRAP, [stray], 1)
    tenant = await new_tenant(client, "kafka-named")
    await produce(tenant["kafka"], job("named"))
    await until_job(client, tenant["api_key"], "named")
    assert tenant["kafka"]["topic"] in ingest.consumer.subscription()
    assert stray not in ingest.consumer.subscription()


async def test_a_tenants_topic_made_after_the_tenant_is_read_once_it_exists(
        pool: asyncpg.Pool, topic_prefix: str) -> None:
    """Kafka access may be granted after the tenant was created (the broker was away): its
    topic is asked about by name until it exists, then read; a tenant committed with an earlier
    creation time than one already seen is found too."""
    topics = Topics(prefix=topic_prefix)
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        follower = SubmitTopics(topics, admin)
        tenant_id, _ = await new_tenant_row(pool)
        async with pool.acquire() as conn:
            assert not await follower.follow(conn)  # no topic yet
            assert topics.submit(tenant_id) not in follower.reading
            await ensure_topics(KAFKA_BOOTSTRAP, [topics.submit(tenant_id)], 1)
            assert await follower.follow(conn)
            assert topics.submit(tenant_id) in follower.reading
            late_id, _ = await new_tenant_row(pool)
            await conn.execute("UPDATE tenants SET created_at = created_at - interval '30 s' "
                               "WHERE id = $1", late_id)
            await ensure_topics(KAFKA_BOOTSTRAP, [topics.submit(late_id)], 1)
            assert await follower.follow(conn)
            assert topics.submit(late_id) in follower.reading
            assert not await follower.follow(conn)  # nothing new
    finally:
        await admin.close()


# -- nothing a tenant produces stalls the ingest ---------------------------------------------

NUL_MESSAGE = b'{"name":"kafka-nul","task":"t3.ok","idempotency_key":"a\\u0000b"}'  # issue 42


async def offsets(group: str, *topics: str) -> dict[str, tuple[int, int]]:
    """Per topic (one partition): the group's committed offset as the broker has it (-1: none)
    and the log end."""
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    consumer = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP, group_id=None)
    await admin.start()
    await consumer.start()
    try:
        committed = await admin.list_consumer_group_offsets(group)
        ends = await consumer.end_offsets([TopicPartition(t, 0) for t in topics])
    finally:
        await consumer.stop()
        await admin.close()
    return {t: (committed[tp].offset if tp in committed else -1, ends[tp])
            for t in topics for tp in [TopicPartition(t, 0)]}


async def until_offsets(group: str, want: dict[str, tuple[int, int]]) -> None:
    async def reached() -> bool:
        return await offsets(group, *want) == want
    await until(reached, ENOUGH, f"committed offsets {want}")


async def until_settled(group: str, *topics: str) -> None:
    """Until the group has committed every topic to its log end."""
    async def settled() -> bool:
        return all(c == end for c, end in (await offsets(group, *topics)).values())
    await until(settled, ENOUGH, "every message settled and committed")


async def all_rejects(access: dict[str, Any]) -> list[dict[str, Any]]:
    """Everything the tenant's rejects topic holds, read to its end."""
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        [described] = await admin.describe_topics([access["rejects_topic"]])
    finally:
        await admin.close()
    parts = [TopicPartition(access["rejects_topic"], p["partition"])
             for p in described["partitions"]]
    consumer = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP, group_id=None,
                                auto_offset_reset="earliest")
    await consumer.start()
    got: list[dict[str, Any]] = []
    try:
        consumer.assign(parts)
        ends = await consumer.end_offsets(parts)
        async with asyncio.timeout(ENOUGH):
            while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(msgspec.json.decode(r.value) for r in records)
    finally:
        await consumer.stop()
    return got


async def test_the_issues_nul_message_is_one_rejection_and_stalls_nothing(
        kafka_api: tuple[httpx.AsyncClient, SubmitIngest]) -> None:
    """Issue 42: a NUL in an idempotency key was retried every second for as long as it was
    watched, held every tenant's offsets and re-published the rejections before it."""
    client, ingest = kafka_api
    a = await new_tenant(client, "kafka-nul-a")
    b = await new_tenant(client, "kafka-nul-b")
    await produce(a["kafka"], NUL_MESSAGE, job("after-nul"))
    await produce(b["kafka"], job("other-tenant"))  # produced after the bad one
    await until_job(client, a["api_key"], "after-nul")
    await until_job(client, b["api_key"], "other-tenant")
    await until_offsets(ingest.group, {a["kafka"]["topic"]: (2, 2), b["kafka"]["topic"]: (1, 1)})

    [rejected] = await all_rejects(a["kafka"])
    assert rejected["offset"] == 0 and rejected["message"] == NUL_MESSAGE.decode()
    problem = rejected["problem"]
    assert problem["status"] == 400 and problem["type"].endswith("/bad-request")
    assert problem["errors"] == [{"field": "idempotency_key",
                                  "message": "holds U+0000 (NUL), which cannot be stored"}]
    assert await jobs_named(client, a["api_key"], "kafka-nul") == []
    assert await all_rejects(b["kafka"]) == []

    # The same body over HTTP: the same problem.
    r = await client.post("/v1/jobs", content=NUL_MESSAGE, headers={
        **auth(a["api_key"]), "Content-Type": "application/json"})
    answer = assert_problem(r, 400, "idempotency_key")
    assert {k: answer[k] for k in ("type", "status", "errors")} == {
        k: problem[k] for k in ("type", "status", "errors")}


async def test_a_payload_holding_nul_is_kept_as_sent_on_both_paths(
        kafka_api: tuple[httpx.AsyncClient, SubmitIngest]) -> None:
    """A payload is JSON kept as bytes, not PostgreSQL text: NUL in its strings and keys is
    accepted over HTTP and Kafka alike and comes back as sent."""
    client, _ = kafka_api
    tenant = await new_tenant(client, "kafka-nul-payload")
    key = tenant["api_key"]
    payload = {"text": "a\x00b", "k\x00": ["\x00"]}
    r = await client.post("/v1/jobs", json={"name": "over-http", "task": "hello",
                                            "payload": payload}, headers=auth(key))
    assert r.status_code == 201, r.text
    await produce(tenant["kafka"], job("over-kafka", payload=payload))
    kafka_job = await until_job(client, key, "over-kafka")
    for job_id in (r.json()["id"], kafka_job["id"]):
        shown = await client.get(f"/v1/jobs/{job_id}", headers=auth(key))
        assert shown.status_code == 200 and shown.json()["payload"] == payload, shown.text
    assert await all_rejects(tenant["kafka"]) == []


async def test_an_outage_retries_only_its_partition_and_no_rejection_twice(
        pool: asyncpg.Pool, db_url: str, topic_prefix: str) -> None:
    """The database refusing one tenant's write for a while (its insert waits on a key another
    transaction holds, past the ingest's statement timeout: SQLSTATE 57014, an outage as far as
    the ingest can tell) retries that message alone: the rejection settled before it is not
    published again, another tenant's message produced meanwhile is ingested and committed,
    and once the database lets go the message becomes its job."""
    ingest_pool = await create_pool(db_url, max_size=4, statement_timeout_ms=500)
    try:
        async with running_api(pool, db_url, topic_prefix, ingest_pool) as (client, ingest):
            a = await new_tenant(client, "kafka-outage-a")
            b = await new_tenant(client, "kafka-outage-b")
            submit_a, submit_b = a["kafka"]["topic"], b["kafka"]["topic"]
            async with pool.acquire() as holder:
                held = holder.transaction()
                await held.start()
                try:
                    await submit_job(holder, store(), SystemClock(), tenant_id=uuid.UUID(a["id"]),
                                     request=JobRequest(name="holder", idempotency_key="held"),
                                     pools=("default",), max_payload_bytes=1 << 20,
                                     actor="test")
                    await produce(a["kafka"], b"{not json", job("held", idempotency_key="held"),
                                  job("after-held"))
                    await until(tries_seen(pool, 2), ENOUGH, "two tries of the held message",
                                every=0.05)
                    await produce(b["kafka"], job("meanwhile"))
                    await until_job(client, b["api_key"], "meanwhile")
                    await until_offsets(ingest.group, {submit_a: (1, 3), submit_b: (1, 1)})
                    assert await jobs_named(client, a["api_key"], "after-held") == []
                finally:
                    await held.rollback()
            await until_job(client, a["api_key"], "after-held")
            [created] = await jobs_named(client, a["api_key"], "held")
            assert created["idempotency_key"] == "held"
            await until_offsets(ingest.group, {submit_a: (3, 3), submit_b: (1, 1)})
            assert [g["offset"] for g in await all_rejects(a["kafka"])] == [0]
    finally:
        await ingest_pool.close()


def tries_seen(pool: asyncpg.Pool, count: int) -> Any:
    """A probe: whether PostgreSQL has shown `count` statements (distinct starts) of this
    database waiting on a lock: the ingest's tries of a message whose key is held."""
    starts: set[Any] = set()

    async def probe() -> bool:
        starts.update(r["query_start"] for r in await pool.fetch(
            "SELECT query_start FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"))
        return len(starts) >= count
    return probe


async def test_a_message_too_long_to_repeat_is_rejected_with_its_digest(
        kafka_api: tuple[httpx.AsyncClient, SubmitIngest]) -> None:
    """A rejection repeats the message, unless that would make it too long: a 900 kB message
    with a bad field, whose rejection would be twice as long (each `\\"` escaped again) and
    refused by the broker (retried for ever, once), is rejected with its size and SHA-256."""
    client, ingest = kafka_api
    tenant = await new_tenant(client, "kafka-long")
    long = job("long", priority="nowhere", payload={"blob": '"' * 450_000})
    assert REJECTION_MAX_BYTES < len(long) < 1_000_000  # the broker takes it
    await produce(tenant["kafka"], long, job("after-long"))
    await until_job(client, tenant["api_key"], "after-long")
    [rejected] = await all_rejects(tenant["kafka"])
    assert rejected["problem"]["status"] == 422 and rejected["offset"] == 0
    assert rejected["message"] == {"omitted": "too long to repeat", "bytes": len(long),
                                   "sha256": hashlib.sha256(long).hexdigest()}
    await until_settled(ingest.group, tenant["kafka"]["topic"])


class Fuzzed:
    """Two tenants, the first fed generated messages, the second a good one after each."""

    def __init__(self, client: httpx.AsyncClient, ingest: SubmitIngest, pool: asyncpg.Pool,
                 a: dict[str, Any], b: dict[str, Any]) -> None:
        self.client, self.ingest, self.pool, self.a, self.b = client, ingest, pool, a, b
        self.cases = 0


@pytest.fixture
async def fuzzed(kafka_api: tuple[httpx.AsyncClient, SubmitIngest],
                 pool: asyncpg.Pool) -> Fuzzed:
    pytest.importorskip("schemathesis")  # the generator job_bodies draws from
    client, ingest = kafka_api
    return Fuzzed(client, ingest, pool, await new_tenant(client, "fuzzed"),
                  await new_tenant(client, "bystander"))


def unique_key(value: bytes, case: int) -> bytes:
    """A generated body with an idempotency key made the case's own (a key an earlier case used
    with the same body would be that case's job, not this one's outcome)."""
    try:
        body = json.loads(value)
    except ValueError:
        return value
    if isinstance(body, dict) and isinstance(body.get("idempotency_key"), str):
        body["idempotency_key"] = f"{case}.{body['idempotency_key']}"
        return json.dumps(body).encode()
    return value


@FUZZ
@given(data=st.data())
async def test_every_generated_message_is_one_job_or_one_rejection(
        fuzzed: Fuzzed, data: st.DataObject) -> None:
    """The bodies schemathesis fuzzes `POST /v1/jobs` with (valid and not), the same with NUL
    or lone surrogates in a string, and arbitrary bytes, produced by a tenant to its topic:
    each ends as exactly one job or exactly one rejection, the group's committed offset
    reaches the end (no redelivery loop), and another tenant's message produced after it is
    ingested too."""
    f = fuzzed
    f.cases += 1
    value = unique_key(data.draw(job_bodies.message_values()), f.cases)
    [offset] = await produce(f.a["kafka"], value)
    await produce(f.b["kafka"], job(f"bystander-{f.cases}"))
    await until_settled(f.ingest.group, f.a["kafka"]["topic"], f.b["kafka"]["topic"])

    created = await f.pool.fetchval(
        "SELECT count(*) FROM events WHERE tenant_id = $1 AND type = 'JobCreated' "
        "AND actor LIKE $2", uuid.UUID(f.a["id"]), f"kafka:%@0:{offset}")
    rejected = [g for g in await all_rejects(f.a["kafka"]) if g["offset"] == offset]
    assert created + len(rejected) == 1, (value[:300], created, rejected)
    for g in rejected:
        assert 400 <= g["problem"]["status"] < 500, g["problem"]
    assert await f.pool.fetchval(
        "SELECT count(*) FROM jobs WHERE tenant_id = $1 AND name = $2",
        uuid.UUID(f.b["id"]), f"bystander-{f.cases}") == 1
