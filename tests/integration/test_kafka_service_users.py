"""Each service as its own Kafka SCRAM user on the broker's SERVICES listener, with only the
ACLs `ostinato.bus.access.service_acls` gives it (docs/KAFKA.md): what each may do works, and
what it may not is refused by the broker."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    TopicAuthorizationFailedError,
)

from ostinato.bus import access
from ostinato.bus.kafka import KafkaAuth, ensure_topics
from ostinato.bus.topics import Topics
from tests.helpers.env import KAFKA_BOOTSTRAP, SERVICE_BOOTSTRAP

pytestmark = pytest.mark.integration
ENOUGH = 60.0  # a safety net, never a bound on how fast the broker answers


@pytest.fixture
async def users(topic_prefix: str) -> tuple[Topics, dict[str, KafkaAuth]]:
    """Every service's user for this test's topic prefix, granted as `ostinato kafka-users`
    grants them, and the run topics created."""
    topics = Topics(prefix=topic_prefix, partitions=1)
    await ensure_topics(KAFKA_BOOTSTRAP, topics.all(), 1)
    made: dict[str, KafkaAuth] = {}
    for service in access.SERVICES:
        auth = KafkaAuth(access.service_user(topics, service), access.new_password())
        await access.grant(KAFKA_BOOTSTRAP, user=auth.username, password=auth.password,
                           acls=access.service_acls(topics, service))
        made[service] = auth
    return topics, made


async def produce(auth: KafkaAuth, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=SERVICE_BOOTSTRAP, enable_idempotence=True,
                                acks="all", **auth.options())
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"wake", key=b"tenant")
    finally:
        await producer.stop()


async def read_one(auth: KafkaAuth, topic: str, group: str | None) -> Any:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=SERVICE_BOOTSTRAP, group_id=group,
                                auto_offset_reset="earliest", **auth.options())
    try:
        await consumer.start()
        async with asyncio.timeout(ENOUGH):
            while True:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    if records:
                        return records[0].value
    finally:
        await consumer.stop()


async def test_each_service_writes_the_run_topics_and_reads_only_its_own(
        users: tuple[Topics, dict[str, KafkaAuth]]) -> None:
    topics, auth = users
    for service in access.SERVICES:  # every outbox relay may publish any run topic
        await produce(auth[service], topics.due)
    dispatcher_group = f"{topics.prefix}ostinato-dispatcher"
    assert await read_one(auth["dispatcher"], topics.due, dispatcher_group) == b"wake"
    await produce(auth["scheduler"], topics.ready("default"))
    assert await read_one(auth["worker_gateway"], topics.ready("default"), None) == b"wake"

    refusals = [("scheduler", topics.due, None), ("reconciler", topics.finished, None),
                ("worker_gateway", topics.due, None), ("api", topics.due, None),
                ("dispatcher", topics.ready("default"), None),
                ("dispatcher", topics.due, f"{topics.prefix}someone-else"),
                ("scheduler", topics.due, dispatcher_group)]
    for service, topic, group in refusals:
        with pytest.raises((TopicAuthorizationFailedError, GroupAuthorizationFailedError)):
            await read_one(auth[service], topic, group)


async def test_only_the_api_manages_tenants_users_and_topics(
        users: tuple[Topics, dict[str, KafkaAuth]]) -> None:
    topics, auth = users
    tenant = "01234567-89ab-cdef-0123-456789abcdef"
    submit = topics.submit(tenant)
    for service in ("scheduler", "dispatcher", "worker_gateway", "reconciler"):
        with pytest.raises(access.KafkaAccessError):
            await access.grant_tenant(SERVICE_BOOTSTRAP, tenant_id=tenant, topic=submit,
                                      password="x" * 20, auth=auth[service])
        with pytest.raises(TopicAuthorizationFailedError):
            await produce(auth[service], submit)  # nor may they write a tenant's topic
    await ensure_topics(SERVICE_BOOTSTRAP, [submit, topics.rejects(tenant)], 1, auth["api"])
    await access.grant_tenant(SERVICE_BOOTSTRAP, tenant_id=tenant, topic=submit,
                              password="y" * 20, auth=auth["api"])
    await produce(auth["api"], topics.rejects(tenant))


async def test_a_service_with_a_wrong_password_is_refused(
        users: tuple[Topics, dict[str, KafkaAuth]]) -> None:
    _, auth = users
    wrong = KafkaAuth(auth["scheduler"].username, "not-its-password")
    producer = AIOKafkaProducer(bootstrap_servers=SERVICE_BOOTSTRAP, **wrong.options())
    with pytest.raises(KafkaConnectionError):
        try:
            await producer.start()
        finally:
            await producer.stop()


def test_the_kafka_users_command_writes_the_passwords_once_and_reuses_them(
        topic_prefix: str, tmp_path: Path) -> None:
    file = tmp_path / "kafka-users.json"
    env = {**os.environ, "OSTINATO_TOPIC_PREFIX": topic_prefix,
           "OSTINATO_KAFKA_BOOTSTRAP": KAFKA_BOOTSTRAP}
    command = [sys.executable, "-m", "ostinato", "kafka-users", "--file", str(file)]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    users = json.loads(file.read_text())
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert sorted(users) == sorted(access.SERVICES)
    assert users["api"]["username"] == f"{topic_prefix}ostinato-api"
    assert all(u["password"] not in first.stdout for u in users.values())
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert json.loads(file.read_text()) == users  # the same passwords, granted again
