"""Kafka with three brokers (issue 39): the leader of the busiest partition of the runs topic
killed with -9 under load. The test starts its own three-node KRaft cluster
(infra/kafka/cluster.sh, own ports and data folder, removed after), the five services on it with
replication factor 3 (min.insync.replicas 2) and two workers, and submits jobs through the API
all along. While the dead broker stays down, its partition gets a new leader from the in-sync
replicas, messages keep being written to it (acks=all by the two left) and jobs accepted after
the kill run; with one replica (the factor before issue 39) the partition would have no leader
until the broker came back. Then the broker is started again and rejoins the partition's
in-sync replicas, and the fault suite's end check holds: every accepted job ran exactly once
(one run, one effect), every run is final and its story consistent."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.helpers.env import app_url_for, drop_database, fresh_database, owner_url_for, url_for
from tests.helpers.lab.brokers import KafkaTrio
from tests.helpers.lab.cluster import Cluster
from tests.helpers.lab.database import Db
from tests.helpers.lab.invariants import verify, wait_settled
from tests.helpers.lab.lab import FAULT_ENV, Lab
from tests.helpers.lab.load import Load
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
async def trio(tmp_path: Path) -> AsyncIterator[KafkaTrio]:
    brokers = KafkaTrio(tmp_path / "kafka-ha")
    try:
        await asyncio.to_thread(brokers.up)
        yield brokers
    finally:
        await asyncio.to_thread(brokers.down)


@pytest.fixture
async def ha_lab(template_db: str, topic_prefix: str, tmp_path: Path,
                 trio: KafkaTrio) -> AsyncIterator[Lab]:
    name = await fresh_database(template_db)
    env = {**FAULT_ENV, "OSTINATO_KAFKA_REPLICATION_FACTOR": "3",
           "OSTINATO_KAFKA_TENANT_BOOTSTRAP": ""}  # the trio has no SASL listener
    cluster = Cluster(database_url=app_url_for(name), kafka_bootstrap=trio.bootstrap,
                      topic_prefix=topic_prefix, log_dir=tmp_path / "logs", extra_env=env)
    lab = Lab(cluster=cluster, db=Db(url_for(name)), effects_url=owner_url_for(name))
    try:
        yield lab
    finally:
        try:
            await lab.close()
        finally:
            await drop_database(name)


async def succeeded(lab: Lab, job_ids: list[str]) -> int:
    return int(await lab.db.fetchval(
        "SELECT count(*) FROM runs WHERE state = 'succeeded' AND job_id = ANY($1::uuid[])",
        [uuid.UUID(j) for j in job_ids]))


async def test_killing_the_leader_of_the_busiest_runs_partition_loses_and_repeats_nothing(
        ha_lab: Lab, trio: KafkaTrio, topic_prefix: str) -> None:
    lab = ha_lab
    await lab.start()
    due = f"{topic_prefix}ostinato.runs.due"
    before = await trio.partitions(due)
    assert all(len(p["replicas"]) == 3 for p in before.values()), before
    assert await trio.topic_config(due, "min.insync.replicas") == "2"
    for name in ("w1", "w2"):
        await lab.worker(name, concurrency=32)

    load = Load(lab.cluster.api_url, lab.api_key, rate=60, batch=10).start()
    try:
        await until(lambda: _at_least(lab, load, 50), 60, "50 runs before the fault",
                    every=0.5)
        partition, offset_at_kill = await trio.busiest(due)
        victim = before[partition]["leader"]
        accepted_at_kill = len(load.accepted)
        await asyncio.to_thread(trio.kill, victim)

        async def new_leader() -> int:
            leader = (await trio.partitions(due))[partition]["leader"]
            return leader if leader not in (victim, -1) else 0

        leader = await until(new_leader, 60, f"a new leader of {due}[{partition}]", every=0.5)
        # Jobs accepted after the kill run, through the partition's new leader, while the
        # victim is still down.
        await until(lambda: _accepted_after(load, accepted_at_kill, 50), 60,
                    "50 jobs accepted after the kill")
        after_kill = list(load.accepted.values())[accepted_at_kill:accepted_at_kill + 50]
        await until(lambda: _all(lab, after_kill), 60,
                    "the jobs accepted after the kill to succeed", every=0.5)
        # The runs ran from PostgreSQL (messages only wake the dispatcher early), so the relay's
        # wake-ups may still be in a producer's retry when they have: wait for them, not a time.
        async def written_since_kill() -> bool:
            return (await trio.end_offsets(due))[partition] > offset_at_kill

        await until(written_since_kill, 90,
                    f"a message written to {due}[{partition}] while its old leader is dead",
                    every=0.5)
        assert trio.pid(victim) is None, "the killed broker came back before the checks"
        assert leader in before[partition]["isr"]

        await asyncio.to_thread(trio.up)  # the victim restarts and catches up

        async def back_in_sync() -> bool:
            return victim in (await trio.partitions(due))[partition]["isr"]

        await until(back_in_sync, 90, f"broker {victim} back in the in-sync replicas",
                    every=0.5)
    finally:
        await load.stop()

    assert load.abandoned == [], f"{len(load.abandoned)} jobs were never accepted"
    missing, open_runs = await wait_settled(lab.db, load.job_ids, 90)
    verdict = await verify(lab.db, load.job_ids)
    assert (missing, open_runs) == (0, 0), verdict.problems()
    assert verdict.problems() == []
    # 0 lost, 0 duplicated: one run and one effect for every accepted job
    assert verdict.succeeded == verdict.runs == len(load.job_ids) == verdict.effects


async def _at_least(lab: Lab, load: Load, count: int) -> bool:
    return await succeeded(lab, load.job_ids) >= count


async def _accepted_after(load: Load, at: int, count: int) -> bool:
    return len(load.accepted) >= at + count


async def _all(lab: Lab, job_ids: list[str]) -> bool:
    return await succeeded(lab, job_ids) == len(job_ids)
