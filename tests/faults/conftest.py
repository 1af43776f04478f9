"""Fixtures of the fault suite: a `Lab` (tests.helpers.lab.lab) per test — the five services as
real processes on a fresh database and topic prefix, short leases, a tenant, and worker
processes started on demand — torn down whatever happens, including restarting the shared
PostgreSQL or Kafka server if the test stopped it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from ostinato.db.migrate import migrate
from ostinato.db.pool import create_pool
from tests.helpers.env import (
    DATABASE_URL,
    KAFKA_BOOTSTRAP,
    app_url_for,
    drop_database,
    fresh_database,
    owner_role,
    owner_url_for,
    url_for,
)
from tests.helpers.lab.cluster import Cluster
from tests.helpers.lab.database import Db
from tests.helpers.lab.injection import server
from tests.helpers.lab.lab import FAULT_ENV, Lab


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "restarts_servers: stops and starts the shared PostgreSQL or Kafka server")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that restart a shared server run first in the session: a PostgreSQL restart
    closes every connection, including the one tests/conftest.py's session-scoped
    `template_db` keeps open for its teardown (once that fixture opens a connection per
    statement, this reordering can go)."""
    first = [i for i in items if i.get_closest_marker("restarts_servers")]
    if first:
        items[:] = first + [i for i in items if not i.get_closest_marker("restarts_servers")]


async def _admin(sql: str) -> None:
    db = Db(DATABASE_URL)
    try:
        await db.execute(sql, within=60)
    finally:
        await db.close()


@pytest.fixture(scope="session")
async def template_db() -> AsyncIterator[str]:
    """The migrated template of this directory's databases. Overrides tests/conftest.py's,
    which keeps one admin connection open for the whole session: the PostgreSQL restart in
    test_servers.py closes it, and its teardown then fails. Here every admin statement gets a
    connection of its own."""
    name = f"ostinato_faults_template_{os.getpid()}"
    await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await _admin(f'CREATE DATABASE "{name}" OWNER "{owner_role()}"')
    try:
        await migrate(owner_url_for(name))
        yield name
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def lab(template_db: str, topic_prefix: str, tmp_path: Path) -> AsyncIterator[Lab]:
    name = await fresh_database(template_db)
    # the services as the app role; the test's own SQL as the administrator; the workers'
    # effects tables (their "own database") as the owner: the app role creates no table
    cluster = Cluster(database_url=app_url_for(name), kafka_bootstrap=KAFKA_BOOTSTRAP,
                      topic_prefix=topic_prefix, log_dir=tmp_path / "logs",
                      extra_env=dict(FAULT_ENV))
    lab = Lab(cluster=cluster, db=Db(url_for(name)), effects_url=owner_url_for(name))
    try:
        yield lab
    finally:
        try:
            await lab.close()
        finally:
            for srv in ("postgres", "kafka"):  # whatever happened above, leave them running
                if srv in lab.stopped_servers:
                    await asyncio.to_thread(server, srv, "up")
            await drop_database(name)


@pytest.fixture
async def cluster(template_db: str, topic_prefix: str,
                  tmp_path: Path) -> AsyncIterator[tuple[Cluster, asyncpg.Pool]]:
    """The scheduler fault tests' cluster (test_schedulers, test_clock_skew): fast polls, 2 s shard
    leases, and a pool on its database as the administrator for the test's own SQL."""
    name = await fresh_database(template_db)
    c = Cluster(database_url=app_url_for(name), kafka_bootstrap=KAFKA_BOOTSTRAP,
                topic_prefix=topic_prefix, log_dir=tmp_path / "logs",
                extra_env={"OSTINATO_SCHEDULER_POLL_SECONDS": "0.05",
                           "OSTINATO_SCHEDULER_BATCH_SIZE": "50",
                           "OSTINATO_RECONCILE_INTERVAL_SECONDS": "0.5",
                           "OSTINATO_MISSED_GRACE_SECONDS": "2",
                           "OSTINATO_SHARD_LEASE_TTL_SECONDS": "2"})
    pool = await create_pool(url_for(name), max_size=4)  # the test's own SQL: as admin
    try:
        yield c, pool
    finally:
        await asyncio.to_thread(c.stop)
        await pool.close()
        await drop_database(name)
