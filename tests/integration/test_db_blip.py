"""A database that is away for a moment (issue 42: a PostgreSQL restart of a second answered
82 requests with 500): the api and the worker-gateway answer 503 with `Retry-After`, never 500;
the Python client retries what is safe to repeat and creates one job, not two; the SDK's batch
report survives it. The services' pools reach the real PostgreSQL through `PgRelay`, which the
test cuts (backends terminated, connections refused) and mends; the test's own pool is direct."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from ostinato.client import AsyncClient
from ostinato.clock import SystemClock
from ostinato.db.pool import create_pool
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.sdk import Worker, task
from services.scheduler.tick import fire_due
from services.worker_gateway.app import create_app as create_gateway_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.wakeups import ReadySignals
from tests.helpers.api import ADMIN, auth, tenant
from tests.helpers.env import DATABASE_URL
from tests.helpers.integration import dispatch, new_job, new_tenant, served_api, store
from tests.helpers.lab.outage import PgRelay
from tests.helpers.waiting import until

pytestmark = pytest.mark.integration
SERVICE_UNAVAILABLE = "https://ostinato.dev/problems/service-unavailable"


@pytest.fixture
async def relay() -> AsyncIterator[PgRelay]:
    r = await PgRelay(DATABASE_URL).start()
    yield r
    await r.close()


@pytest.fixture
async def relayed_pool(relay: PgRelay, db_url: str) -> AsyncIterator[asyncpg.Pool]:
    """The services' pool, through the relay."""
    p = await create_pool(relay.url_through(db_url), min_size=1, max_size=4)
    yield p
    p.terminate()  # its connections may be half-dead after a cut: no graceful close


@pytest.fixture
async def api(relayed_pool: asyncpg.Pool, db_url: str) -> AsyncIterator[str]:
    async with served_api(relayed_pool, db_url, ADMIN) as url:
        yield url


class Recording(httpx.AsyncHTTPTransport):
    """A real HTTP transport that keeps each exchange's status and request body (the test
    watches the client's retries)."""

    def __init__(self) -> None:
        super().__init__()
        self.exchanges: list[tuple[int, bytes]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        self.exchanges.append((response.status_code, request.content))
        return response


def assert_unavailable(r: httpx.Response) -> None:
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "1"
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert (body["type"], body["status"], body["retry_after_seconds"]) == (
        SERVICE_UNAVAILABLE, 503, 1)
    assert "retry after 1 s" in body["detail"]


async def test_the_api_answers_503_with_retry_after_while_its_database_is_away(
        api: str, relay: PgRelay, pool: asyncpg.Pool) -> None:
    async with httpx.AsyncClient(base_url=api) as http:
        key = await tenant(http, "blip")
        assert (await http.get("/v1/jobs", headers=auth(key))).status_code == 200
        assert await relay.cut() >= 1  # the pool's connections: lost, then refused
        job = {"name": "during", "schedule": {"at": "2030-01-01T00:00:00Z"}}
        with capture_logs() as lines:
            for _ in range(3):
                assert_unavailable(await http.get("/v1/jobs", headers=auth(key)))
                assert_unavailable(await http.post("/v1/jobs", json=job, headers=auth(key)))
        # warnings without tracebacks (the audit row of the refused create among them)
        assert [x for x in lines if x["log_level"] == "error"] == []
        assert await pool.fetchval("SELECT count(*) FROM jobs") == 0  # nothing was done
        await relay.mend()
        r = await http.get("/v1/jobs", headers=auth(key))
        assert r.status_code == 200, r.text


async def test_the_client_retries_until_the_database_is_back_and_creates_one_job(
        api: str, relay: PgRelay, pool: asyncpg.Pool) -> None:
    async with httpx.AsyncClient(base_url=api) as http:
        key = await tenant(http, "retrying")
    recording = Recording()
    async with AsyncClient(api, key, transport=recording, retries=30) as client:
        await relay.cut()
        creating = asyncio.create_task(client.jobs.create(
            name="invoice", schedule={"at": "2030-01-01T00:00:00Z"}))

        async def refused_twice() -> bool:
            return [s for s, _ in recording.exchanges].count(503) >= 2
        await until(refused_twice, within=60, what="two 503s")  # a hang guard only
        await relay.mend()
        job = await creating
    statuses = [s for s, _ in recording.exchanges]
    assert statuses[:2] == [503, 503] and statuses[-1] == 201, statuses
    keys = {msgspec.json.decode(body)["idempotency_key"] for _, body in recording.exchanges}
    assert len(keys) == 1 and next(iter(keys)).startswith("client:")  # the same key each time
    assert job.idempotency_key in keys
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE name = 'invoice'") == 1


async def test_the_client_does_not_retry_what_it_cannot_repeat_safely(
        api: str, relay: PgRelay) -> None:
    async with httpx.AsyncClient(base_url=api) as http:
        key = await tenant(http, "unsafe")
    recording = Recording()
    async with AsyncClient(api, key, transport=recording, retries=30) as client:
        job = await client.jobs.create(name="n", schedule={"at": "2030-01-01T00:00:00Z"})
        await relay.cut()
        with pytest.raises(Exception) as refused:
            await client.jobs.pause(job.id)  # no key makes a pause safe to send twice
        await relay.mend()
    assert getattr(refused.value, "status", None) == 503
    assert [s for s, _ in recording.exchanges] == [201, 503]


def http_count(route: str, status: int) -> float:
    return REGISTRY.get_sample_value(
        "ostinato_http_request_duration_seconds_count",
        {"method": "POST", "route": route, "status": str(status)}) or 0.0


async def test_the_sdk_reports_an_outcome_through_a_gateway_whose_database_was_away(
        relayed_pool: asyncpg.Pool, relay: PgRelay, pool: asyncpg.Pool, db_url: str) -> None:
    service = Service("worker-gateway", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = relayed_pool
    attempts = Attempts(relayed_pool, store(), SystemClock(), lease_ttl_seconds=30)
    server = HttpServer(create_gateway_app(service, attempts, ReadySignals()), "127.0.0.1", 0)
    await server.start()
    tenant_id, key = await new_tenant(pool)
    await new_job(pool, tenant_id, name="blip.work", payload={"n": 1})  # task: its name
    assert len(await fire_due(pool, store(), SystemClock())) == 1
    assert await dispatch(pool) == 1
    started, proceed = asyncio.Event(), asyncio.Event()

    @task("blip.work")
    async def work(payload: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await proceed.wait()
        return {"done": payload["n"]}

    batch_503s = http_count("/v1/worker/batch", 503)
    worker = Worker(f"http://127.0.0.1:{server.port}", key, [work], claim_wait_seconds=0.2,
                    shutdown_grace_seconds=0)
    running = asyncio.create_task(worker.run())
    try:
        async def claimed() -> bool:
            return started.is_set()
        await until(claimed, within=60, what="the run claimed")  # a hang guard only
        await relay.cut()
        proceed.set()  # the outcome's batch meets the gateway without its database

        async def refused() -> bool:
            return http_count("/v1/worker/batch", 503) > batch_503s
        await until(refused, within=60, what="a batch answered 503")
        assert http_count("/v1/worker/batch", 500) == 0
        await relay.mend()

        async def succeeded() -> bool:
            return await pool.fetchval("SELECT state FROM runs") == "succeeded"
        await until(succeeded, within=60, what="the run succeeded")
    finally:
        proceed.set()
        await worker.stop()
        await running
        await server.stop()
