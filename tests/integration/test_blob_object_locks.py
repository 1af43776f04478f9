"""A large value's object put holds no lock of the transaction that references it (issue 38
item 4, docs/RETENTION.md "Blobs"), on the real PostgreSQL and a real S3 server of the test's
own (SeaweedFS, SIGSTOPped: it accepts the connection and never answers). While a signal's or
a job edit's put is stalled in the store, another transaction that needs the same run's or
job's row commits; the stalled one completes once the store answers, its value readable.

The order is asserted, never a duration: the second write has committed while the first is
still waiting on the stopped store (the deadline is only a give-up; the store's own timeout is
far longer). Before the put moved out of the transaction, the second waited on the row lock
until the store answered. And a put that does happen under the locks (a write not staged) is
skipped when a committed reference shows the object is in the store."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import msgspec
import pytest

from ostinato.clock import SystemClock
from ostinato.domain.ids import new_id
from ostinato.eventlog.store import BlobObjects, get_blobs, put_blobs, use_blob_objects
from ostinato.jobs import edit
from ostinato.objects import ObjectStore
from ostinato.runs.signals import send_signal
from ostinato.telemetry import metrics
from ostinato.wire import worker as p
from ostinato.wire.api import JobUpdateRequest
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.integration import dispatch, new_job, new_tenant, queued_workflow_run, store
from tests.helpers.objects import PrivateS3
from tests.helpers.waiting import until

pytestmark = pytest.mark.integration

LIMIT = 1024  # values over it go to the store
BIG_SIGNAL = {"items": ["g" * 100] * 200}  # about 20 KiB: over the events' 16 KiB, a blob
BIG_PAYLOAD = {"rows": ["p" * 100] * 30}  # about 3 KiB
GIVE_UP = 30.0  # seconds: only a give-up, the order is what is asserted
STORE_TIMEOUT = 300.0  # the stalled put's own timeout: far past the give-up


class Watched:
    """The real store, with an event set as a put begins: the test's sign that the put is
    under way (every call goes to the S3 server)."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.putting = asyncio.Event()

    async def put(self, key: str, data: bytes, *,
                  content_type: str = "application/octet-stream") -> None:
        self.putting.set()
        await self.inner.put(key, data, content_type=content_type)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@asynccontextmanager
async def stalled_store(private_s3: PrivateS3) -> AsyncIterator[Watched]:
    """This process's blobs over LIMIT go to the private S3 server, which is then stopped
    (SIGSTOP); resumed and closed afterwards."""
    objects = Watched(private_s3.store("blobs", timeout=STORE_TIMEOUT))
    before = use_blob_objects(BlobObjects(objects, LIMIT))  # type: ignore[arg-type]
    try:
        await objects.inner.exists("warm")  # the bucket made while the server answers
        private_s3.pause()
        yield objects
    finally:
        private_s3.resume()
        use_blob_objects(before)
        await objects.inner.close()


async def second_commits_while_first_put_stalls(
        private_s3: PrivateS3, first: Callable[[], Awaitable[Any]],
        second: Callable[[], Awaitable[Any]]) -> Any:
    """Run `first` (a large value: its put stalls), then `second` (the same row, no put);
    assert `second` ends while `first` still waits on the store; then let the store answer
    and return `first`'s result."""
    async with stalled_store(private_s3) as objects:
        stalled = asyncio.create_task(first())
        other: asyncio.Task[Any] | None = None
        try:
            await until(lambda: _true(objects.putting.is_set() or stalled.done()), GIVE_UP,
                        "the large value's put to begin")
            assert not stalled.done(), stalled.exception()
            other = asyncio.create_task(second())
            await asyncio.wait({other, stalled}, timeout=GIVE_UP,
                               return_when=asyncio.FIRST_COMPLETED)
            assert other.done(), "the other write waited for the stalled put (a lock held)"
            other.result()  # committed, not failed
            assert not stalled.done(), "the put did not stall: the test proved nothing"
            private_s3.resume()
            return await asyncio.wait_for(stalled, GIVE_UP * 4)
        finally:
            for task in (stalled, other):
                if task is not None and not task.done():
                    private_s3.resume()
                    await asyncio.wait({task}, timeout=GIVE_UP * 4)


async def _true(value: bool) -> bool:
    return value


async def test_a_signals_stalled_put_holds_no_lock_on_its_run(
        pool: asyncpg.Pool, private_s3: PrivateS3) -> None:
    tenant_id, _ = await new_tenant(pool)
    run_id = await queued_workflow_run(pool, tenant_id, "locks.signalled")

    async def signal(name: str, payload: Any) -> Any:
        async with pool.acquire() as conn:
            return await send_signal(conn, store(), tenant_id=tenant_id, run_id=run_id,
                                     name=name, payload=payload, actor="test",
                                     idempotency_key=None, max_payload_bytes=1 << 20)

    big = await second_commits_while_first_put_stalls(
        private_s3, lambda: signal("big", BIG_SIGNAL), lambda: signal("small", {"n": 1}))
    assert big.created
    async with pool.acquire() as conn:
        rows = {r["name"]: r["payload_ref"] for r in await conn.fetch(
            "SELECT name, payload_ref FROM run_signals WHERE run_id = $1", run_id)}
        assert set(rows) == {"big", "small"} and rows["big"] is not None
        objects = BlobObjects(private_s3.store("blobs"), LIMIT)
        before = use_blob_objects(objects)
        try:
            assert (await get_blobs(conn, [rows["big"]], tenant_id))[rows["big"]] == BIG_SIGNAL
        finally:
            use_blob_objects(before)
            await objects.store.close()


async def test_a_job_edits_stalled_put_holds_no_lock_on_its_job(
        pool: asyncpg.Pool, private_s3: PrivateS3) -> None:
    tenant_id, _ = await new_tenant(pool)
    job = await new_job(pool, tenant_id, name="locks.edited", payload={"n": 0})

    async def patch(change: JobUpdateRequest) -> edit.Edited:
        async with pool.acquire() as conn:
            return await edit.update_job(conn, store(), SystemClock(), tenant_id=tenant_id,
                                         job_id=job.id, patch=change, actor="test",
                                         pools=[job.pool], classes=["default", "bulk"],
                                         max_payload_bytes=1 << 20)

    done = await second_commits_while_first_put_stalls(
        private_s3, lambda: patch(JobUpdateRequest(payload=BIG_PAYLOAD)),
        lambda: patch(JobUpdateRequest(priority="bulk")))
    assert "payload" in done.changed
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT j.priority, b.sha256 FROM jobs j JOIN blobs b "
                                  "ON b.id = j.payload_ref WHERE j.id = $1", job.id)
    assert row["priority"] == "bulk" and row["sha256"] is not None  # both edits recorded


async def test_a_put_under_a_lock_is_skipped_when_a_committed_reference_vouches_for_it(
        pool: asyncpg.Pool, object_store: ObjectStore) -> None:
    """A write that was not staged (a child's output copied to its parent's step record, a
    DAG node's payload) puts under its transaction's locks only what no committed reference
    shows is already in the store."""
    tenant_id, _ = await new_tenant(pool)
    before = use_blob_objects(BlobObjects(object_store, LIMIT))
    reused = metrics.BLOB_OBJECTS.labels(op="put", outcome="reused")
    locked = metrics.BLOB_OBJECTS.labels(op="put", outcome="stored_in_transaction")
    try:
        await new_job(pool, tenant_id, name="referenced", payload=BIG_PAYLOAD)
        seen = reused._value.get(), locked._value.get()
        async with pool.acquire() as conn, conn.transaction():
            await put_blobs(conn, [(new_id(), tenant_id, msgspec.json.encode(BIG_PAYLOAD))])
        assert (reused._value.get(), locked._value.get()) == (seen[0] + 1, seen[1])
        other = {"nothing": "x" * 2000}
        async with pool.acquire() as conn, conn.transaction():
            await put_blobs(conn, [(new_id(), tenant_id, msgspec.json.encode(other))])
        assert (reused._value.get(), locked._value.get()) == (seen[0] + 1, seen[1] + 1)
        async with pool.acquire() as conn:
            keys = [r["object_key"] for r in await conn.fetch(
                "SELECT object_key FROM blobs WHERE tenant_id = $1 AND sha256 IS NOT NULL",
                tenant_id)]
        assert len(keys) == 3 and len(set(keys)) == 2
        for key in keys:
            assert await object_store.exists(key), key
    finally:
        use_blob_objects(before)


async def test_a_workers_stalled_output_put_holds_no_lock_on_its_run(
        pool: asyncpg.Pool, private_s3: PrivateS3) -> None:
    """The worker-gateway puts what a report keeps in the store (its bytes as the report
    encodes them) before the report's transaction locks the runs."""
    tenant_id, _ = await new_tenant(pool)
    await new_job(pool, tenant_id, name="reported")
    assert len(await fire_due(pool, store(), SystemClock())) == 1
    assert await dispatch(pool) == 1
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=300)
    [claimed] = await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w1", max_runs=1))
    run_id = uuid.UUID(claimed.run_id)
    logs = [p.LogLine(t=0.1 * i, level="info", message="l" * 80) for i in range(30)]
    staged = metrics.BLOB_OBJECTS.labels(op="put", outcome="stored")
    seen = staged._value.get()

    async def report() -> list[p.BatchItemResult]:
        return await attempts.record(tenant_id, "w1", [Outcome(
            run_id, claimed.run_id, claimed.fencing_token, "complete",
            output={"report": "o" * 3000}, logs=logs)])

    async def signal() -> Any:  # needs the run's row
        async with pool.acquire() as conn:
            return await send_signal(conn, store(), tenant_id=tenant_id, run_id=run_id,
                                     name="meanwhile", payload={"n": 1}, actor="test",
                                     idempotency_key=None, max_payload_bytes=1 << 20)

    [done] = await second_commits_while_first_put_stalls(private_s3, report, signal)
    assert done.status == 200
    assert staged._value.get() == seen + 2  # output and logs, both before the transaction
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT state, output_ref, logs_ref FROM runs WHERE id = $1",
                                  run_id)
        assert row["state"] == "succeeded" and row["output_ref"] and row["logs_ref"]
        assert await conn.fetchval("SELECT count(*) FROM run_signals WHERE run_id = $1",
                                   run_id) == 1
