"""Shared workers over the worker-gateway's HTTP routes and the real PostgreSQL: a worker with
the admin key serves every tenant's runs (events and blobs tagged with each run's tenant), a
tenant's worker still sees only its tenant's runs, both appear in the worker registry, and a
goodbye removes a worker at once. Runs are queued by appending `RunQueued` through the event
store, as the dispatcher does, so these tests do not depend on how it decides."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from ostinato.clock import SystemClock
from ostinato.domain import events as ev
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import get_blobs, read_stream
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.stores.runs import Q as RUNS
from ostinato.wire import worker as p
from ostinato.workers import registry
from services.scheduler.tick import fire_due
from services.worker_gateway.app import create_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.wakeups import ReadySignals
from tests.helpers.api import ADMIN, auth
from tests.helpers.integration import dispatch, new_job, new_tenant, runs_of, store

pytestmark = pytest.mark.integration


@pytest.fixture
async def gateway(pool: asyncpg.Pool, db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    service = Service("worker-gateway", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    transport = httpx.ASGITransport(app=create_app(service, attempts, ReadySignals()))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as c:
        yield c


async def queued_run(pool: asyncpg.Pool, tenant_id: uuid.UUID, payload: Any) -> uuid.UUID:
    """A job due now, its run created by the scheduler's code and queued as the dispatcher
    would."""
    job = await new_job(pool, tenant_id, payload=payload)
    await fire_due(pool, store(), SystemClock())
    async with pool.acquire() as conn, conn.transaction():
        [run] = await conn.fetch(RUNS["list_runs"], tenant_id, job.id, "scheduled", None, None,
                                 10)
        await store().append(conn, [NewEvent(run["id"], run["version"] + 1, tenant_id,
                                             ev.RunQueued(pool=run["pool"]), "test")])
    return run["id"]


async def claim(gw: httpx.AsyncClient, key: str, worker: str, **kw: Any) -> list[p.ClaimedRun]:
    body = {"worker_id": worker, "max_runs": 10, **kw}
    r = await gw.post(p.CLAIM_PATH, json=body, headers=auth(key))
    assert r.status_code == 200, r.text
    return msgspec.json.decode(r.content, type=p.ClaimResponse).runs


async def batch(gw: httpx.AsyncClient, key: str, **body: Any) -> list[p.BatchItemResult]:
    r = await gw.post(p.BATCH_PATH, json=body, headers=auth(key))
    assert r.status_code == 200, r.text
    return msgspec.json.decode(r.content, type=p.BatchResponse).results


async def test_a_shared_worker_claims_and_completes_runs_of_two_tenants(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    a, key_a = await new_tenant(pool)
    b, _ = await new_tenant(pool)
    run_a = await queued_run(pool, a, {"for": "a"})
    run_b = await queued_run(pool, b, {"for": "b"})
    assert await claim(gateway, key_a, "tenant-worker", pools=["other"]) == []

    runs = await claim(gateway, ADMIN, "shared", slots=4)
    assert {(r.run_id, r.tenant_id, r.payload["for"]) for r in runs} == {
        (str(run_a), str(a), "a"), (str(run_b), str(b), "b")}
    tokens = [{"run_id": r.run_id, "fencing_token": r.fencing_token} for r in runs]
    beats = await batch(gateway, ADMIN, worker_id="shared", heartbeats=tokens)
    assert [x.status for x in beats] == [200, 200]
    stale = {"run_id": str(run_a), "fencing_token": runs[0].fencing_token + 5}
    [refused] = await batch(gateway, ADMIN, worker_id="shared", heartbeats=[stale])
    assert refused.status == 409
    done = await batch(gateway, ADMIN, worker_id="shared", completions=[
        {**t, "output": {"done": r.tenant_id}} for t, r in zip(tokens, runs, strict=True)])
    assert [x.status for x in done] == [200, 200]

    async with pool.acquire() as conn:
        for run_id, tenant in ((run_a, a), (run_b, b)):
            stream = await read_stream(conn, run_id, tenant)  # events under the run's tenant
            types = [e.type for e in stream]
            assert types[-1] == "RunSucceeded" and "RunStarted" in types
            assert ("StaleWriteRejected" in types) == (run_id == run_a)
            assert stream[-1].actor == "worker:shared"
            row = await conn.fetchrow(RUNS["run_by_id"], run_id, tenant)
            assert row["state"] == "succeeded"
            output = await get_blobs(conn, [row["output_ref"]], tenant)  # the run's tenant's
            assert output == {row["output_ref"]: {"done": str(tenant)}}
        workers = await registry.list_workers(conn, None)
    assert {(w.worker_id, w.tenant_id, w.slots, tuple(w.pools)) for w in workers} == {
        ("shared", None, 4, ("default",)), ("tenant-worker", a, 10, ("other",))}


async def test_a_tenant_worker_cannot_touch_another_tenants_runs(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    owner, key_owner = await new_tenant(pool)
    intruder, key_intruder = await new_tenant(pool)
    run_id = await queued_run(pool, owner, None)
    assert await claim(gateway, key_intruder, "x") == []
    [run] = await claim(gateway, key_owner, "w", slots=2)
    token = {"fencing_token": run.fencing_token}
    item = {"run_id": run.run_id, **token}

    for action in ("heartbeat", "complete", "release"):
        r = await gateway.post(p.run_path(run.run_id, action), json=token,
                               headers={**auth(key_intruder), "x-ostinato-worker": "x"})
        assert r.status_code == 404, (action, r.text)
    results = await batch(gateway, key_intruder, worker_id="x", heartbeats=[item],
                          completions=[item], failures=[{**item, "error": {
                              "type": "Boom", "message": "no", "retryable": False}}])
    assert [x.status for x in results] == [404, 404, 404]

    r = await gateway.post(p.run_path(run.run_id, "complete"), json=token,
                           headers={**auth(key_owner), "x-ostinato-worker": "w"})
    assert r.status_code == 200, r.text
    async with pool.acquire() as conn:
        types = [e.type for e in await read_stream(conn, run_id, owner)]
        assert "StaleWriteRejected" not in types and types[-1] == "RunSucceeded"
        assert [(w.worker_id, w.tenant_id, w.slots)
                for w in await registry.list_workers(conn, owner)] == [("w", owner, 2)]
        assert [(w.worker_id, w.tenant_id)
                for w in await registry.list_workers(conn, intruder)] == [("x", intruder)]


async def test_goodbye_removes_the_worker_and_other_routes_still_need_a_worker_key(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant, key = await new_tenant(pool)
    assert await claim(gateway, key, "w", slots=3) == []
    assert await claim(gateway, ADMIN, "w", slots=5) == []  # the same id, another scope
    async with pool.acquire() as conn:
        ttl = timedelta(seconds=Settings().worker_ttl_seconds)
        assert {(c.tenant_id, c.slots) for c in await registry.live_capacity(conn, None, ttl)} \
            == {(tenant, 3), (None, 5)}

    r = await gateway.post(p.GOODBYE_PATH, json={"worker_id": "w"}, headers=auth(key))
    assert r.status_code == 200 and r.json() == {"forgotten": True, "released": 0}
    r = await gateway.post(p.GOODBYE_PATH, json={"worker_id": "w"}, headers=auth(key))
    assert r.json() == {"forgotten": False, "released": 0}
    assert [x.status for x in await batch(gateway, key, worker_id="w")] == []  # no resurrection
    async with pool.acquire() as conn:
        assert [(w.worker_id, w.tenant_id) for w in await registry.list_workers(conn, None)] \
            == [("w", None)]

    r = await gateway.post(p.GOODBYE_PATH, json={"worker_id": "w"}, headers=auth("ost_nope"))
    assert r.status_code == 401



async def test_goodbye_queues_again_the_runs_claimed_for_the_worker_that_it_never_read(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    """A stopping worker cancels its claim in flight; a claim the gateway granted as it hung up
    leaves runs leased in its name that it never ran. Its goodbye (sent once it finished or
    released every run it knew of) gives them back at once, fenced by their tokens, rather than
    at their leases' expiry; another worker's leases and another tenant's are left alone."""
    tenant, key = await new_tenant(pool)
    other, other_key = await new_tenant(pool)
    for t in (tenant, other):
        await runs_of(pool, t, "noop", 3)
    await dispatch(pool)
    cut_short = await claim(gateway, key, "w", max_runs=2)  # the answer "w" never read
    kept = await claim(gateway, key, "w2", max_runs=1)
    theirs = await claim(gateway, other_key, "w", max_runs=3)  # the same id, another tenant
    assert (len(cut_short), len(kept), len(theirs)) == (2, 1, 3)

    r = await gateway.post(p.GOODBYE_PATH, json={"worker_id": "w"}, headers=auth(key))
    assert r.status_code == 200 and r.json() == {"forgotten": True, "released": 2}
    async with pool.acquire() as conn:
        for run in cut_short:
            types = [e.type for e in await read_stream(conn, uuid.UUID(run.run_id), tenant)]
            assert types[-2:] == ["RunStarted", "LeaseReleased"]
        states = {r["id"]: (r["state"], r["due"], r["leased"]) for r in await conn.fetch(
            "SELECT id, state, retry_at <= now() AS due,"
            " EXISTS (SELECT 1 FROM attempt_leases WHERE run_id = id) AS leased"
            " FROM runs WHERE id = ANY($1::uuid[])",
            [uuid.UUID(c.run_id) for c in (*cut_short, *kept, *theirs)])}
    # due again at once, as a release the worker sends: no attempt used, the lease ended
    assert [states[uuid.UUID(c.run_id)] for c in cut_short] == \
        [("retry_scheduled", True, False)] * 2
    assert [states[uuid.UUID(c.run_id)][0::2] for c in (*kept, *theirs)] == \
        [("running", True)] * 4
    late = await gateway.post(p.run_path(cut_short[0].run_id, "complete"),  # records nothing
                              json={"fencing_token": cut_short[0].fencing_token},
                              headers={**auth(key), "x-ostinato-worker": "w"})
    assert late.status_code == 200, late.text  # an outcome resent after the run moved on
    async with pool.acquire() as conn:
        types = [e.type for e in await read_stream(conn, uuid.UUID(cut_short[0].run_id), tenant)]
    assert types[-1] == "LeaseReleased"
