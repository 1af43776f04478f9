"""Never let the disk decide (issue 38 item 9; docs/RETENTION.md "The disk"), against the real
PostgreSQL, the api and the worker gateway over real HTTP, and a real SDK worker. No disk is
filled: the storage is driven by the capacity setting (`OSTINATO_DB_CAPACITY_BYTES`), set from
the database's real size so that its use lands where each test needs it; the volume measure is
checked against the real filesystem of a temporary folder.

- the reconciler's storage duty exports the database's size, the storage's total and free
  bytes and the used ratio, and records the level the api reads;
- at the alert watermark (80 %) OstinatoDatabaseFilling fires for each tenant, is delivered to
  its default sink, and resolves when the use falls back;
- over the refuse watermark (95 %) POST /v1/jobs (single and batch), a trigger and a workflow
  start answer 503 storage-full with Retry-After and write nothing (no job, event, run or audit
  row), /readyz says degraded and why, a run in flight still completes through the gateway,
  reads and cancels answer; once the use falls back, POST /v1/jobs is accepted again;
- a Kafka submission met while full waits on its topic (neither a job nor a rejection) and
  becomes its job once the use falls back."""

from __future__ import annotations

import asyncio
import math
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from prometheus_client import REGISTRY

from ostinato.clock import SystemClock
from ostinato.policy.storage import Level, Watermarks, reusable_bytes
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.sdk import Worker, task
from ostinato.stores import storage as storage_store
from services.api.app import create_app
from services.api.ingest import SubmitIngest
from services.reconciler.checks.alerts import deliver_alerts, evaluate_alerts
from services.reconciler.checks.storage import StorageConfig, check_storage
from services.scheduler.tick import fire_due
from services.worker_gateway.app import create_app as create_gateway_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.wakeups import ReadySignals
from tests.helpers.alerts import put_sink
from tests.helpers.api import ADMIN, assert_problem, auth, tenant
from tests.helpers.env import KAFKA_BOOTSTRAP
from tests.helpers.integration import Receiver, dispatch, kafka_settings, new_job, store
from tests.helpers.waiting import until

pytestmark = pytest.mark.integration
GIVE_UP = 60.0  # a hang guard only: the api reads the level at most every 2 s


def gauge(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def in_use(pool: asyncpg.Pool) -> int:
    """What the storage duty counts as used: the database's size less the room reusable inside
    its files (read as the duty reads them)."""
    async with pool.acquire() as conn:
        size = await storage_store.database_size(conn)
        rooms = await storage_store.relations(conn)
    return size - reusable_bytes(r.space() for r in rooms)


async def used(pool: asyncpg.Pool, ratio: float) -> StorageConfig:
    """One pass of the reconciler's storage duty with a capacity that puts the database's
    storage at about `ratio` (a little over: the database only grows meanwhile)."""
    config = StorageConfig(capacity_bytes=math.ceil(await in_use(pool) / ratio))
    await check_storage(pool, config)
    return config


async def written(pool: asyncpg.Pool) -> tuple[int, ...]:
    return tuple(await pool.fetchrow(
        "SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM events), "
        "(SELECT count(*) FROM runs), (SELECT count(*) FROM audit), "
        "(SELECT count(*) FROM outbox)"))


async def readyz(api: httpx.AsyncClient) -> dict[str, Any]:
    r = await api.get("/readyz")
    assert r.status_code == 200, r.text  # refusing new work, the pod still serves reads
    return r.json()


@pytest.fixture
async def api(api_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api_url, timeout=30) as c:
        yield c


async def test_the_storage_duty_exports_size_total_free_and_used_and_records_the_level(
        pool: asyncpg.Pool, tmp_path: Path) -> None:
    config = await used(pool, 0.5)
    async with pool.acquire() as conn:
        row = await storage_store.read(conn)
        after = await storage_store.database_size(conn)
    assert row is not None and row.level == Level.OK and row.source == "capacity"
    assert 0 < row.database_bytes <= after
    assert gauge("ostinato_database_bytes") == row.database_bytes
    assert gauge("ostinato_database_volume_bytes", kind="total") == config.capacity_bytes
    room = gauge("ostinato_database_reusable_bytes")
    assert room is not None and 0 <= room < row.database_bytes
    assert gauge("ostinato_database_volume_bytes", kind="free") == (
        config.capacity_bytes - row.database_bytes + room) == row.free_bytes
    assert gauge("ostinato_database_volume_used_ratio") == pytest.approx(
        (row.database_bytes - room) / config.capacity_bytes)
    assert row.used_ratio == pytest.approx(0.5, abs=0.01)
    assert (row.alert_ratio, row.refuse_ratio) == (0.8, 0.95)
    assert gauge("ostinato_storage_refusing") == 0

    # The volume measure: statvfs of a path, counted as df counts (shutil.disk_usage reads the
    # same statvfs independently: used = blocks - free, free = available).
    await check_storage(pool, StorageConfig(volume_path=str(tmp_path)))
    disk = shutil.disk_usage(tmp_path)
    async with pool.acquire() as conn:
        row = await storage_store.read(conn)
    assert row is not None and row.source == "volume"
    assert row.total_bytes == pytest.approx(disk.used + disk.free, rel=1e-3)
    assert row.free_bytes == pytest.approx(disk.free, rel=1e-2)
    assert row.used_ratio == pytest.approx(disk.used / (disk.used + disk.free), abs=1e-3)
    assert gauge("ostinato_database_volume_used_ratio") == row.used_ratio

    # Nothing configured: the size still, the level unmeasured (nothing refused).
    await check_storage(pool, StorageConfig())
    async with pool.acquire() as conn:
        row = await storage_store.read(conn)
    assert row is not None and row.level == Level.UNMEASURED and row.used_ratio is None


async def test_the_filling_alert_fires_at_the_watermark_and_resolves_when_use_falls(
        pool: asyncpg.Pool, api: httpx.AsyncClient, receiver: Receiver) -> None:
    clock = SystemClock()
    key = await tenant(api, "acme")
    await put_sink(api, key, "ops", url=receiver.url, default=True)

    await used(pool, 0.5)
    assert await evaluate_alerts(pool, clock) == 0  # under 80 %: nothing

    await used(pool, 0.85)
    assert await evaluate_alerts(pool, clock) == 1  # OstinatoDatabaseFilling, this tenant
    assert await evaluate_alerts(pool, clock) == 0  # firing already: not again
    alerts = (await api.get("/v1/alerts", headers=auth(key))).json()["items"]
    assert [(a["rule"], a["status"]) for a in alerts] == [("OstinatoDatabaseFilling", "firing")]
    async with httpx.AsyncClient(timeout=5) as http:
        assert await deliver_alerts(pool, clock, http) == 1
    [body] = receiver.bodies
    [alert] = body["alerts"]
    assert alert["status"] == "firing" and alert["labels"]["alertname"] == "OstinatoDatabaseFilling"
    assert alert["labels"]["severity"] == "warning" and alert["labels"]["tenant"] == "acme"
    assert alert["annotations"]["alert_at"] == "80.0 %"
    assert float(alert["annotations"]["used"].removesuffix(" %")) >= 80

    await used(pool, 0.97)  # over 95 %: new work refused, a critical alert besides
    assert await evaluate_alerts(pool, clock) == 1
    firing = {a["rule"] for a in (await api.get("/v1/alerts", headers=auth(key))).json()["items"]
              if a["status"] == "firing"}
    assert firing == {"OstinatoDatabaseFilling", "OstinatoNewWorkRefused"}

    await used(pool, 0.5)  # retention made room: both resolve, the resolutions delivered
    assert await evaluate_alerts(pool, clock) == 2
    assert {a["status"] for a in
            (await api.get("/v1/alerts", headers=auth(key))).json()["items"]} == {"resolved"}
    async with httpx.AsyncClient(timeout=5) as http:
        assert await deliver_alerts(pool, clock, http) == 3
    resolved = [a for b in receiver.bodies for a in b["alerts"] if a["status"] == "resolved"]
    assert {a["labels"]["alertname"] for a in resolved} == {"OstinatoDatabaseFilling",
                                                            "OstinatoNewWorkRefused"}


async def test_over_the_refuse_watermark_new_work_is_refused_and_work_in_flight_finishes(
        pool: asyncpg.Pool, db_url: str, api: httpx.AsyncClient) -> None:
    key = await tenant(api, "acme")
    h = auth(key)
    tenant_id: uuid.UUID = await pool.fetchval("SELECT id FROM tenants WHERE name = 'acme'")
    # A run in flight: claimed by a real worker, which finishes it once told to.
    service = Service("worker-gateway", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    gateway = HttpServer(create_gateway_app(service, attempts, ReadySignals()), "127.0.0.1", 0)
    await gateway.start()
    job = await new_job(pool, tenant_id, name="disk.work", payload={"n": 1})
    # A second run, of a task no worker serves: cancelled while the storage is full.
    later = await new_job(pool, tenant_id, name="disk.later")
    assert len(await fire_due(pool, store(), SystemClock())) == 2
    assert await dispatch(pool) == 2
    later_run = await pool.fetchval("SELECT id FROM runs WHERE job_id = $1", later.id)
    started, proceed = asyncio.Event(), asyncio.Event()

    @task("disk.work")
    async def work(payload: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await proceed.wait()
        return {"done": payload["n"]}

    worker = Worker(f"http://127.0.0.1:{gateway.port}", key, [work], claim_wait_seconds=0.2,
                    shutdown_grace_seconds=0)
    running = asyncio.create_task(worker.run())
    try:
        async def claimed() -> bool:
            return started.is_set()
        await until(claimed, GIVE_UP, "the run claimed")

        await used(pool, 0.97)
        assert gauge("ostinato_storage_refusing") == 1

        async def refusing() -> dict[str, Any] | None:
            body = await readyz(api)
            return body if body["status"] == "degraded" else None
        body = await until(refusing, GIVE_UP, "/readyz degraded by the storage")
        assert body["checks"]["storage"] is False and "storage" in body["degraded"]
        assert body["reasons"]["storage"].startswith("storage full: ")
        assert "new work refused" in body["reasons"]["storage"]

        before, refused = await written(pool), gauge("ostinato_storage_refused_total") or 0
        r = await api.post("/v1/jobs", headers=h, json={"name": "new", "payload": {"n": 2}})
        problem = assert_problem(r, 503)
        assert problem["type"] == "https://ostinato.dev/problems/storage-full"
        assert r.headers["retry-after"] == "60" and problem["retry_after_seconds"] == 60
        assert "nothing was written" in problem["detail"]
        r = await api.post("/v1/jobs/batch", headers=h, json={"jobs": [{"name": "b1"}]})
        assert assert_problem(r, 503)["type"].endswith("/storage-full")
        r = await api.post(f"/v1/jobs/{job.id}/trigger", headers=h)
        assert assert_problem(r, 503)["type"].endswith("/storage-full")
        r = await api.post("/v1/workflows/disk.flow/order-1/start", headers=h, json={})
        assert assert_problem(r, 503)["type"].endswith("/storage-full")
        assert await written(pool) == before  # no job, event, run, audit row or message
        assert gauge("ostinato_storage_refused_total") == refused + 4

        # Reads answer, cancels apply, and the run in flight completes through the gateway.
        assert (await api.get("/v1/runs", headers=h)).status_code == 200
        r = await api.post(f"/v1/runs/{later_run}/cancel", headers=h)
        assert r.status_code == 200, r.text
        assert await pool.fetchval("SELECT state FROM runs WHERE id = $1", later_run) == \
            "cancelled"
        proceed.set()

        async def succeeded() -> bool:
            return await pool.fetchval(
                "SELECT state FROM runs WHERE job_id = $1", job.id) == "succeeded"
        await until(succeeded, GIVE_UP, "the run in flight succeeded")
        [run] = (await api.get(f"/v1/runs?job_id={job.id}", headers=h)).json()["items"]
        assert run["state"] == "succeeded"

        # Retention made room: accepted again once the api reads the new level.
        await used(pool, 0.5)

        async def ready_again() -> bool:
            return (await readyz(api))["checks"]["storage"] is True
        await until(ready_again, GIVE_UP, "/readyz no longer degraded by the storage")
        r = await api.post("/v1/jobs", headers=h, json={"name": "new", "payload": {"n": 2}})
        assert r.status_code == 201, r.text
    finally:
        proceed.set()
        await worker.stop()
        await running
        await gateway.stop()


async def test_the_refuse_watermark_is_the_recorded_one(pool: asyncpg.Pool,
                                                        api: httpx.AsyncClient) -> None:
    """The reconciler decides with its own watermarks (OSTINATO_STORAGE_REFUSE_RATIO): at 85 %
    with a refuse watermark of 0.85 the api refuses; the api only follows the recorded level."""
    key = await tenant(api, "acme")
    async with pool.acquire() as conn:
        size = await storage_store.database_size(conn)
    await check_storage(pool, StorageConfig(capacity_bytes=math.ceil(size / 0.86),
                                            watermarks=Watermarks(0.5, 0.85)))

    r = await api.post("/v1/jobs", headers=auth(key), json={"name": "x"})  # its first read
    assert assert_problem(r, 503)["type"].endswith("/storage-full")
    assert "85.0 %" in r.json()["detail"]


async def test_kafka_submissions_wait_on_their_topic_while_full_and_are_taken_after(
        pool: asyncpg.Pool, db_url: str, topic_prefix: str) -> None:
    """Pending, not rejected: while full the ingest holds the submit topic's partition (or
    retries a message it fetched first, never giving it up); the job is created once the use
    falls back, and nothing went to the rejects topic."""
    s = kafka_settings(db_url, topic_prefix)
    service = Service("api", s)
    service.pool = pool
    ingest = SubmitIngest(pool, store(), SystemClock(), s)
    transport = httpx.ASGITransport(app=create_app(service, store()))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as api:
        r = await api.post("/v1/tenants", json={"name": "acme"}, headers=auth(ADMIN))
        assert r.status_code == 201, r.text
        access, h = r.json()["kafka"], auth(r.json()["api_key"])
        await used(pool, 0.97)
        producer = AIOKafkaProducer(
            bootstrap_servers=access["bootstrap_servers"],
            security_protocol=access["security_protocol"],
            sasl_mechanism=access["sasl_mechanism"], sasl_plain_username=access["username"],
            sasl_plain_password=access["password"], enable_idempotence=True, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(access["topic"], b'{"name": "from-kafka"}')
        finally:
            await producer.stop()
        running = asyncio.create_task(ingest.run())
        try:
            async def held() -> bool:  # the partition assigned, and held or retried
                assigned = ingest.consumer.assignment()
                return bool(assigned) and (assigned <= ingest.consumer.paused()
                                           or bool(ingest.loop.retrying()))
            await until(held, GIVE_UP, "the submit topic assigned and held")
            assert await pool.fetchval("SELECT count(*) FROM jobs") == 0

            await used(pool, 0.5)

            async def created() -> list[Any]:
                return (await api.get("/v1/jobs", headers=h)).json()["items"]
            [job] = await until(created, GIVE_UP, "the job from Kafka")
            assert job["name"] == "from-kafka"
        finally:
            ingest.stop()
            await running
            await ingest.close()
    rejects = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP)
    await rejects.start()
    try:
        tp = TopicPartition(access["rejects_topic"], 0)
        assert (await rejects.end_offsets([tp]))[tp] == 0  # nothing rejected
    finally:
        await rejects.stop()
