"""/readyz answers whatever a dependency does: with a broker that accepts connections and never
answers (what a SIGSTOPped Kafka looks like), a service's readiness comes back while the
broker's connection is still unanswered, reporting Kafka down with how long it has been silent,
and PostgreSQL up; the broker probe runs in the background, one at a time."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings

from .conftest import ADMIN

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
        assert isinstance(first["kafka"], str) and first["kafka"].startswith("no answer for")
        second = await service.readiness()
        assert isinstance(second["kafka"], str) and second["kafka"].startswith("no answer for")
        assert service._kafka_probe is not None and not service._kafka_probe.done()
    finally:
        if service._kafka_probe is not None:
            service._kafka_probe.cancel()
        service._drop_probe_conn()
        server.close()
        for w in connections:
            w.close()
