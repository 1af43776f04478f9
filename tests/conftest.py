"""Shared fixtures. Integration tests run against the real PostgreSQL (and Kafka where named),
started by `make test` through infra/up.sh. Each test gets its own database cloned from a
migrated template, so tests never see each other's rows."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from ostinato.db.migrate import migrate
from ostinato.db.pool import create_pool

DATABASE_URL = os.environ.get("OSTINATO_DATABASE_URL",
                              "postgresql://ostinato@127.0.0.1:55432/ostinato")
KAFKA_BOOTSTRAP = os.environ.get("OSTINATO_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
TEMPLATE = f"ostinato_test_template_{os.getpid()}"
_counter = itertools.count()


def url_for(database: str) -> str:
    base, _, _ = DATABASE_URL.rpartition("/")
    return f"{base}/{database}"


async def _admin() -> asyncpg.Connection:
    return await asyncpg.connect(DATABASE_URL)


@pytest.fixture(scope="session")
async def template_db() -> AsyncIterator[str]:
    conn = await _admin()
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
        await migrate(url_for(TEMPLATE))
        yield TEMPLATE
    finally:
        await conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        await conn.close()


async def fresh_database(template: str) -> str:
    name = f"ostinato_t_{os.getpid()}_{next(_counter)}"
    conn = await _admin()
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await conn.close()
    return name


async def drop_database(name: str) -> None:
    conn = await _admin()
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def slots_out_of_step(url: str) -> list[str]:
    """Runs whose dispatch slot (run_slots) disagrees with their state: run_slots must hold
    exactly the queued and running runs, whatever path moved them."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "(SELECT run_id AS id, 'slot without a queued or running run' AS why FROM run_slots "
            " EXCEPT SELECT id, 'slot without a queued or running run' FROM runs "
            " WHERE state IN ('queued', 'running')) "
            "UNION ALL (SELECT id, 'queued or running run without a slot' FROM runs "
            " WHERE state IN ('queued', 'running') EXCEPT SELECT run_id, "
            " 'queued or running run without a slot' FROM run_slots)")
        return [f"{r['id']}: {r['why']}" for r in rows]
    finally:
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
def topic_prefix() -> str:
    """A fresh prefix per test: its Kafka topics start empty."""
    return f"t{uuid.uuid4().hex[:10]}."
