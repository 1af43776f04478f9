"""Tenant-scoped Kafka producers against the real broker's SASL/SCRAM listener and ACLs
(docs/KAFKA.md): a new tenant gets a SCRAM user that may write its own submit topic and nothing
else; a wrong password is refused; the api's ingest turns each accepted message into exactly one
job (also when produced twice, or redelivered), and a message it cannot accept lands in the
tenant's rejects topic with the problem the HTTP API would give."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    TopicAuthorizationFailedError,
)

from ostinato.bus.kafka import ensure_topics
from ostinato.bus.topics import Topics
from ostinato.clock import SystemClock
from ostinato.eventlog.store import read_stream
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from services.api.app import create_app
from services.api.ingest import SubmitIngest, SubmitTopics
from tests.conftest import KAFKA_BOOTSTRAP, TENANT_BOOTSTRAP

from .conftest import ADMIN, assert_problem, auth
from .helpers import new_tenant as new_tenant_row
from .helpers import store

pytestmark = pytest.mark.integration
ENOUGH = 60.0  # a safety net for a broken ingest, never a bound on how fast it is


def settings(db_url: str, prefix: str) -> Settings:
    return Settings(database_url=db_url, admin_key=ADMIN, kafka_bootstrap=KAFKA_BOOTSTRAP,
                    kafka_tenant_bootstrap=TENANT_BOOTSTRAP, topic_prefix=prefix,
                    kafka_submit_partitions=1)


@pytest.fixture
async def kafka_api(pool: asyncpg.Pool, db_url: str,
                    topic_prefix: str) -> AsyncIterator[tuple[httpx.AsyncClient, SubmitIngest]]:
    """The api in-process with Kafka submission on, and its ingest consumer running."""
    s = settings(db_url, topic_prefix)
    service = Service("api", s)
    service.pool = pool
    ingest = SubmitIngest(pool, store(), SystemClock(), s)
    running = asyncio.create_task(ingest.run())
    transport = httpx.ASGITransport(app=create_app(service, store()))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as c:
            yield c, ingest
    finally:
        ingest.stop()
        await running
        await ingest.close()


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


async def produce(access: dict[str, Any], *values: bytes, topic: str | None = None) -> None:
    producer = AIOKafkaProducer(**sasl(access), enable_idempotence=True, acks="all")
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic or access["topic"], value)
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
