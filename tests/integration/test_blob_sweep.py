"""Blob objects no row knows are found and deleted (issue 38 item 4, docs/RETENTION.md "Blobs"),
on the real PostgreSQL and the real S3 server (SeaweedFS, tests/helpers/objects.py).

- The bucket sweep, walking `tenants/` a page at a time across tenants and past their archive
  objects, deletes an orphan (an object at a blob's content address with no `blob_objects`
  row and no `blobs` row) once its last write is older than the grace; an orphan written
  within the grace, a hot row's object, an archived run's objects and the archive documents
  stay.
- A write that puts its object and then rolls back leaves a `blob_objects` row (touched before
  the put, on its own): the collector deletes the object after the grace.
- A process killed with SIGKILL after its put and before its commit (a put inside its
  transaction) leaves an orphan no row knows: the sweep deletes it."""

from __future__ import annotations

import asyncio
import hashlib
import signal
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import asyncpg
import msgspec
import pytest

from ostinato.archive import blob_key, run_key
from ostinato.clock import SystemClock
from ostinato.db.pool import create_pool
from ostinato.domain.errors import InvalidState
from ostinato.eventlog.store import BlobObjects, use_blob_objects
from ostinato.objects import ObjectStore
from ostinato.runs.signals import send_signal
from ostinato.telemetry import metrics
from services.reconciler.checks.archive import ArchiveConfig, Archiver
from services.reconciler.checks.blob_objects import Sweep, collect_once
from tests.helpers.env import app_url_for
from tests.helpers.expired_runs import days_ago, finished_run
from tests.helpers.integration import new_job, new_tenant, store
from tests.helpers.objects import s3_store, s3_url
from tests.helpers.privileges import database
from tests.helpers.waiting import until

pytestmark = pytest.mark.integration

LIMIT = 1024  # the tests' inline limit: values over it go to S3
GRACE = timedelta(seconds=15)  # an orphan younger than this stays (the sweep runs at once)
BIG_OUTPUT = {"report": "o" * 3000}
BIG_PAYLOAD = {"rows": ["p" * 100] * 30}


@pytest.fixture
async def app_pool(db_url: str) -> AsyncIterator[asyncpg.Pool]:
    """The services' role (the archiver, the collector and the sweep run as it)."""
    pool = await create_pool(app_url_for(database(db_url)), max_size=4)
    yield pool
    await pool.close()


@pytest.fixture
async def blobs(object_store: ObjectStore) -> AsyncIterator[ObjectStore]:
    """This process keeps blobs over LIMIT in the test's S3 prefix."""
    before = use_blob_objects(BlobObjects(object_store, LIMIT))
    yield object_store
    use_blob_objects(before)


async def orphan(objects: ObjectStore, tenant_id: uuid.UUID, value: object) -> str:
    """A value's object at its tenant's content address, no row written: an orphan."""
    data = msgspec.json.encode(value)
    key = blob_key(tenant_id, hashlib.sha256(data).hexdigest())
    await objects.put(key, data, content_type="application/json")
    return key


async def older_than(pool: asyncpg.Pool, objects: ObjectStore, key: str,
                     age: timedelta) -> bool:
    """The object's last write (the store's clock) is more than `age` before the database's
    now (the sweep's measure)."""
    [info] = [o for o in await objects.list_page(key) if o.key == key]
    async with pool.acquire() as conn:
        return bool(await conn.fetchval("SELECT $1::timestamptz < now() - $2::interval",
                                        info.last_modified, age))


async def whole_pass(pool: asyncpg.Pool, objects: ObjectStore, grace: timedelta,
                     page: int) -> tuple[int, int]:
    """One pass of the sweep in pages of `page` keys: (objects deleted, pages listed)."""
    sweep, deleted, pages = Sweep(), 0, 0
    while not sweep.passes:
        deleted += await sweep.step(pool, objects, grace, page)
        pages += 1
        assert pages < 100, "the sweep's walk does not end"
    return deleted, pages


async def test_the_sweep_deletes_only_orphans_past_their_grace(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, blobs: ObjectStore) -> None:
    one, _ = await new_tenant(pool)
    two, _ = await new_tenant(pool)
    hot = await new_job(pool, one, name="hot", payload=BIG_PAYLOAD)
    archived = await finished_run(pool, one, ended=days_ago(31), output=BIG_OUTPUT)
    assert await Archiver(app_pool, blobs, SystemClock(), ArchiveConfig(batch=50)).tick() == 1
    async with pool.acquire() as conn:
        hot_key = await conn.fetchval("SELECT object_key FROM blobs WHERE id = $1",
                                      hot.payload_ref)
        pinned = {r["object_key"] for r in await conn.fetch(
            "SELECT object_key FROM blob_objects WHERE archived_at IS NOT NULL")}
    assert hot_key is not None and len(pinned) == 1  # the archived run's output, by reference
    old = [await orphan(blobs, one, {"orphan": "a" * 2000}),
           await orphan(blobs, two, {"orphan": "b" * 2000})]
    await until(lambda: older_than(pool, blobs, old[-1], GRACE), 3 * GRACE.total_seconds(),
                "the orphans to pass their grace")
    fresh = await orphan(blobs, two, {"orphan": "c" * 2000})
    kept = [hot_key, *pinned, fresh, run_key(one, archived)]
    swept = metrics.BLOB_OBJECTS.labels(op="sweep", outcome="deleted")
    seen = swept._value.get()

    deleted, pages = await whole_pass(app_pool, blobs, GRACE, page=2)
    assert deleted == 2 and swept._value.get() == seen + 2
    assert pages >= 3  # walked page by page, across both tenants
    for key in old:
        assert not await blobs.exists(key), key
    for key in kept:
        assert await blobs.exists(key), key
    async with pool.acquire() as conn:  # the sweep's own rows went with the objects
        assert await conn.fetchval("SELECT count(*) FROM blob_objects WHERE object_key = ANY($1)",
                                   old) == 0
        assert await conn.fetchval("SELECT count(*) FROM blob_objects WHERE object_key = $1",
                                   fresh) == 0
    assert await whole_pass(app_pool, blobs, GRACE, page=1000) == (0, 1)


async def test_a_write_that_rolls_back_after_its_put_leaves_a_row_the_collector_deletes(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, blobs: ObjectStore) -> None:
    tenant_id, _ = await new_tenant(pool)
    done = await finished_run(pool, tenant_id, ended=days_ago(0.1))
    payload = {"items": ["g" * 100] * 200}  # over the events' 16 KiB: a blob
    async with pool.acquire() as conn:
        with pytest.raises(InvalidState):  # a finished run takes no signal: rolled back
            await send_signal(conn, store(), tenant_id=tenant_id, run_id=done, name="late",
                              payload=payload, actor="test", idempotency_key=None,
                              max_payload_bytes=1 << 20)
        key = blob_key(tenant_id, hashlib.sha256(msgspec.json.encode(payload)).hexdigest())
        assert await conn.fetchval("SELECT count(*) FROM blobs WHERE object_key = $1", key) == 0
        assert await conn.fetchval("SELECT count(*) FROM blob_objects WHERE object_key = $1",
                                   key) == 1  # touched before the put, on its own
    assert await blobs.exists(key)  # put before the transaction
    assert await collect_once(app_pool, blobs, timedelta(hours=1)) == 0  # within its grace
    async with pool.acquire() as conn:
        await conn.execute("UPDATE blob_objects SET touched_at = now() - interval '2 hours'")
    assert await collect_once(app_pool, blobs, timedelta(hours=1)) == 1
    assert not await blobs.exists(key)


KILLED_WRITER = textwrap.dedent("""
    import asyncio, sys, uuid
    import asyncpg
    from ostinato.eventlog.store import BlobObjects, put_blobs, use_blob_objects
    from ostinato.objects import open_object_store

    async def main(db_url, store_url, tenant_id, value):
        use_blob_objects(BlobObjects(open_object_store(store_url), 1024))
        conn = await asyncpg.connect(db_url)
        async with conn.transaction():  # no staging: the put under the transaction's locks
            await put_blobs(conn, [(uuid.uuid4(), uuid.UUID(tenant_id), value.encode())])
            print("put", flush=True)
            await asyncio.sleep(3600)  # killed here: put, never committed

    asyncio.run(main(*sys.argv[1:]))
""")


async def test_a_process_killed_between_its_put_and_its_commit_leaves_an_orphan_the_sweep_deletes(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, db_url: str) -> None:
    tenant_id, _ = await new_tenant(pool)
    prefix = f"tests/{uuid.uuid4().hex}"
    value = msgspec.json.encode({"killed": "k" * 3000}).decode()
    key = blob_key(tenant_id, hashlib.sha256(value.encode()).hexdigest())
    async with s3_store(prefix) as objects:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", KILLED_WRITER, app_url_for(database(db_url)), s3_url(prefix),
            str(tenant_id), value, stdout=asyncio.subprocess.PIPE)
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 120)
            assert line.strip() == b"put", line
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
        assert await objects.exists(key)  # confirmed by the store, never referenced
        async with pool.acquire() as conn:
            await until(lambda: _no_row(conn, key), 30, "the killed transaction's rollback")
        grace = timedelta(seconds=1)
        await until(lambda: older_than(pool, objects, key, grace), 30,
                    "the orphan to pass its grace")
        assert await whole_pass(app_pool, objects, grace, page=1000) == (1, 1)
        assert not await objects.exists(key)


async def _no_row(conn: asyncpg.Connection, key: str) -> bool:
    return not await conn.fetchval(
        "SELECT count(*) FROM blob_objects WHERE object_key = $1", key) and not \
        await conn.fetchval("SELECT count(*) FROM blobs WHERE object_key = $1", key)
