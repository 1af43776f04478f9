"""Shared fixtures. Integration tests run against the real PostgreSQL (and Kafka where named),
started by `make test` through infra/up.sh. Each test gets its own database cloned from a
migrated template, so tests never see each other's rows."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import asyncpg
import pytest

from ostinato.db.migrate import migrate
from ostinato.db.pool import create_pool
from ostinato.objects import ObjectStore
from ostinato.telemetry import metrics
from tests.helpers.env import (
    KAFKA_BOOTSTRAP,
    TOPIC_PREFIXES,
    admin_connection,
    drop_database,
    fresh_database,
    new_topic_prefix,
    owner_role,
    owner_url_for,
    slots_out_of_step,
    url_for,
)
from tests.helpers.objects import PrivateS3, running_private_s3, s3_store

# One test process labels thousands of tenants; tests read per-tenant series by tenant id, so
# the cap (metrics.tenant_label) is lifted here (its own unit test sets it low).
metrics.TENANT_LABEL_CAP = 1_000_000

TEMPLATE = f"ostinato_test_template_{os.getpid()}"


@pytest.fixture(scope="session")
async def template_db() -> AsyncIterator[str]:
    conn = await admin_connection()
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{TEMPLATE}" OWNER "{owner_role()}"')
        await migrate(owner_url_for(TEMPLATE))
        yield TEMPLATE
    finally:
        await conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        await conn.close()


@pytest.fixture
async def db_url(template_db: str) -> AsyncIterator[str]:
    """A fresh database; afterwards, every test also checks that the dispatcher's slot count
    followed every run it moved."""
    name = await fresh_database(template_db)
    yield url_for(name)
    try:
        assert not await slots_out_of_step(url_for(name))
    finally:
        await drop_database(name)


@pytest.fixture
async def pool(db_url: str) -> AsyncIterator[asyncpg.Pool]:
    p = await create_pool(db_url, max_size=8)
    yield p
    await p.close()


@pytest.fixture
async def object_store() -> AsyncIterator[ObjectStore]:
    """An ObjectStore on the real S3 server (SeaweedFS, `infra/up.sh s3`) under a prefix of the
    test's own, emptied afterwards (tests/helpers/objects.py)."""
    async with s3_store() as store:
        yield store


@pytest.fixture
async def private_s3(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[PrivateS3]:
    """A real S3 server of the test's own (its folder, its ports), to stop or SIGSTOP without
    touching the shared one; stopped afterwards."""
    async with running_private_s3(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture
def topic_prefix() -> str:
    """A fresh prefix per test: its Kafka topics start empty."""
    return new_topic_prefix()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Delete the session's topics, so that a broker shared by many runs (a developer's) does not
    gather thousands of them: each costs the broker at start and in every full metadata read."""
    if not TOPIC_PREFIXES:
        return
    from ostinato.bus.kafka import delete_topics_with_prefixes

    async def delete() -> None:
        async with asyncio.timeout(60):
            await delete_topics_with_prefixes(KAFKA_BOOTSTRAP, TOPIC_PREFIXES)

    try:
        asyncio.run(delete())
    except Exception as exc:  # the broker gone already: the topics stay, nothing else is wrong
        print(f"\nthe session's Kafka topics were not deleted: {exc!r}")
