"""Blobs in object storage (issue 38 item 4, docs/RETENTION.md "Blobs"), on the real PostgreSQL
and the real S3 server (SeaweedFS, tests/helpers/objects.py): a large payload, output, captured
log, signal payload and step output round trip through the API and the worker-gateway with the
value in S3 under its tenant's content address and only the reference in PostgreSQL; small
values stay inline; the store stopped is a 503 with Retry-After and nothing written; an object
gone or replaced is a 424 `blob-unreadable`, counted; another tenant never reads it; the
archiver keeps references (not copies) and pins their objects, and the collector deletes only
objects nothing references, once untouched for the grace period."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from ostinato.archive import blob_key, decode_run, run_key, tenant_prefix
from ostinato.archive.blobs import REFERENCE_FIELD
from ostinato.clock import SystemClock
from ostinato.db.pool import create_pool
from ostinato.eventlog.store import BlobObjects, get_blobs, use_blob_objects
from ostinato.objects import ObjectStore
from ostinato.runs import retention as retention_commands
from ostinato.sdk import WorkflowContext, workflow
from ostinato.telemetry import metrics
from ostinato.wire import worker as p
from services.reconciler.checks.archive import ArchiveConfig, Archiver
from services.reconciler.checks.blob_objects import collect_once
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.api import assert_problem, auth
from tests.helpers.archives import api
from tests.helpers.env import app_url_for
from tests.helpers.expired_runs import days_ago, finished_run
from tests.helpers.integration import (
    dispatch,
    new_job,
    new_tenant,
    queued_workflow_run,
    run_row,
    store,
)
from tests.helpers.objects import PrivateS3
from tests.helpers.privileges import database
from tests.helpers.workflows import work_until

pytestmark = pytest.mark.integration

LIMIT = 1024  # the tests' inline limit: values over it go to S3
BIG_PAYLOAD = {"rows": [f"row {i} " + "p" * 60 for i in range(40)]}  # about 3 KiB
BIG_OUTPUT = {"report": "o" * 6000}
SMALL = {"n": 1}


@asynccontextmanager
async def blobs_in(objects: ObjectStore, limit: int = LIMIT) -> AsyncIterator[None]:
    """This process keeps blobs over `limit` in `objects` (as each service does from its
    settings at start), as before afterwards."""
    before = use_blob_objects(BlobObjects(objects, limit))
    try:
        yield
    finally:
        use_blob_objects(before)


@pytest.fixture
async def app_pool(db_url: str) -> AsyncIterator[asyncpg.Pool]:
    """The services' role (the archiver and the collector run as it)."""
    pool = await create_pool(app_url_for(database(db_url)), max_size=4)
    yield pool
    await pool.close()


async def blob_row(pool: asyncpg.Pool, blob_id: uuid.UUID) -> asyncpg.Record:
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT tenant_id, kind, data::text AS data, size_bytes,"
                                  " sha256, object_key FROM blobs WHERE id = $1", blob_id)
    assert row is not None, blob_id
    return row


async def assert_in_s3(pool: asyncpg.Pool, objects: ObjectStore, blob_id: uuid.UUID,
                       value: Any) -> str:
    """The blob's value is in S3 under its tenant's content address, and PostgreSQL holds only
    the reference; returns the key."""
    row = await blob_row(pool, blob_id)
    assert row["sha256"] is not None, "kept inline"
    data = await objects.get(row["object_key"])  # S3: the value's bytes
    assert msgspec.json.decode(data) == value
    digest = hashlib.sha256(data).hexdigest()
    assert row["sha256"] == digest and row["size_bytes"] == len(data) > LIMIT
    assert row["object_key"] == blob_key(row["tenant_id"], digest)
    assert row["object_key"].startswith(tenant_prefix(row["tenant_id"]))
    # PostgreSQL: the reference document, never the value
    assert msgspec.json.decode(row["data"]) == {REFERENCE_FIELD: {
        "key": row["object_key"], "sha256": digest, "size": len(data)}}
    assert len(row["data"]) < 300
    return row["object_key"]


async def assert_inline(pool: asyncpg.Pool, blob_id: uuid.UUID, value: Any) -> None:
    row = await blob_row(pool, blob_id)
    assert row["sha256"] is None and row["object_key"] is None
    assert msgspec.json.decode(row["data"]) == value


async def claim_all(pool: asyncpg.Pool, tenant_id: uuid.UUID, count: int = 1
                    ) -> tuple[Attempts, list[p.ClaimedRun]]:
    """The runs of the tenant's `count` due jobs, created, queued and claimed."""
    assert len(await fire_due(pool, store(), SystemClock())) == count
    assert await dispatch(pool) == count
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    claimed = await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w1", max_runs=5))
    assert len(claimed) == count
    return attempts, claimed


async def test_a_large_payload_output_and_log_live_in_s3_and_small_ones_inline(
        pool: asyncpg.Pool, db_url: str, object_store: ObjectStore) -> None:
    tenant_id, key = await new_tenant(pool)
    logs = [p.LogLine(t=0.1 * i, level="info", message=f"line {i} " + "l" * 80)
            for i in range(30)]
    async with blobs_in(object_store), api(pool, db_url, object_store) as client:
        r = await client.post("/v1/jobs", json={"name": "big", "payload": BIG_PAYLOAD},
                              headers=auth(key))
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        attempts, [claimed] = await claim_all(pool, tenant_id)
        assert claimed.payload == BIG_PAYLOAD  # the worker gets the value, read from S3
        run_id = uuid.UUID(claimed.run_id)
        [done] = await attempts.record(tenant_id, "w1", [Outcome(
            run_id, claimed.run_id, claimed.fencing_token, "complete", output=BIG_OUTPUT,
            logs=logs)])
        assert done.status == 200

        run = (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()
        assert run["output"] == BIG_OUTPUT and run["payload"] == BIG_PAYLOAD
        job = (await client.get(f"/v1/jobs/{job_id}", headers=auth(key))).json()
        assert job["payload"] == BIG_PAYLOAD
        lines = (await client.get(f"/v1/runs/{run_id}/logs", headers=auth(key))).json()
        assert [line["message"] for line in lines["items"]] == [line.message for line in logs]

        row = await run_row(pool, tenant_id, run_id)
        assert row.output_ref and row.logs_ref
        payload_key = await assert_in_s3(pool, object_store, row.payload_ref, BIG_PAYLOAD)
        await assert_in_s3(pool, object_store, row.output_ref, BIG_OUTPUT)
        await assert_in_s3(pool, object_store, row.logs_ref,
                           [msgspec.to_builtins(line) for line in logs])

        # the same payload again: one object, two references (content addressing)
        r = await client.post("/v1/jobs", json={"name": "big-again", "payload": BIG_PAYLOAD},
                              headers=auth(key))
        assert r.status_code == 201, r.text
        async with pool.acquire() as conn:
            again = await conn.fetchval("SELECT payload_ref FROM jobs WHERE id = $1",
                                        uuid.UUID(r.json()["id"]))
        assert await assert_in_s3(pool, object_store, again, BIG_PAYLOAD) == payload_key
        assert [k async for k in object_store.list(f"{tenant_prefix(tenant_id)}blobs/")] == \
            sorted([payload_key, (await blob_row(pool, row.output_ref))["object_key"],
                    (await blob_row(pool, row.logs_ref))["object_key"]])

        # small values stay inline: no object, no object row
        r = await client.post("/v1/jobs", json={"name": "small", "payload": SMALL},
                              headers=auth(key))
        assert r.status_code == 201, r.text
        attempts, both = await claim_all(pool, tenant_id, 2)  # "big-again"'s run too
        [claimed] = [c for c in both if c.payload == SMALL]
        assert [c.payload for c in both if c is not claimed] == [BIG_PAYLOAD]
        small_run = uuid.UUID(claimed.run_id)
        await attempts.record(tenant_id, "w1", [Outcome(
            small_run, claimed.run_id, claimed.fencing_token, "complete", output={"ok": 1})])
        small = await run_row(pool, tenant_id, small_run)
        await assert_inline(pool, small.payload_ref, SMALL)
        assert small.output_ref is not None
        await assert_inline(pool, small.output_ref, {"ok": 1})
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM blob_objects WHERE tenant_id = $1",
                                       tenant_id) == 3


@workflow("blobs.echo")
async def echo(ctx: WorkflowContext, payload: Any) -> Any:
    await ctx.step("big", lambda: "s" * 20_000)  # over the events' inline limit: a blob
    return await ctx.wait_for_signal("go")


async def test_a_large_signal_payload_and_step_output_live_in_s3(
        pool: asyncpg.Pool, db_url: str, gateway: httpx.AsyncClient,
        object_store: ObjectStore) -> None:
    tenant_id, key = await new_tenant(pool)
    signal = {"items": ["g" * 100] * 200}  # about 20 KiB: kept out of the event, in a blob
    async with blobs_in(object_store), api(pool, db_url, object_store) as client:
        run_id = await queued_workflow_run(pool, tenant_id, "blobs.echo")
        r = await client.post(f"/v1/runs/{run_id}/signals/go", json=signal, headers=auth(key))
        assert r.status_code == 202, r.text
        await work_until(pool, gateway, key, echo, tenant_id, run_id, "succeeded")

        run = (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()
        assert run["output"] == signal  # the workflow got the payload from S3
        steps = (await client.get(f"/v1/runs/{run_id}/steps?inline_outputs=true",
                                  headers=auth(key))).json()
        assert [s["output"] for s in steps["items"] if s["name"] == "big"] == ["s" * 20_000]
        async with pool.acquire() as conn:
            signal_ref = await conn.fetchval(
                "SELECT payload_ref FROM run_signals WHERE run_id = $1", run_id)
            step_ref = await conn.fetchval(
                "SELECT output_ref FROM run_steps WHERE run_id = $1 AND name = 'big'", run_id)
        await assert_in_s3(pool, object_store, signal_ref, signal)
        await assert_in_s3(pool, object_store, step_ref, "s" * 20_000)
        await assert_in_s3(pool, object_store, (await run_row(pool, tenant_id, run_id)).output_ref,
                           signal)


async def counts(pool: asyncpg.Pool) -> tuple[int, ...]:
    async with pool.acquire() as conn:
        return tuple([await conn.fetchval(f"SELECT count(*) FROM {table}")
                      for table in ("jobs", "runs", "blobs", "blob_objects", "events")])


async def test_the_store_stopped_is_a_503_and_nothing_is_written(
        pool: asyncpg.Pool, db_url: str, private_s3: PrivateS3) -> None:
    _, key = await new_tenant(pool)
    objects = private_s3.store("blobs", timeout=2)
    try:
        async with blobs_in(objects), api(pool, db_url, objects) as client:
            await private_s3.stop()
            before = await counts(pool)
            r = await client.post("/v1/jobs", json={"name": "big", "payload": BIG_PAYLOAD},
                                  headers=auth(key))
            body = assert_problem(r, 503)
            assert body["type"].endswith("/service-unavailable") and "retry-after" in r.headers
            assert await counts(pool) == before  # nothing accepted by half
            r = await client.post("/v1/jobs", json={"name": "small", "payload": SMALL},
                                  headers=auth(key))
            assert r.status_code == 201, r.text  # inline values need no object store
            await private_s3.start()
            r = await client.post("/v1/jobs", json={"name": "big", "payload": BIG_PAYLOAD},
                                  headers=auth(key))
            assert r.status_code == 201, r.text
    finally:
        await objects.close()


async def test_an_object_gone_or_replaced_is_a_clear_problem_and_counted(
        pool: asyncpg.Pool, db_url: str, object_store: ObjectStore) -> None:
    _, key = await new_tenant(pool)
    unreadable = metrics.BLOB_OBJECTS.labels(op="get", outcome="unreadable")
    async with blobs_in(object_store), api(pool, db_url, object_store) as client:
        r = await client.post("/v1/jobs", json={"name": "big", "payload": BIG_PAYLOAD},
                              headers=auth(key))
        job_id = r.json()["id"]
        async with pool.acquire() as conn:
            ref = await conn.fetchval("SELECT payload_ref FROM jobs WHERE id = $1",
                                      uuid.UUID(job_id))
        object_key = await assert_in_s3(pool, object_store, ref, BIG_PAYLOAD)
        data = await object_store.get(object_key)
        for fault in (b"", data[:-3] + b"  }", data[:-1]):  # gone, replaced, torn
            if fault:
                await object_store.put(object_key, fault)
            else:
                await object_store.delete(object_key)
            seen = unreadable._value.get()
            r = await client.get(f"/v1/jobs/{job_id}", headers=auth(key))
            body = assert_problem(r, 424)
            assert body["type"].endswith("/blob-unreadable") and object_key in body["detail"]
            assert unreadable._value.get() == seen + 1
        await object_store.put(object_key, data)  # restored by an operator
        r = await client.get(f"/v1/jobs/{job_id}", headers=auth(key))
        assert r.status_code == 200 and r.json()["payload"] == BIG_PAYLOAD


async def test_a_claim_leaves_a_run_whose_payload_cannot_be_read_queued_and_hands_out_others(
        pool: asyncpg.Pool, object_store: ObjectStore) -> None:
    tenant_id, _ = await new_tenant(pool)
    async with blobs_in(object_store):
        poisoned = await new_job(pool, tenant_id, name="big", payload=BIG_PAYLOAD)
        object_key = await assert_in_s3(pool, object_store, poisoned.payload_ref, BIG_PAYLOAD)
        data = await object_store.get(object_key)
        await object_store.delete(object_key)
        await new_job(pool, tenant_id, name="small", payload=SMALL)
        assert len(await fire_due(pool, store(), SystemClock())) == 2
        assert await dispatch(pool) == 2
        attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
        claimed = await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w1", max_runs=5))
        assert [c.payload for c in claimed] == [SMALL]  # the other run is not held up
        async with pool.acquire() as conn:
            left = await conn.fetch("SELECT state FROM runs WHERE job_id = $1", poisoned.id)
        assert [r["state"] for r in left] == ["queued"]  # waits for its payload, not lost
        await object_store.put(object_key, data)  # restored
        [again] = await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w1", max_runs=5))
        assert again.payload == BIG_PAYLOAD


async def test_another_tenant_never_reads_a_tenants_blob(
        pool: asyncpg.Pool, db_url: str, object_store: ObjectStore) -> None:
    (one, one_key), (other, other_key) = await new_tenant(pool), await new_tenant(pool)
    async with blobs_in(object_store), api(pool, db_url, object_store) as client:
        ids = []
        for k in (one_key, other_key):  # the same value: one object each, under each tenant
            r = await client.post("/v1/jobs", json={"name": "big", "payload": BIG_PAYLOAD},
                                  headers=auth(k))
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        async with pool.acquire() as conn:
            refs = [await conn.fetchval("SELECT payload_ref FROM jobs WHERE id = $1",
                                        uuid.UUID(i)) for i in ids]
            assert await get_blobs(conn, [refs[0]], other) == {}  # a tenant-scoped read
        keys = [await assert_in_s3(pool, object_store, ref, BIG_PAYLOAD) for ref in refs]
        assert keys[0] != keys[1]
        assert keys[0].startswith(tenant_prefix(one)) and keys[1].startswith(tenant_prefix(other))
        r = await client.get(f"/v1/jobs/{ids[0]}", headers=auth(other_key))
        assert_problem(r, 404)


async def test_archived_runs_keep_references_and_the_collector_deletes_only_unreferenced(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, db_url: str,
        object_store: ObjectStore) -> None:
    kept_tenant, kept_key = await new_tenant(pool)
    dropping, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        await retention_commands.set_retention(conn, store(), tenant_id=dropping, keep="1d",
                                               archive=False, actor="admin")
    shared_output = {"shared": "x" * 3000}
    own_output = {"own": "y" * 3000}
    async with blobs_in(object_store):
        archived = await finished_run(pool, kept_tenant, ended=days_ago(31),
                                      output=BIG_OUTPUT, payload=BIG_PAYLOAD)
        dropped = await finished_run(pool, dropping, ended=days_ago(2), output=own_output)
        shared_gone = await finished_run(pool, dropping, ended=days_ago(2),
                                         output=shared_output)
        shared_hot = await finished_run(pool, dropping, ended=days_ago(0.1),
                                        output=shared_output)
        refs = {r: await run_row(pool, t, r) for t, r in (
            (kept_tenant, archived), (dropping, dropped), (dropping, shared_gone),
            (dropping, shared_hot))}
        keys = {r: (await blob_row(pool, row.output_ref))["object_key"]
                for r, row in refs.items()}
        payload_key = (await blob_row(pool, refs[archived].payload_ref))["object_key"]
        assert keys[shared_gone] == keys[shared_hot]

        archiver = Archiver(app_pool, object_store, SystemClock(), ArchiveConfig(batch=50))
        assert await archiver.tick() == 3
        doc = decode_run(await object_store.get(run_key(kept_tenant, archived)))
        by_kind = {b.kind: b for b in doc.blobs}
        for kind, object_key in (("output", keys[archived]), ("payload", payload_key)):
            assert by_kind[kind].data is None and by_kind[kind].ref is not None
            assert by_kind[kind].ref.key == object_key  # a reference, never a copy
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM blobs WHERE id = $1",
                                       refs[archived].output_ref) == 0  # left the hot tables
            pinned = {r["object_key"] for r in await conn.fetch(
                "SELECT object_key FROM blob_objects WHERE archived_at IS NOT NULL")}
        assert pinned == {keys[archived], payload_key}
        async with api(pool, db_url, object_store) as client:  # read through the reference
            run = (await client.get(f"/v1/runs/{archived}", headers=auth(kept_key))).json()
        assert run["archived"] is True and run["output"] == BIG_OUTPUT
        assert run["payload"] == BIG_PAYLOAD

        async with pool.acquire() as conn:  # every object past its grace but one
            await conn.execute("UPDATE blob_objects SET touched_at = now() - interval '2 hours'")
            await conn.execute("UPDATE blob_objects SET touched_at = now() WHERE object_key = $1",
                               keys[dropped])
        assert await collect_once(app_pool, object_store, timedelta(hours=1)) == 0  # in grace
        async with pool.acquire() as conn:
            await conn.execute("UPDATE blob_objects SET touched_at = now() - interval '2 hours'")
        assert await collect_once(app_pool, object_store, timedelta(hours=1)) == 1
        assert not await object_store.exists(keys[dropped])  # nothing referenced it
        for still in (keys[archived], payload_key, keys[shared_hot]):  # archive, hot row
            assert await object_store.exists(still), still
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM blob_objects WHERE object_key = $1",
                                       keys[dropped]) == 0
        assert await collect_once(app_pool, object_store, timedelta(hours=1)) == 0
