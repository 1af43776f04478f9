"""The api process runs its background loops as duties (issue 43): its own outbox relay and,
with Kafka submission on, the `kafka_ingest` consumer, both named on /readyz. The relay is
outbox-based, so an api killed (-9) while the broker was away lost nothing: the next api
process, alone (no other service runs), publishes the run its predecessor appended."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaConsumer

from ostinato.bus.codec import decode
from ostinato.bus.topics import Topics
from ostinato.domain import events as ev
from tests.helpers.env import KAFKA_BOOTSTRAP, TENANT_BOOTSTRAP, url_for
from tests.helpers.lab.cluster import Cluster, free_port

pytestmark = pytest.mark.integration
ENOUGH = 60.0  # a give-up, never a bound on how fast anything is


async def until(probe: Any, what: str) -> None:
    deadline = time.monotonic() + ENOUGH
    while not await probe():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.2)


async def test_the_api_relays_its_own_outbox_after_a_crash_and_names_its_duties_on_readyz(
        db_url: str, topic_prefix: str, tmp_path: Path) -> None:
    name = db_url.rsplit("/", 1)[1]
    topics = Topics(prefix=topic_prefix, partitions=3)
    away = Cluster(database_url=url_for(name), kafka_bootstrap=f"127.0.0.1:{free_port()}",
                   topic_prefix=topic_prefix, log_dir=tmp_path / "away",
                   extra_env={"OSTINATO_KAFKA_TENANT_BOOTSTRAP": ""})
    conn = await asyncpg.connect(db_url)
    try:
        # 1. An api whose broker is away: ready (degraded), its relay waiting, not failing.
        await asyncio.to_thread(away.start, ("api",))
        async with httpx.AsyncClient(base_url=away.api_url, timeout=10) as api:
            r = await api.post("/v1/tenants", json={"name": "relayed"},
                               headers={"Authorization": f"Bearer {away.admin_key}"})
            assert r.status_code == 201, r.text
            h = {"Authorization": f"Bearer {r.json()['api_key']}"}
            r = await api.post("/v1/jobs", headers=h, json={
                "name": "relayed", "task": "t",
                "schedule": {"cron": "0 0 1 1 *", "timezone": "UTC"}})
            assert r.status_code == 201, r.text
            r = await api.post(f"/v1/jobs/{r.json()['id']}/trigger", headers=h)
            assert r.status_code == 201, r.text
            run_id = uuid.UUID(r.json()["run_id"])
            ready = (await api.get("/readyz")).json()
        assert ready["checks"]["duty:outbox_relay"] is True, ready
        assert "duty:kafka_ingest" not in ready["checks"]  # Kafka submission is off there
        assert topics.due in await conn.fetchval("SELECT array_agg(t) FROM outbox, "
                                                 "unnest(topics) t")
        away.kill("api")  # kill -9: the row is in the outbox, nothing was published

        # 2. A new api process, alone, with the broker: it publishes what the first appended.
        back = Cluster(database_url=url_for(name), kafka_bootstrap=KAFKA_BOOTSTRAP,
                       topic_prefix=topic_prefix, log_dir=tmp_path / "back",
                       admin_key=away.admin_key,
                       extra_env={"OSTINATO_KAFKA_TENANT_BOOTSTRAP": TENANT_BOOTSTRAP})
        try:
            await asyncio.to_thread(back.start, ("api",))
            async with httpx.AsyncClient(base_url=back.api_url, timeout=10) as api:
                checks = (await api.get("/readyz")).json()["checks"]
            assert checks["duty:outbox_relay"] is True, checks
            assert checks["duty:kafka_ingest"] is True, checks

            async def published() -> bool:
                return await conn.fetchval("SELECT count(*) FROM outbox") == 0
            await until(published, "the api's relay emptied the outbox")
            consumer = AIOKafkaConsumer(topics.due, bootstrap_servers=KAFKA_BOOTSTRAP,
                                        auto_offset_reset="earliest", group_id=None)
            await consumer.start()
            try:
                got: list[Any] = []

                async def arrived() -> bool:
                    for records in (await consumer.getmany(timeout_ms=200)).values():
                        got.extend(decode(r.value) for r in records)
                    return bool(got)
                await until(arrived, "the run's wake-up on runs.due")
            finally:
                await consumer.stop()
            assert [(type(e.event), e.stream_id) for e in got] == [(ev.RunScheduled, run_id)]
        finally:
            await asyncio.to_thread(back.stop)
    finally:
        await asyncio.to_thread(away.stop)
        await conn.close()
