"""The one Kafka consumer loop (`ostinato.bus.consumer`, issue 43) against the real broker, run in
the duty shape as the services run it: a settler meeting an outage on one partition has that
partition alone retried (the other goes on and is committed), nothing is committed past the
unsettled message, and once the outage is over the message and those after it are settled in
order. A message failing TRIES_BEFORE_GIVING_UP times is offered to the settler's `give_up`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition

from ostinato.bus import consumer as bus
from ostinato.bus.consumer import Batch, ConsumerLoop, Settler, Unsettled
from ostinato.bus.kafka import ensure_topics
from ostinato.runtime.duties import DutyRunner, kafka_consumer
from tests.helpers.env import KAFKA_BOOTSTRAP

pytestmark = pytest.mark.integration
ENOUGH = 60.0  # a give-up, never a bound on how fast anything is


class Flaky(Settler):
    """Settles every message by recording its value, except `failing` while `outage` is set."""

    def __init__(self, failing: bytes) -> None:
        self.failing, self.outage = failing, True
        self.settled: dict[int, list[bytes]] = {0: [], 1: []}
        self.tries = 0
        self.given_up: list[tuple[bytes, int]] = []

    async def settle(self, batch: Batch) -> Mapping[TopicPartition, Unsettled]:
        unsettled = {}
        for tp, records in batch.items():
            for record in records:
                if record.value == self.failing and self.outage:
                    self.tries += 1
                    unsettled[tp] = Unsettled(record, asyncpg.CannotConnectNowError("away"))
                    break
                self.settled[tp.partition].append(record.value)
        return unsettled

    async def give_up(self, record: ConsumerRecord, error: BaseException, tries: int) -> bool:
        self.given_up.append((record.value, tries))
        return True


async def until(probe: Any, what: str) -> None:
    deadline = time.monotonic() + ENOUGH
    while not probe():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def produce(topic: str, partition: int, *values: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=KAFKA_BOOTSTRAP)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value, partition=partition)
    finally:
        await producer.stop()


@pytest.fixture
async def topic(topic_prefix: str) -> str:
    name = f"{topic_prefix}ostinato.loop"
    await ensure_topics(KAFKA_BOOTSTRAP, [name], 2)
    return name


@asynccontextmanager
async def running(topic: str, group: str, settler: Settler,
                  ) -> AsyncIterator[tuple[ConsumerLoop, AIOKafkaConsumer]]:
    kafka = AIOKafkaConsumer(topic, bootstrap_servers=KAFKA_BOOTSTRAP, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    await kafka.start()
    loop = ConsumerLoop(kafka, settler, group=group)
    runner = DutyRunner(kafka_consumer("kafka_consumer", loop))
    task = asyncio.create_task(runner.run())
    try:
        yield loop, kafka
    finally:
        runner.stop()
        await task  # the duty's on_stop commits and leaves the group


async def committed(kafka: AIOKafkaConsumer, topic: str, partition: int) -> int | None:
    return await kafka.committed(TopicPartition(topic, partition))


async def test_an_outage_retries_only_its_partition_and_commits_nothing_past_it(
        topic: str, topic_prefix: str) -> None:
    flaky = Flaky(failing=b"a1")
    await produce(topic, 0, b"a0", b"a1", b"a2")
    await produce(topic, 1, b"b0", b"b1")
    async with running(topic, f"{topic_prefix}loop", flaky) as (_loop, kafka):
        await until(lambda: flaky.tries >= 2 and flaky.settled[1] == [b"b0", b"b1"],
                    "a1 tried twice, partition 1 settled")
        await produce(topic, 1, b"b2")  # produced while partition 0 waits out its outage
        await until(lambda: flaky.settled[1] == [b"b0", b"b1", b"b2"], "b2 settled meanwhile")
        assert flaky.settled[0] == [b"a0"]  # nothing after the unsettled message
        assert await committed(kafka, topic, 0) == 1  # up to a1, not past it
        assert await committed(kafka, topic, 1) == 3

        flaky.outage = False
        await until(lambda: flaky.settled[0] == [b"a0", b"a1", b"a2"], "partition 0 resumed")
        deadline = time.monotonic() + ENOUGH
        while await committed(kafka, topic, 0) != 3:
            assert time.monotonic() < deadline, "partition 0 committed"
            await asyncio.sleep(0.05)
    assert flaky.given_up == []


async def test_a_message_failing_the_ceiling_of_tries_is_offered_to_give_up(
        topic: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bus, "RETRY_FIRST_SECONDS", 0.01)  # the same policy, shorter waits
    monkeypatch.setattr(bus, "RETRY_MOST_SECONDS", 0.02)
    flaky = Flaky(failing=b"a1")  # never recovers
    await produce(topic, 0, b"a0", b"a1", b"a2")
    async with running(topic, f"{topic_prefix}loop", flaky) as (_loop, kafka):
        await until(lambda: flaky.settled[0] == [b"a0", b"a2"], "a1 given up, a2 settled")
        assert flaky.given_up == [(b"a1", bus.TRIES_BEFORE_GIVING_UP)]
        assert flaky.tries == bus.TRIES_BEFORE_GIVING_UP
        deadline = time.monotonic() + ENOUGH
        while await committed(kafka, topic, 0) != 3:
            assert time.monotonic() < deadline, "partition 0 committed past a1"
            await asyncio.sleep(0.05)
