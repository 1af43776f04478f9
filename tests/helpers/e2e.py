"""The five services on a fresh database, for end-to-end tests: one helper instead of a copy
per test module. Each service runs as two instances (issue 39: no test passes only because one
process held everything in memory); clients reach the api and workers the gateway through a
balancer in front of both. OSTINATO_E2E_INSTANCES=1 runs one of each (faster on a small
machine; the suite's default is 2)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx

from tests.helpers.env import (
    APP_URL,
    KAFKA_BOOTSTRAP,
    app_url_for,
    drop_database,
    fresh_database,
    slots_out_of_step,
    url_for,
)
from tests.helpers.lab.cluster import Cluster

E2E_INSTANCES = int(os.environ.get("OSTINATO_E2E_INSTANCES", "2"))


async def connected_roles(name: str) -> set[str]:
    """The roles connected to database `name` (other than the connection asking)."""
    conn = await asyncpg.connect(url_for(name))
    try:
        return {r["usename"] for r in await conn.fetch(
            "SELECT DISTINCT usename FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()", name)}
    finally:
        await conn.close()


@asynccontextmanager
async def running_cluster(template_db: str, topic_prefix: str, log_dir: Path, *,
                          env: Mapping[str, str] | None = None,
                          service_env: Mapping[str, dict[str, str]] | None = None,
                          clean_exit: bool = True,
                          instances: int = E2E_INSTANCES) -> AsyncIterator[Cluster]:
    """Start the services (`instances` of each) on a database cloned from the template;
    afterwards stop them, check that the dispatch slots followed every run (as after every
    integration test), drop the database, and (`clean_exit`) require every service to have
    exited with 0."""
    name = await fresh_database(template_db)
    cluster = Cluster(database_url=app_url_for(name), kafka_bootstrap=KAFKA_BOOTSTRAP,
                      topic_prefix=topic_prefix, log_dir=log_dir, extra_env=dict(env or {}),
                      service_env=dict(service_env or {}), instances=instances)
    try:
        await asyncio.to_thread(cluster.start)
        assert await connected_roles(name) == {urlsplit(APP_URL).username}  # never the owner
        yield cluster
    finally:
        codes = await asyncio.to_thread(cluster.stop)
        try:
            out_of_step = await slots_out_of_step(url_for(name))
        finally:
            await drop_database(name)
    assert not out_of_step, out_of_step
    if clean_exit:
        assert codes == {s: 0 for s in codes}, f"unclean exits: {codes}"


async def tenant_key(c: Cluster) -> str:
    async with httpx.AsyncClient(base_url=c.api_url) as api:
        r = await api.post("/v1/tenants", json={"name": "acme"},
                           headers={"Authorization": f"Bearer {c.admin_key}"})
        return r.json()["api_key"]


async def eventually(api: httpx.AsyncClient, path: str, key: str,
                     done: Callable[[dict], bool], seconds: float = 45) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        body = (await api.get(path, headers={"Authorization": f"Bearer {key}"})).json()
        if done(body):
            return body
        assert asyncio.get_running_loop().time() < deadline, f"{path}: {body}"
        await asyncio.sleep(0.2)
