"""/readyz answers whatever a dependency does, and means "can do its work" (issue 42).

- With a broker that accepts connections and never answers (what a SIGSTOPped Kafka looks
  like), a service's readiness comes back while the broker's connection is still unanswered,
  reporting Kafka down (degraded) with how long it has been silent, and PostgreSQL up; the
  broker probe runs in the background, one at a time.
- An api process whose Kafka bootstrap points where nothing listens is ready, `degraded`
  (200), and says so in a gauge; once its database cannot be reached it is not ready (503).
- A database that answers reads but refuses writes (a statement refused with disk_full raised
  by the real server, a read-only database) makes the service not ready.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from ostinato.db.health import WRITES
from ostinato.db.pool import create_pool
from ostinato.runtime.ops import Degraded, readyz_answer
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.telemetry import metrics
from tests.helpers.api import ADMIN
from tests.helpers.env import app_url_for, drop_database, fresh_database, url_for
from tests.helpers.lab.cluster import Cluster, free_port
from tests.helpers.lab.outage import PgRelay

pytestmark = pytest.mark.integration


async def test_readiness_answers_while_the_broker_is_silent(pool: asyncpg.Pool,
                                                            db_url: str) -> None:
    connections: list[asyncio.StreamWriter] = []
    answered = asyncio.Event()  # never set: the broker says nothing

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await answered.wait()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    service = Service("scheduler", Settings(database_url=db_url, admin_key=ADMIN,
                                            kafka_bootstrap=f"127.0.0.1:{port}"))
    service.pool = pool
    try:
        first = await service.readiness()
        assert connections, "the probe did not reach the broker"
        assert all(not w.is_closing() for w in connections)  # still waiting for the broker
        assert first["postgres"] is True
        assert isinstance(first["kafka"], Degraded)
        assert first["kafka"].reason.startswith("no answer for")
        second = await service.readiness()
        assert isinstance(second["kafka"], Degraded)
        assert second["kafka"].reason.startswith("no answer for")
        assert service._kafka_probe is not None and not service._kafka_probe.done()
    finally:
        if service._kafka_probe is not None:
            service._kafka_probe.cancel()
        service._drop_probe_conn()
        server.close()
        for w in connections:
            w.close()


@pytest.fixture
def writes_clear() -> Iterator[None]:
    """WRITES is the process's own: leave it as found for the tests that follow."""
    WRITES.clear()
    yield
    WRITES.clear()


async def test_a_write_refused_for_want_of_space_makes_the_service_not_ready(
        pool: asyncpg.Pool, db_url: str, writes_clear: None) -> None:
    service = Service("api", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    try:
        assert readyz_answer(await service.readiness(kafka=False))[0] == 200
        # A refusal that is the statement's own fault says nothing about the server.
        with pytest.raises(asyncpg.UniqueViolationError):
            await pool.execute("DO $$ BEGIN RAISE unique_violation; END $$")
        assert readyz_answer(await service.readiness(kafka=False))[0] == 200
        # The real server refuses a statement of the pool with SQLSTATE 53100, as when a data
        # file cannot grow.
        with pytest.raises(asyncpg.DiskFullError):
            await pool.execute("DO $$ BEGIN RAISE EXCEPTION 'could not extend file' "
                               "USING ERRCODE = 'disk_full'; END $$")
        status, body = readyz_answer(await service.readiness(kafka=False))
        assert status == 503, body
        assert body["checks"] == {"postgres": True, "postgres_writes": False}
        assert body["reasons"]["postgres_writes"].startswith(
            "53100 DiskFullError: could not extend file")
        text = metrics.render()[0].decode()
        assert "ostinato_database_writes_failing 1.0" in text
        assert 'ostinato_database_write_errors_total{sqlstate="53100"}' in text
    finally:
        service._drop_probe_conn()


async def test_a_read_only_database_makes_the_service_not_ready(db_url: str,
                                                                writes_clear: None) -> None:
    name = urlsplit(db_url).path.lstrip("/")
    admin = await asyncpg.connect(url_for("postgres"))
    service = Service("scheduler", Settings(database_url=db_url, admin_key=ADMIN))
    try:
        assert (await service.readiness(kafka=False))["postgres_writes"] is True
        service._drop_probe_conn()
        await admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        checks = await service.readiness(kafka=False)  # a new session: read-only
        assert checks["postgres"] is True
        assert isinstance(checks["postgres_writes"], str)
        assert checks["postgres_writes"].startswith("25006 the server is read-only")
        # ... and the work's own writes are refused and counted the same way.
        pool = await create_pool(db_url, max_size=1)
        try:
            with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
                await pool.execute("CREATE TEMP TABLE t (x int)")
        finally:
            await pool.close()
        assert WRITES.last is not None and WRITES.last.sqlstate == "25006"
    finally:
        await admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
        await admin.close()
        service._drop_probe_conn()


async def readyz(url: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=5) as client:
        return await client.get(url)


async def test_an_api_process_is_ready_degraded_without_kafka_and_not_ready_without_postgres(
        template_db: str, tmp_path: Path) -> None:
    name = await fresh_database(template_db)
    relay = await PgRelay(url_for(name)).start()
    cluster = Cluster(database_url=relay.url_through(app_url_for(name)),
                      kafka_bootstrap=f"127.0.0.1:{free_port()}",  # nothing listens there
                      topic_prefix="readyz-", log_dir=tmp_path,
                      extra_env={"OSTINATO_KAFKA_TENANT_BOOTSTRAP": ""})
    try:
        # `start` waits for a 200 from /readyz: a 503 for Kafka alone never comes ready.
        await asyncio.to_thread(cluster.start, ("api",))
        url = f"{cluster.api_url}/readyz"
        answer = await readyz(url)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "degraded"
        assert body["degraded"] == ["kafka"]
        assert body["checks"]["kafka"] is False
        assert body["checks"]["postgres"] is True
        assert body["checks"]["postgres_writes"] is True
        metrics = (await readyz(f"{cluster.api_url}/metrics")).text
        assert 'ostinato_dependency_up{dependency="kafka"} 0.0' in metrics
        assert 'ostinato_dependency_up{dependency="postgres"} 1.0' in metrics

        await relay.cut()  # the database is gone for the api
        deadline = time.monotonic() + 60  # a give-up, not a bound
        while (answer := await readyz(url)).status_code != 503:
            assert time.monotonic() < deadline, answer.text
            await asyncio.sleep(0.2)
        body = answer.json()
        assert body["status"] == "not ready"
        assert body["checks"]["postgres"] is False
        assert "ostinato_dependency_up{dependency=\"postgres\"} 0.0" in (
            await readyz(f"{cluster.api_url}/metrics")).text
        assert cluster.procs["api"].poll() is None  # not ready, not dead
    finally:
        await asyncio.to_thread(cluster.stop)
        await relay.close()
        await drop_database(name)
