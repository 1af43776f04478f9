"""aiokafka clients configured the one way Ostinato uses them, and topic creation."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.partitioner import murmur2

from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.bus")


class TenantPartitioner:
    """The Java client's partition for a key (murmur2, as aiokafka's default partitioner), kept
    per (key, partition count): keys are tenant ids, few and repeated on every message, and the
    pure-Python hash cost more than the rest of a send."""

    def __init__(self, max_keys: int = 100_000) -> None:
        self.max_keys = max_keys
        self._known: dict[tuple[bytes, int], int] = {}

    def __call__(self, key: bytes | None, all_partitions: list[int],
                 available: list[int]) -> int:
        if key is None:  # not Ostinato's messages (all keyed by tenant): as the default does
            return random.choice(available or all_partitions)
        count = len(all_partitions)
        index = self._known.get((key, count))
        if index is None:
            if len(self._known) >= self.max_keys:
                self._known.clear()
            index = self._known[(key, count)] = (murmur2(key) & 0x7FFFFFFF) % count
        return all_partitions[index]


@dataclass(frozen=True, slots=True)
class KafkaAuth:
    """How a client of ours authenticates: not at all (the broker's loopback PLAINTEXT listener,
    a super user), or as a SCRAM user (each service its own, docs/KAFKA.md)."""

    username: str = ""
    password: str = ""
    security_protocol: str = "SASL_PLAINTEXT"

    def options(self) -> dict[str, Any]:
        """aiokafka's keyword arguments for it (none for PLAINTEXT)."""
        if not self.username:
            return {}
        return {"security_protocol": self.security_protocol, "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_plain_username": self.username, "sasl_plain_password": self.password}

    def __repr__(self) -> str:
        return f"KafkaAuth(username={self.username!r})"  # never the password


NO_AUTH = KafkaAuth()


def make_producer(bootstrap: str, client_id: str,
                  auth: KafkaAuth = NO_AUTH) -> AIOKafkaProducer:
    # Idempotent producer: broker-side dedupe of retried sends. No linger: the relay hands a
    # whole batch to `send` before the sender task runs, so its messages leave together anyway,
    # and a linger only delayed every wake-up by its length (two hops a run).
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        **auth.options(),
        partitioner=TenantPartitioner(),
        enable_idempotence=True,
        acks="all",
        linger_ms=0,
        max_batch_size=256 * 1024,
        request_timeout_ms=15_000,
    )


def topic_configs(replication_factor: int) -> dict[str, str]:
    """A new topic's configuration for its replication factor: with three replicas or more, a
    write is acknowledged (our producers send acks=all) only once two replicas have it, so a
    broker that dies right after acknowledging loses nothing, and one broker may be down
    without stopping writes. Fewer replicas keep the broker's default (1)."""
    if replication_factor < 1:
        raise ValueError("the replication factor must be at least 1")
    return {"min.insync.replicas": "2"} if replication_factor >= 3 else {}


async def ensure_topics(bootstrap: str, names: Sequence[str], partitions: int,
                        auth: KafkaAuth = NO_AUTH, replication_factor: int = 1) -> list[str]:
    """Create missing topics (auto-creation is off on our brokers) with `replication_factor`
    replicas (`topic_configs`); return those created. Existing topics are left as they are."""
    configs = topic_configs(replication_factor)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="ostinato-admin",
                                **auth.options())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [n for n in names if n not in existing]
        if missing:
            try:
                await admin.create_topics(
                    [NewTopic(n, num_partitions=partitions,
                              replication_factor=replication_factor, topic_configs=configs)
                     for n in missing]
                )
            except TopicAlreadyExistsError:
                pass
            # Metadata propagates asynchronously; wait until every topic is listed.
            for _ in range(100):
                if set(missing) <= set(await admin.list_topics()):
                    break
                await asyncio.sleep(0.1)
            log.info("topics created", topics=missing, replication_factor=replication_factor)
        return missing
    finally:
        await admin.close()


async def delete_topics_with_prefixes(bootstrap: str, prefixes: Sequence[str],
                                     auth: KafkaAuth = NO_AUTH) -> list[str]:
    """Delete every topic whose name starts with one of `prefixes` (a test run's or a
    benchmark's own topics, so a broker shared by many runs does not pile them up); return
    their names."""
    if not prefixes:
        return []
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="ostinato-admin",
                                **auth.options())
    await admin.start()
    try:
        doomed = [t for t in await admin.list_topics() if t.startswith(tuple(prefixes))]
        for start in range(0, len(doomed), 500):
            await admin.delete_topics(doomed[start:start + 500])
        return doomed
    finally:
        await admin.close()


async def broker_reachable(bootstrap: str, auth: KafkaAuth = NO_AUTH) -> bool:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="ostinato-probe",
                                request_timeout_ms=2000, **auth.options())
    try:
        await asyncio.wait_for(admin.start(), 3)
        await asyncio.wait_for(admin.list_topics(), 3)
        return True
    except Exception:
        return False
    finally:
        await admin.close()
