"""The archiver duty (services/reconciler/checks/archive.py) against the real S3 server
(SeaweedFS, tests/helpers/objects.py) and the real PostgreSQL, connected as the services' role:
archive then remove, read back (every event in order, equal to what the log held); a tenant
that says archive=false loses its runs without an object; the store stopped or frozen removes
nothing and archiving resumes when it is back; a reconciler process killed -9 between its puts
and the removal loses no run, leaves none half-removed, and archives them again the same way."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import asyncpg
import msgspec
import pytest

from ostinato.archive import (
    decode_index,
    decode_run,
    index_prefix,
    run_key,
    tenant_prefix,
)
from ostinato.clock import SystemClock
from ostinato.db.pool import create_pool
from ostinato.objects import ObjectStore, ObjectStoreUnavailable, open_object_store
from ostinato.runs import retention as retention_commands
from ostinato.runtime.duties import transient
from ostinato.stores import archive as archive_store
from services.reconciler.checks.archive import ArchiveConfig, Archiver
from tests.helpers.env import KAFKA_BOOTSTRAP, app_url_for
from tests.helpers.expired_runs import days_ago, finished_run
from tests.helpers.integration import new_tenant, store
from tests.helpers.lab.cluster import Cluster
from tests.helpers.objects import PrivateS3, empty, s3_url
from tests.helpers.privileges import database

pytestmark = pytest.mark.integration


@pytest.fixture
async def app_pool(db_url: str) -> AsyncIterator[asyncpg.Pool]:
    """The archiver's pool, as the services' role (the procedure is all it may use)."""
    p = await create_pool(app_url_for(database(db_url)), max_size=4)
    yield p
    await p.close()


async def log_of(pool: asyncpg.Pool, run_id: uuid.UUID) -> list[dict]:
    """The run's stream as the log holds it, the data as its JSON text."""
    async with pool.acquire() as conn:
        return [dict(r) for r in await conn.fetch(
            "SELECT seq, version, type, data::text AS data, actor, epoch, traceparent,"
            " occurred_at, recorded_at, event_id FROM events WHERE stream_id = $1"
            " ORDER BY version", run_id)]


def archived_log(document: object) -> list[dict]:
    return [{"seq": e.seq, "version": e.version, "type": e.type, "data": e.data,
             "actor": e.actor, "epoch": e.epoch, "traceparent": e.traceparent,
             "occurred_at": e.occurred_at, "recorded_at": e.recorded_at,
             "event_id": e.event_id} for e in document.events]  # type: ignore[attr-defined]


def decoded(rows: list[dict]) -> list[dict]:
    return [{**r, "data": msgspec.json.decode(r["data"])} for r in rows]


async def hot(pool: asyncpg.Pool, ids: list[uuid.UUID]) -> tuple[int, int]:
    """(runs rows, events) of these runs still in the hot tables."""
    async with pool.acquire() as conn:
        return (await conn.fetchval("SELECT count(*) FROM runs WHERE id = ANY($1)", ids),
                await conn.fetchval("SELECT count(*) FROM events WHERE stream_id = ANY($1)",
                                    ids))


async def test_archive_then_remove_and_read_back_every_event(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, object_store: ObjectStore) -> None:
    tenant_id, _ = await new_tenant(pool)
    no_archive, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        await retention_commands.set_retention(conn, store(), tenant_id=no_archive, keep="1d",
                                               archive=False, actor="admin")
    archived = [await finished_run(pool, tenant_id, ended=days_ago(31 + i),
                                   output={"i": i, "text": "é ✓"}) for i in range(3)]
    archived.append(await finished_run(pool, tenant_id, ended=days_ago(35), succeed=False))
    async with pool.acquire() as conn:  # a triaged dead letter may go
        await conn.execute("UPDATE dead_letters SET triage_state = 'resolved', triaged_at ="
                           " now() - interval '32 days' WHERE run_id = $1", archived[-1])
    dropped = await finished_run(pool, tenant_id=no_archive, ended=days_ago(2))
    young = await finished_run(pool, tenant_id, ended=days_ago(1))
    logs = {r: await log_of(pool, r) for r in [*archived, dropped, young]}
    async with pool.acquire() as conn:
        rows = {r["id"]: r["row"] for r in await conn.fetch(
            "SELECT id, to_json(runs)::text AS row FROM runs WHERE id = ANY($1)", archived)}

    archiver = Archiver(app_pool, object_store, SystemClock(), ArchiveConfig(batch=50))
    assert await archiver.tick() == 5
    assert await hot(pool, [*archived, dropped]) == (0, 0)
    assert (await hot(pool, [young]))[0] == 1
    for run_id in archived:
        key = run_key(tenant_id, run_id)
        doc = decode_run(await object_store.get(key), key=key)
        assert archived_log(doc) == decoded(logs[run_id])  # every event, in order, as held
        assert doc.run == msgspec.json.decode(rows[run_id])  # the runs row as it stood
        assert doc.job is not None and doc.job["kind"] == "at" and doc.job_events
        assert {b.kind for b in doc.blobs} >= {"payload"}
    assert not await object_store.exists(run_key(no_archive, dropped))
    assert [k async for k in object_store.list(tenant_prefix(no_archive))] == []
    listed = set()
    async for key in object_store.list(index_prefix(tenant_id)):
        listed |= {row.id for row in decode_index(await object_store.get(key), key=key).rows}
    assert listed == set(archived)
    async with app_pool.acquire() as conn:
        health = await archive_store.health(conn)
    assert health is not None and health.failing_since is None and health.last_success_at
    assert await archiver.tick() == 0  # nothing left to do


async def test_two_archivers_never_take_the_same_batch(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, object_store: ObjectStore) -> None:
    """The advisory lock: while one pass holds it, another archiver's pass does nothing."""
    tenant_id, _ = await new_tenant(pool)
    run_id = await finished_run(pool, tenant_id, ended=days_ago(40))
    first = Archiver(app_pool, object_store, SystemClock(), ArchiveConfig())
    second = Archiver(app_pool, object_store, SystemClock(), ArchiveConfig())
    async with first._lock() as held:
        assert held is not None
        assert await second.tick() == 0
        assert (await hot(pool, [run_id]))[0] == 1
    assert await second.tick() == 1
    assert (await hot(pool, [run_id]))[0] == 0


async def test_the_store_frozen_or_stopped_removes_nothing_and_archiving_resumes(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, private_s3: PrivateS3) -> None:
    tenant_id, _ = await new_tenant(pool)
    runs = [await finished_run(pool, tenant_id, ended=days_ago(40)) for _ in range(3)]
    before = await hot(pool, runs)
    objects = private_s3.store("archive", timeout=2)
    archiver = Archiver(app_pool, objects, SystemClock(),
                        ArchiveConfig(put_timeout=timedelta(seconds=2)))
    try:
        for fault, heal in ((private_s3.pause, private_s3.resume),
                            (private_s3.stop, private_s3.start)):
            outcome = fault()
            if asyncio.iscoroutine(outcome):
                await outcome
            with pytest.raises(ObjectStoreUnavailable) as caught:
                await archiver.tick()
            assert transient(caught.value)  # the duty retries it with backoff
            assert await hot(pool, runs) == before  # nothing removed
            async with app_pool.acquire() as conn:
                health = await archive_store.health(conn)
            assert health is not None and health.failing_since is not None
            assert "ObjectStoreUnavailable" in (health.last_error or "")
            outcome = heal()
            if asyncio.iscoroutine(outcome):
                await outcome
        assert await archiver.tick() == 3
        assert await hot(pool, runs) == (0, 0)
        for run_id in runs:
            key = run_key(tenant_id, run_id)
            assert decode_run(await objects.get(key), key=key).run_id == run_id
        async with app_pool.acquire() as conn:
            health = await archive_store.health(conn)
        assert health is not None and health.failing_since is None
    finally:
        await objects.close()


async def _until(predicate: object, what: str, seconds: float = 120) -> None:
    """Poll an async predicate; a give-up deadline only."""
    deadline = time.monotonic() + seconds
    while not await predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.2)


async def test_a_reconciler_killed_between_its_puts_and_the_removal_loses_nothing(
        pool: asyncpg.Pool, db_url: str, topic_prefix: str, tmp_path: Path) -> None:
    """A real reconciler process: its pass blocked inside the removal procedure (every put
    confirmed before it is called; a test transaction holds the lock the procedure needs),
    then killed -9. Its transaction dies with it: every run still hot, whole. Restarted, it
    archives them again (the same objects but for archived_at, the same index keys) and
    removes them."""
    tenant_id, _ = await new_tenant(pool)
    runs = [await finished_run(pool, tenant_id, ended=days_ago(40)) for _ in range(12)]
    before = await hot(pool, runs)
    prefix = f"tests/{uuid.uuid4().hex}"
    objects = open_object_store(s3_url(prefix))
    cluster = Cluster(database_url=app_url_for(database(db_url)),
                      kafka_bootstrap=KAFKA_BOOTSTRAP, topic_prefix=topic_prefix,
                      log_dir=tmp_path / "logs",
                      extra_env={"OSTINATO_OBJECT_STORE_URL": s3_url(prefix),
                                 "OSTINATO_ARCHIVE_BATCH": "50",
                                 "OSTINATO_ARCHIVE_INTERVAL_SECONDS": "0.2"})
    blocker = await pool.acquire()
    try:
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("LOCK TABLE usage_carried IN ACCESS EXCLUSIVE MODE")
        await asyncio.to_thread(cluster.start, ("reconciler",))

        async def removal_blocked() -> bool:
            async with pool.acquire() as conn:
                return bool(await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE '%ostinato_remove_runs%'"))

        await _until(removal_blocked, "the reconciler's removal never started")
        first = {r: await objects.get(run_key(tenant_id, r)) for r in runs}  # all confirmed
        first_index = sorted([k async for k in objects.list(index_prefix(tenant_id))])
        await asyncio.to_thread(cluster.kill, "reconciler")
        await tx.rollback()
        assert await hot(pool, runs) == before  # none removed, none half-removed

        async def all_removed() -> bool:
            return await hot(pool, runs) == (0, 0)

        await asyncio.to_thread(cluster.spawn, "reconciler-2", "reconciler")
        await _until(all_removed, "the restarted reconciler did not remove the runs")
        for run_id in runs:
            key = run_key(tenant_id, run_id)
            again = decode_run(await objects.get(key), key=key)
            earlier = decode_run(first[run_id], key=key)
            assert msgspec.structs.replace(again, archived_at=earlier.archived_at) == earlier
        assert sorted([k async for k in objects.list(index_prefix(tenant_id))]) == first_index
    finally:
        await pool.release(blocker)
        await asyncio.to_thread(cluster.stop)
        await empty(objects)
        await objects.close()
