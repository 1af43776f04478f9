"""Never let the disk decide, after retention (issue 38 item 9; docs/RETENTION.md "The disk"):
on the real PostgreSQL, a database over the refuse watermark whose old runs retention removed
leaves "full" once VACUUM has freed their space, although neither its files nor the volume
shrank: the storage duty (as the services' role) counts the room reusable inside the database's
files (`policy.storage.reusable_bytes`, from the statistics) as room. Dead rows VACUUM has not
freed yet are no room: until then it stays full."""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator

import asyncpg
import pytest

from ostinato.db.pool import create_pool
from ostinato.policy import storage as policy
from ostinato.policy.storage import Level
from ostinato.stores import storage as storage_store
from services.reconciler.checks.storage import StorageConfig, check_storage
from tests.helpers.env import app_url_for
from tests.helpers.expired_runs import APP_ROLE_CALL, days_ago, finished_run, stream_version
from tests.helpers.integration import new_tenant
from tests.helpers.privileges import database
from tests.helpers.waiting import until

pytestmark = pytest.mark.integration

OLD_RUNS = 80  # each with a 3,000-character output that will not compress: ~10 KB a run


@pytest.fixture
async def app_pool(db_url: str) -> AsyncIterator[asyncpg.Pool]:
    """The reconciler's and the archiver's pool: the services' role."""
    p = await create_pool(app_url_for(database(db_url)), max_size=2)
    yield p
    await p.close()


async def measured(app_pool: asyncpg.Pool, config: StorageConfig) -> storage_store.StorageRow:
    await check_storage(app_pool, config)
    async with app_pool.acquire() as conn:
        row = await storage_store.read(conn)
    assert row is not None
    return row


async def in_use(app_pool: asyncpg.Pool) -> tuple[int, int]:
    """(the database's size, the room the duty counts inside its files)."""
    async with app_pool.acquire() as conn:
        size = await storage_store.database_size(conn)
        rooms = await storage_store.relations(conn)
    return size, policy.reusable_bytes(r.space() for r in rooms)


async def test_a_full_database_leaves_full_once_removed_runs_space_is_freed(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, db_url: str) -> None:
    tenant_id, _ = await new_tenant(pool)
    old = [await finished_run(pool, tenant_id, ended=days_ago(40),
                              output={"pad": os.urandom(1500).hex()})
           for _ in range(OLD_RUNS)]
    # young runs after them, inside retention: the freed space is inside the files, not at
    # their end (VACUUM would otherwise truncate the tail and the files would shrink)
    for _ in range(5):
        await finished_run(pool, tenant_id, ended=days_ago(1))
    # a database that has lived: autovacuum has visited its tables (their visibility and free
    # space maps exist, which a first VACUUM would add below) and recorded the widths
    await pool.execute("VACUUM (ANALYZE, TRUNCATE false)")

    size, room = await in_use(app_pool)
    config = StorageConfig(capacity_bytes=math.ceil((size - room) / 0.96))
    assert (await measured(app_pool, config)).level == Level.FULL

    # retention removes the old runs (the archiver's call, as the services' role)
    versions = []
    async with pool.acquire() as conn:
        for run_id in old:
            versions.append(await stream_version(conn, run_id))
    remover = await asyncpg.connect(app_url_for(database(db_url)))
    try:
        removed = await remover.fetch(APP_ROLE_CALL, old, versions)
    finally:
        await remover.close()  # its statistics are flushed as it ends
    assert [r["removed"] for r in removed] == [True] * OLD_RUNS

    async def deletions_counted() -> bool:
        return bool(await pool.fetchval(
            "SELECT n_dead_tup > 0 FROM pg_stat_all_tables WHERE relname = 'events'"))
    await until(deletions_counted, within=60, what="the removal's statistics")
    # dead rows are no room until VACUUM frees them: still full
    assert (await measured(app_pool, config)).level == Level.FULL

    await pool.execute("VACUUM (TRUNCATE false)")  # autovacuum's work, done now
    after = await measured(app_pool, config)
    assert after.database_bytes >= size  # the files did not shrink (a vacuum adds its maps)
    # by the files alone it would still be full
    assert policy.usage(after.database_bytes, capacity_bytes=config.capacity_bytes).used_ratio \
        >= 0.95  # type: ignore[operator]
    assert after.level != Level.FULL and after.used_ratio is not None \
        and after.used_ratio < 0.95, after
    assert after.free_bytes is not None and after.free_bytes > config.capacity_bytes - size
    assert await pool.fetchval("SELECT count(*) FROM runs WHERE tenant_id = $1",
                               tenant_id) == 5
