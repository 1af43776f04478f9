"""Fixtures of the integration tests: the public API in-process over the real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

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
from tests.helpers.api import ADMIN, GATEWAY_BASE
from tests.helpers.env import (
    app_url_for,
)
from tests.helpers.integration import Receiver, served_api, store
from tests.helpers.privileges import database


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


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    await r.start()
    try:
        yield r
    finally:
        if r.server is not None and r.server.started:
            await r.stop()


@pytest.fixture
async def app(db_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection to the test's database as the services' role."""
    conn = await asyncpg.connect(app_url_for(database(db_url)))
    yield conn
    await conn.close()
