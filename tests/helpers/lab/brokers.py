"""A three-node Kafka cluster of a test's or a benchmark's own (`infra/kafka/cluster.sh` on
ports and a data folder of its own, torn down after), and what a fault scenario asks of it:
which node leads a partition, which replicas are in sync, the busiest partition of a topic,
a node killed with -9 and started again."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError

from tests.helpers.lab.cluster import ROOT

__all__ = ["KafkaTrio", "low_free_ports"]

SCRIPT = ROOT / "infra" / "kafka" / "cluster.sh"


def low_free_ports(count: int, low: int = 20000, high: int = 32000) -> list[int]:
    """`count` distinct ports free now, below Linux's ephemeral range (32768-60999): a node
    killed and started again binds its port a second time, and an outgoing connection may
    hold an ephemeral one by then."""
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < count:
            port = random.randint(low, high)
            if port in ports:
                continue
            s = stack.enter_context(socket.socket())
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            ports.append(port)
        return ports


@dataclass
class KafkaTrio:
    """Three KRaft nodes (broker + controller each) in `state_dir`, on ports of their own."""

    state_dir: Path
    ports: list[int] = field(default_factory=lambda: low_free_ports(6))

    @property
    def client_ports(self) -> list[int]:
        return self.ports[0::2]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports)

    def env(self) -> dict[str, str]:
        return {**os.environ, "OSTINATO_KAFKA_HA_DIR": str(self.state_dir),
                "OSTINATO_KAFKA_HA_BOOTSTRAP": self.bootstrap,
                "OSTINATO_KAFKA_HA_CONTROLLER_PORTS": ",".join(map(str, self.ports[1::2]))}

    def _run(self, *args: str, timeout: float = 300) -> float:
        started = time.monotonic()
        done = subprocess.run([str(SCRIPT), *args], cwd=ROOT, env=self.env(),
                              capture_output=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"cluster.sh {' '.join(args)} failed ({done.returncode}): "
                               f"{done.stdout.decode(errors='replace')[-1500:]}"
                               f"{done.stderr.decode(errors='replace')[-1500:]}")
        return time.monotonic() - started

    def up(self) -> float:
        """Start the nodes not running and wait until all three answer; the seconds taken."""
        return self._run("up")

    def down(self, *, remove: bool = True) -> None:
        """Stop all three (and, with `remove`, delete their data)."""
        try:
            self._run("down", timeout=120)
        finally:
            if remove:  # the nodes' logs are kept beside it
                for out in self.state_dir.glob("*/server.out"):
                    shutil.copy(out, self.state_dir.parent / f"kafka-node{out.parent.name}.out")
                shutil.rmtree(self.state_dir, ignore_errors=True)

    def kill(self, node: int) -> None:
        """kill -9 node `node` (1..3)."""
        self._run("kill", str(node), timeout=60)

    def pid(self, node: int) -> int | None:
        """The node's process, if it is alive."""
        try:
            pid = int((self.state_dir / str(node) / "kafka.pid").read_text())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def _admin(self) -> AIOKafkaAdminClient:
        return AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="ostinato-lab",
                                   request_timeout_ms=5000)

    async def partitions(self, topic: str, tries: int = 20) -> dict[int, dict[str, Any]]:
        """Partition -> {"leader", "replicas", "isr"} as the cluster's metadata says now
        (leader -1 while it has none). Asked again while the node asked is the dead one."""
        for _ in range(tries - 1):
            try:
                return await self._partitions(topic)
            except KafkaError:
                await asyncio.sleep(0.5)
        return await self._partitions(topic)

    async def _partitions(self, topic: str) -> dict[int, dict[str, Any]]:
        admin = self._admin()
        await admin.start()
        try:
            (described,) = await admin.describe_topics([topic])
        finally:
            await admin.close()
        return {p["partition"]: {"leader": p["leader"], "replicas": list(p["replicas"]),
                                 "isr": list(p["isr"])} for p in described["partitions"]}

    async def topic_config(self, topic: str, name: str) -> str | None:
        admin = self._admin()
        await admin.start()
        try:
            (response,) = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic, {name: None})])
        finally:
            await admin.close()
        for resource in response.resources:
            for entry in resource[4]:
                if entry[0] == name:
                    return str(entry[1])
        return None

    async def end_offsets(self, topic: str, tries: int = 20) -> dict[int, int]:
        """Partition -> its end offset (messages written so far); asked again on an error."""
        for _ in range(tries - 1):
            try:
                return await self._end_offsets(topic)
            except KafkaError:
                await asyncio.sleep(0.5)
        return await self._end_offsets(topic)

    async def _end_offsets(self, topic: str) -> dict[int, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, request_timeout_ms=5000)
        await consumer.start()
        try:
            parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)
                     or await self._partition_ids(topic)]
            ends = await consumer.end_offsets(parts)
        finally:
            await consumer.stop()
        return {tp.partition: offset for tp, offset in ends.items()}

    async def _partition_ids(self, topic: str) -> list[int]:
        return sorted(await self.partitions(topic))

    async def busiest(self, topic: str) -> tuple[int, int]:
        """(partition, its end offset) of the partition with the most messages."""
        ends = await self.end_offsets(topic)
        partition = max(ends, key=lambda p: ends[p])
        return partition, ends[partition]
