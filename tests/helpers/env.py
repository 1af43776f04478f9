"""The test environment: the servers' addresses and the three database roles (README.md
"Database roles"), a database per test cloned from a template, and Kafka topic prefixes
deleted when the session ends (tests/conftest.py keeps the fixtures that use these)."""

from __future__ import annotations

import itertools
import os
import uuid
from urllib.parse import urlsplit

import asyncpg

# Three roles (README.md "Database roles"). DATABASE_URL is the administrative (superuser) URL
# the fixtures create and drop databases with, and `url_for` gives it for a test database: a
# test's own SQL may do anything. The migrations run as the owner (`owner_url_for`); the
# services the tests start as processes connect as the app role (`app_url_for`), like in
# production.
DATABASE_URL = os.environ.get("OSTINATO_ADMIN_DATABASE_URL",
                              "postgresql://ostinato@127.0.0.1:15432/ostinato")
OWNER_URL = os.environ.get("OSTINATO_OWNER_DATABASE_URL",
                           "postgresql://ostinato_owner@127.0.0.1:15432/ostinato")
APP_URL = os.environ.get("OSTINATO_DATABASE_URL",
                         "postgresql://ostinato_app@127.0.0.1:15432/ostinato")
KAFKA_BOOTSTRAP = os.environ.get("OSTINATO_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
# The broker's SASL/SCRAM listeners for tenants' producers and for the services (docs/KAFKA.md)
TENANT_BOOTSTRAP = os.environ.get("OSTINATO_KAFKA_TENANT_BOOTSTRAP", "127.0.0.1:9094")
SERVICE_BOOTSTRAP = os.environ.get("OSTINATO_KAFKA_SERVICE_BOOTSTRAP", "127.0.0.1:9095")
_counter = itertools.count()


def _on(url: str, database: str) -> str:
    """`url` on `database`, its query kept (a multi-host URL's target_session_attrs: the HA
    profile's, infra/README.md "HA PostgreSQL")."""
    return urlsplit(url)._replace(path=f"/{database}").geturl()


def url_for(database: str) -> str:
    """`database` as the administrator (superuser): for the tests' own SQL."""
    return _on(DATABASE_URL, database)


def owner_url_for(database: str) -> str:
    """`database` as the owner of its tables: what migrations run as."""
    return _on(OWNER_URL, database)


def app_url_for(database: str) -> str:
    """`database` as the services' least-privilege role."""
    return _on(APP_URL, database)


def owner_url_of(url: str) -> str:
    """The database of `url` (any role's) as its owner, e.g. for a test's worker that keeps
    its own tables (effects) in the services' database: the app role cannot create tables."""
    return owner_url_for(urlsplit(url).path.lstrip("/"))


def owner_role() -> str:
    """The owner role's name (the user of OSTINATO_OWNER_DATABASE_URL)."""
    return urlsplit(OWNER_URL).username or "ostinato_owner"


async def admin_connection() -> asyncpg.Connection:
    return await asyncpg.connect(DATABASE_URL)


async def fresh_database(template: str) -> str:
    name = f"ostinato_t_{os.getpid()}_{next(_counter)}"
    conn = await admin_connection()
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(
            f'CREATE DATABASE "{name}" OWNER "{owner_role()}" TEMPLATE "{template}"')
    finally:
        await conn.close()
    return name


async def drop_database(name: str) -> None:
    conn = await admin_connection()
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


TOPIC_PREFIXES: list[str] = []  # handed out in this session; their topics go at its end


def new_topic_prefix() -> str:
    """A fresh topic prefix, whose topics are deleted when the test session ends."""
    prefix = f"t{uuid.uuid4().hex[:10]}."
    TOPIC_PREFIXES.append(prefix)
    return prefix
