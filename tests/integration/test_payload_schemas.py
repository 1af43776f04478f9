"""Payload schemas through the real PostgreSQL, the API and the worker-gateway in-process and SDK
workers: a worker declaring a payload type registers its schema before it claims; submissions
are validated against the newest one of the tenant's scope (else the shared one), a bad one is a
422 naming the field that writes nothing; the accepted job and its runs record the payload
version, and a run queued under version 1 is left to a worker that accepts version 1 even while
a worker that only reads version 2 claims later runs. Schema conflicts are 409s that stop the
worker; a run whose payload predates the schema fails `invalid_payload` at the worker and its
replay with a corrected payload is validated too."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import asyncpg
import httpx
import msgspec
import pytest

from ostinato.clock import SystemClock
from ostinato.domain import events as ev
from ostinato.sdk import GatewayError, Task, Worker, task
from ostinato.stores import runs, task_schemas
from ostinato.wire.worker import TASKS_PATH
from services.scheduler.tick import fire_due
from tests.helpers.api import ADMIN, GATEWAY_BASE, assert_problem, auth
from tests.helpers.integration import dispatch, new_tenant, run_row, store
from tests.helpers.waiting import until
from tests.helpers.workflows import events_of

pytestmark = pytest.mark.integration
TASK = "billing.charge"


class ChargeV1(msgspec.Struct, forbid_unknown_fields=True):
    amount: int
    currency: str = "EUR"


class ChargeV2(msgspec.Struct, forbid_unknown_fields=True):
    amount_cents: Annotated[int, msgspec.Meta(ge=1)]
    currency: str


def charge(seen: list[tuple[str, Any]], *, label: str, payload: type = ChargeV1,
           payload_version: int = 1) -> Task:
    @task(TASK, payload=payload, payload_version=payload_version)
    async def handler(value: Any) -> str:
        seen.append((label, value))
        return label

    return handler


@asynccontextmanager
async def worker(gateway: httpx.AsyncClient, key: str, tasks: list[Task]) -> AsyncIterator[Worker]:
    w = Worker(GATEWAY_BASE, key, tasks, http_client=gateway, claim_wait_seconds=0.2,
               shutdown_grace_seconds=0)
    running = asyncio.create_task(w.run())
    try:
        yield w
    finally:
        await w.stop()
        await running


async def registered(pool: asyncpg.Pool, tenant_id: uuid.UUID | None,
                     version: int) -> list[task_schemas.TaskSchemaRow]:
    async def probe() -> list[task_schemas.TaskSchemaRow]:
        async with pool.acquire() as conn:
            rows = await task_schemas.of_scope(conn, tenant_id)
        return [r for r in rows if r.task == TASK and r.payload_version == version]
    return await until(probe, within=600, what=f"{TASK} v{version} registered")  # hang guard


async def run_of(pool: asyncpg.Pool, tenant_id: uuid.UUID, job_id: str) -> runs.RunRow:
    """Fire the due job and queue its run (the scheduler's and the dispatcher's code)."""
    await fire_due(pool, store(), SystemClock())
    await dispatch(pool)
    async with pool.acquire() as conn:
        [row] = await runs.page(conn, tenant_id, job_id=uuid.UUID(job_id), state=None,
                                after=(None, None), limit=5)
    return row


async def reaches(pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: uuid.UUID,
                  state: str) -> runs.RunRow:
    async def probe() -> runs.RunRow | None:
        await dispatch(pool)  # retries and re-queued runs need the dispatcher again
        row = await run_row(pool, tenant_id, run_id)
        return row if row.state == state else None
    return await until(probe, within=600, what=f"run {run_id} {state}")  # a hang guard only


async def submit(client: httpx.AsyncClient, key: str, payload: Any) -> httpx.Response:
    return await client.post("/v1/jobs", json={"name": TASK, "payload": payload},
                             headers=auth(key))


async def count_jobs(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> tuple[int, int]:
    async with pool.acquire() as conn:
        return (await conn.fetchval("SELECT count(*) FROM jobs WHERE tenant_id = $1", tenant_id),
                await conn.fetchval("SELECT count(*) FROM runs WHERE tenant_id = $1", tenant_id))


async def test_a_declared_schema_is_registered_and_a_valid_submission_runs_with_the_struct(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    seen: list[tuple[str, Any]] = []
    async with worker(gateway, key, [charge(seen, label="v1")]):
        [row] = await registered(pool, tenant_id, 1)
        assert (row.scope, row.tenant_id) == (str(tenant_id), tenant_id)
        assert msgspec.json.decode(row.schema) == msgspec.json.schema(ChargeV1)
        r = await submit(client, key, {"amount": 42})
        assert r.status_code == 201, r.text
        assert r.json()["payload_version"] == 1
        run = await run_of(pool, tenant_id, r.json()["id"])
        assert run.payload_version == 1
        await reaches(pool, tenant_id, run.id, "succeeded")
    assert seen == [("v1", ChargeV1(amount=42))]
    view = (await client.get(f"/v1/runs/{run.id}", headers=auth(key))).json()
    assert (view["payload_version"], view["state"]) == (1, "succeeded")
    [scheduled] = [e for e in await events_of(pool, tenant_id, run.id)
                   if isinstance(e, ev.RunScheduled)]
    assert scheduled.payload_version == 1


async def test_an_invalid_submission_is_a_422_naming_the_field_and_writes_nothing(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    async with worker(gateway, key, [charge([], label="v1")]):
        await registered(pool, tenant_id, 1)
    body = assert_problem(await submit(client, key, {"amount": "42", "tip": 1}), 422,
                          "payload.amount")
    assert "payload.amount: must be integer" in body["detail"]
    assert {"field": "payload.tip", "message": "unknown field"} in body["errors"]
    assert_problem(await submit(client, key, None), 422, "payload")
    r = await client.post("/v1/jobs/batch", headers=auth(key), json={"jobs": [
        {"name": TASK, "payload": {"amount": 1}},
        {"name": TASK, "payload": {}},
    ]})
    assert_problem(r, 422, "jobs[1].payload.amount")
    assert await count_jobs(pool, tenant_id) == (0, 0)
    # a task without a registered schema is accepted as before, without a payload version
    r = await client.post("/v1/jobs", json={"name": "reports.nightly", "payload": "anything"},
                          headers=auth(key))
    assert r.status_code == 201 and r.json()["payload_version"] is None


async def test_a_run_queued_under_version_1_is_left_to_a_worker_that_accepts_version_1(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    seen: list[tuple[str, Any]] = []
    async with worker(gateway, key, [charge(seen, label="old")]):
        await registered(pool, tenant_id, 1)
    first = await submit(client, key, {"amount": 5})
    assert first.status_code == 201 and first.json()["payload_version"] == 1
    old_run = await run_of(pool, tenant_id, first.json()["id"])  # queued first
    async with worker(gateway, key, [charge(seen, label="new", payload=ChargeV2,
                                            payload_version=2)]) as new_worker:
        await registered(pool, tenant_id, 2)
        # the newest version is what a submission is checked against now
        assert_problem(await submit(client, key, {"amount": 5}), 422, "payload.amount_cents")
        second = await submit(client, key, {"amount_cents": 700, "currency": "EUR"})
        assert second.status_code == 201 and second.json()["payload_version"] == 2
        new_run = await run_of(pool, tenant_id, second.json()["id"])  # queued after old_run
        await reaches(pool, tenant_id, new_run.id, "succeeded")
        # claims take the oldest queued run first: the v2-only worker passed over old_run
        assert (await run_row(pool, tenant_id, old_run.id)).state == "queued"
    async with worker(gateway, key, [charge(seen, label="old")]) as old_worker:
        await reaches(pool, tenant_id, old_run.id, "succeeded")
    assert seen == [("new", ChargeV2(amount_cents=700, currency="EUR")),
                    ("old", ChargeV1(amount=5))]
    started = {run_id: [e.worker_id for e in await events_of(pool, tenant_id, run_id)
                        if isinstance(e, ev.RunStarted)]
               for run_id in (old_run.id, new_run.id)}
    assert started == {new_run.id: [new_worker.worker_id], old_run.id: [old_worker.worker_id]}
    assert (await run_row(pool, tenant_id, old_run.id)).payload_version == 1
    assert (await run_row(pool, tenant_id, new_run.id)).payload_version == 2


async def post_schema(gateway: httpx.AsyncClient, key: str, schema: Any,
                      version: int = 1) -> httpx.Response:
    return await gateway.post(TASKS_PATH, headers=auth(key), json={
        "worker_id": "w-test", "tasks": [{"task": TASK, "payload_schema": schema,
                                          "payload_version": version}]})


async def test_another_schema_under_a_registered_version_is_a_409_and_stops_the_worker(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    v1 = msgspec.json.schema(ChargeV1)
    r = await post_schema(gateway, key, v1)
    assert r.status_code == 200, r.text
    assert r.json() == {"scope": str(tenant_id), "schemas": [
        {"task": TASK, "payload_version": 1, "created": True}]}
    again = await post_schema(gateway, key, msgspec.json.decode(msgspec.json.encode(v1)))
    assert again.json()["schemas"] == [{"task": TASK, "payload_version": 1, "created": False}]
    body = assert_problem(await post_schema(gateway, key, msgspec.json.schema(ChargeV2)), 409)
    assert body["type"].endswith("/payload-schema-conflict")
    assert "bump payload_version" in body["detail"]
    assert_problem(await post_schema(gateway, key, {"type": "nonsense"}), 422,
                   "tasks[0].payload_schema")
    assert_problem(await post_schema(gateway, key, {"$ref": "http://127.0.0.1:1/x"}), 422,
                   "tasks[0].payload_schema")
    async with pool.acquire() as conn:
        [row] = await task_schemas.of_scope(conn, tenant_id)
    assert msgspec.json.decode(row.schema) == v1  # unchanged
    w = Worker(GATEWAY_BASE, key, [charge([], label="v2", payload=ChargeV2)],
               http_client=gateway, claim_wait_seconds=0.2)
    with pytest.raises(GatewayError) as refused:
        await w.run()
    assert refused.value.status == 409
    async with pool.acquire() as conn:  # it never claimed: no registry row
        assert await conn.fetchval("SELECT count(*) FROM workers WHERE worker_id = $1",
                                   w.worker_id) == 0


async def test_a_shared_schema_holds_for_tenants_without_their_own(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    _, other_key = await new_tenant(pool)
    assert (await post_schema(gateway, ADMIN, msgspec.json.schema(ChargeV1))).json()[
        "scope"] == "*"
    assert_problem(await submit(client, key, {"amount_cents": 5, "currency": "EUR"}), 422,
                   "payload.amount")
    assert (await post_schema(gateway, other_key, msgspec.json.schema(ChargeV2),
                              version=1)).status_code == 200  # its own scope: its own v1
    r = await submit(client, other_key, {"amount_cents": 5, "currency": "EUR"})
    assert r.status_code == 201 and r.json()["payload_version"] == 1
    assert (await submit(client, key, {"amount": 5})).status_code == 201


async def test_a_payload_older_than_the_schema_fails_at_the_worker_and_its_replay_is_checked(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    r = await submit(client, key, {"amount": "five"})  # no schema yet: accepted, unversioned
    assert r.status_code == 201 and r.json()["payload_version"] is None
    run = await run_of(pool, tenant_id, r.json()["id"])
    seen: list[tuple[str, Any]] = []
    async with worker(gateway, key, [charge(seen, label="v1")]):
        failed = await reaches(pool, tenant_id, run.id, "dead_lettered")
    assert seen == []  # the handler never saw it
    assert failed.last_error["type"] == "invalid_payload"
    assert "payload.amount" in failed.last_error["message"]

    async def replay(payload: Any) -> httpx.Response:
        return await client.post(f"/v1/dead-letters/{run.id}/replay", json={"payload": payload},
                                 headers=auth(key))

    assert_problem(await replay({"amount": "still five"}), 422, "payload.amount")
    fixed = await replay({"amount": 5})
    assert fixed.status_code == 201, fixed.text
    new_id = uuid.UUID(fixed.json()["run_id"])
    assert (await run_row(pool, tenant_id, new_id)).payload_version == 1
    async with worker(gateway, key, [charge(seen, label="v1")]):
        await reaches(pool, tenant_id, new_id, "succeeded")
    assert seen == [("v1", ChargeV1(amount=5))]
