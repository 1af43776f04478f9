"""Fixtures of the integration tests: the public API in-process over the real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.clock import Clock, SystemClock
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from services.api.app import create_app
from services.worker_gateway.app import create_app as create_gateway_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.wakeups import ReadySignals

from .helpers import Receiver, served_api, store

ADMIN = "test-admin-key"
GATEWAY_BASE = "http://gateway.test"


@pytest.fixture
async def gateway(pool: asyncpg.Pool, db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The worker-gateway in-process (system clock, 30 s leases), for SDK workers."""
    service = Service("worker-gateway", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    transport = httpx.ASGITransport(app=create_gateway_app(service, attempts, ReadySignals()))
    async with httpx.AsyncClient(transport=transport, base_url=GATEWAY_BASE) as c:
        yield c


@pytest.fixture
def api_clock() -> Clock:
    return SystemClock()


@pytest.fixture
async def client(pool: asyncpg.Pool, db_url: str,
                 api_clock: Clock) -> AsyncIterator[httpx.AsyncClient]:
    service = Service("api", Settings(database_url=db_url, admin_key=ADMIN,
                                      max_payload_bytes=1000), clock=api_clock)
    service.pool = pool
    # In the test's own event loop, so the app can use the test's pool.
    transport = httpx.ASGITransport(app=create_app(service, store(api_clock)))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as c:
        yield c


@pytest.fixture
async def api_url(pool: asyncpg.Pool, db_url: str) -> AsyncIterator[str]:
    """The public API served on a free port of 127.0.0.1, in this event loop (over the test's
    pool): for real HTTP clients and for commands running as other processes."""
    async with served_api(pool, db_url, ADMIN) as url:
        yield url


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def tenant(client: httpx.AsyncClient, name: str) -> str:
    r = await client.post("/v1/tenants", json={"name": name}, headers=auth(ADMIN))
    assert r.status_code == 201, r.text
    assert r.json()["api_key"].startswith("ost_")
    return r.json()["api_key"]


def assert_problem(r: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["type"].startswith("https://")
    assert body["title"] and body["detail"]
    if field is not None:
        assert field in [e["field"] for e in body["errors"]], body
    return body


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    await r.start()
    try:
        yield r
    finally:
        if r.server is not None and r.server.started:
            await r.stop()
