"""Start and await (issue 40 item 2): `client.runs.start(...)` and `GET /v1/runs/{id}/result`, a
long poll woken by the run-end notice of the append that ends the run (PostgreSQL NOTIFY, one
listener per api process), over real HTTP and a real SDK worker on the in-process gateway."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.client import (
    AsyncClient,
    Client,
    RunCancelledError,
    RunFailedError,
    RunTimeoutError,
)
from ostinato.clock import SystemClock
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.sdk import PermanentError, WorkflowContext, task, workflow
from services.api.app import create_app
from services.api.results import RunEnds
from services.scheduler.tick import fire_due
from tests.helpers.api import ADMIN, assert_problem, auth
from tests.helpers.cli import cli
from tests.helpers.dags import advance
from tests.helpers.integration import dispatch, new_tenant, run_row, store
from tests.helpers.waiting import until
from tests.helpers.workflows import work

pytestmark = pytest.mark.integration


@dataclass
class Api:
    url: str
    ends: RunEnds
    service: Service


@pytest.fixture
async def api(pool: asyncpg.Pool, db_url: str) -> AsyncIterator[Api]:
    """The public API served over real HTTP, with its run-end listener at hand."""
    service = Service("api", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    app = create_app(service, store())
    server = HttpServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        yield Api(f"http://127.0.0.1:{server.port}", app.state.run_ends, service)
    finally:
        await server.stop()


@task("rr.double")
async def double(payload: dict[str, int]) -> int:
    return payload["n"] * 2


@task("rr.refuse")
async def refuse(payload: Any) -> None:
    raise PermanentError("no such customer", type="unknown_customer")


async def schedule_and_dispatch(pool: asyncpg.Pool) -> None:
    await fire_due(pool, store(), SystemClock())
    await dispatch(pool)


async def work_until_final(pool: asyncpg.Pool, gateway: httpx.AsyncClient, key: str,
                           tenant_id: uuid.UUID, run_id: uuid.UUID) -> str:
    async def final() -> str | None:
        row = await run_row(pool, tenant_id, run_id)
        return row.state if row.state in ("succeeded", "dead_lettered", "cancelled") else None
    await work(gateway, key, [double, refuse], final, f"run {run_id} final",
               between=lambda: schedule_and_dispatch(pool))
    return (await run_row(pool, tenant_id, run_id)).state


async def waiting_for(ends: RunEnds, n: int) -> None:
    await until(lambda: _true(ends.waiting >= n), within=60, what=f"{n} waiters registered")


async def _true(value: bool) -> bool:
    return value


async def test_waiters_before_the_run_exists_and_after_its_end_both_get_its_output(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, api: Api) -> None:
    tenant_id, key = await new_tenant(pool)
    async with AsyncClient(api.url, key) as client:
        handle = await client.runs.start("rr.double", {"n": 21})
        run_id = uuid.UUID(str(handle.run_id))
        async with pool.acquire() as conn:  # not created yet: the scheduler has not fired it
            assert await conn.fetchval("SELECT count(*) FROM runs WHERE id = $1", run_id) == 0
        early = asyncio.create_task(handle.result())  # no timeout: woken, never polling
        await waiting_for(api.ends, 1)
        assert (await handle.status()).state == "scheduled"

        assert await work_until_final(pool, gateway, key, tenant_id, run_id) == "succeeded"
        assert await early == 42
        assert api.ends.notices >= 1  # it was the end's notice that woke it

        late = client.runs.get_handle(run_id)  # after the end: answered by the first read
        assert await late.result(timeout=5) == 42
        answer = await late.wait()
        assert (answer.done, answer.kind, answer.state, answer.output) == (
            True, "run", "succeeded", 42)
    with Client(api.url, key) as sync:  # the sync client, in a thread: the API serves here
        assert await asyncio.to_thread(sync.runs.get_handle(run_id).result) == 42


async def test_a_dead_lettered_run_raises_its_final_error_to_sync_and_async_waiters(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, api: Api) -> None:
    tenant_id, key = await new_tenant(pool)
    async with AsyncClient(api.url, key) as client:
        handle = await client.runs.start("rr.refuse", {"customer": "x"})
        run_id = uuid.UUID(str(handle.run_id))
        waiter = asyncio.create_task(handle.result(timeout=600))
        with Client(api.url, key) as sync:
            sync_handle = sync.runs.get_handle(run_id)
            sync_handle.job_id = handle.job_id
            sync_waiter = asyncio.create_task(asyncio.to_thread(sync_handle.result, 600))
            await waiting_for(api.ends, 2)
            assert await work_until_final(pool, gateway, key, tenant_id, run_id) == \
                "dead_lettered"
            for pending in (waiter, sync_waiter):
                with pytest.raises(RunFailedError) as failed:
                    await pending
                assert failed.value.state == "dead_lettered"
                assert failed.value.error["type"] == "unknown_customer"
                assert failed.value.error["message"] == "no such customer"


async def test_a_cancelled_runs_waiters_are_all_answered_by_one_read(
        pool: asyncpg.Pool, api: Api) -> None:
    _, key = await new_tenant(pool)
    async with AsyncClient(api.url, key) as client:
        handle = await client.runs.start("rr.double", {"n": 1})
        await fire_due(pool, store(), SystemClock())  # it exists (scheduled) and waits
        waiters = [asyncio.create_task(handle.result()) for _ in range(5)]
        await waiting_for(api.ends, 5)
        reads = api.ends.reads
        assert (await client.runs.cancel(handle.run_id)).state == "cancelled"
        for waiter in waiters:
            with pytest.raises(RunCancelledError) as cancelled:
                await waiter
            assert cancelled.value.state == "cancelled"
        assert api.ends.reads == reads + 1  # one statement for the five, none of their own


async def test_a_wait_that_ends_first_answers_not_done_and_the_handle_times_out(
        pool: asyncpg.Pool, api: Api) -> None:
    _, key = await new_tenant(pool)
    async with AsyncClient(api.url, key) as client:
        handle = await client.runs.start("rr.double", {"n": 1})
        with pytest.raises(RunTimeoutError) as timed_out:
            await handle.result(timeout=0.2)
        assert isinstance(timed_out.value, TimeoutError)
        assert timed_out.value.result is not None and timed_out.value.result.state == "scheduled"
    async with httpx.AsyncClient(base_url=api.url, headers=auth(key)) as http:
        r = await http.get(f"/v1/runs/{handle.run_id}/result",
                           params={"wait": "1s", "job_id": str(handle.job_id)})
        assert r.status_code == 200, r.text
        assert (r.json()["done"], r.json()["state"]) == (False, "scheduled")
    assert api.ends.waiting == 0  # a wait that ended leaves no waiter behind


async def test_another_tenants_run_or_job_is_404_and_bad_waits_are_problems(
        pool: asyncpg.Pool, api: Api) -> None:
    _, key = await new_tenant(pool)
    _, other = await new_tenant(pool)
    async with AsyncClient(api.url, key) as client:
        handle = await client.runs.start("rr.double", {"n": 1})
    await fire_due(pool, store(), SystemClock())
    async with httpx.AsyncClient(base_url=api.url, headers=auth(other)) as http:
        path = f"/v1/runs/{handle.run_id}/result"
        assert_problem(await http.get(path, params={"wait": "0s"}), 404)
        assert_problem(await http.get(path, params={"wait": "0s",
                                                    "job_id": str(handle.job_id)}), 404)
        assert_problem(await http.get(f"/v1/runs/{uuid.uuid4()}/result",
                                      params={"wait": "0s", "job_id": str(handle.job_id)}), 404)
    async with httpx.AsyncClient(base_url=api.url, headers=auth(key)) as http:
        path = f"/v1/runs/{handle.run_id}/result"
        for bad in ("soon", "61s", "2m", "-1", "1.5.5", "PT1H"):
            assert_problem(await http.get(path, params={"wait": bad}), 422, "wait")
        assert_problem(await http.get(path, params={"wait": "0s", "job_id": "nope"}), 422)
        r = await http.get(path, params={"wait": "0"})
        assert r.status_code == 200 and r.json()["state"] == "scheduled"


async def test_a_lost_listener_reconnects_and_its_waiters_still_hear_the_end(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, api: Api) -> None:
    tenant_id, key = await new_tenant(pool)
    async with AsyncClient(api.url, key) as client:
        handle = await client.runs.start("rr.double", {"n": 5})
        waiter = asyncio.create_task(handle.result())
        await waiting_for(api.ends, 1)
        await until(lambda: _true(api.ends.connects == 1), within=60, what="listening")
        async with pool.acquire() as conn:  # the listener's session, as a failover ends it
            killed = await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN%'")
        assert killed == 1
        await until(lambda: _true(api.ends.connects == 2), within=60, what="reconnected")
        assert not waiter.done()  # woken by the reconnect, it read again and waits on
        run_id = uuid.UUID(str(handle.run_id))
        assert await work_until_final(pool, gateway, key, tenant_id, run_id) == "succeeded"
        assert await waiter == 10


async def test_the_api_stopping_answers_every_long_poll_at_once_with_not_done(
        pool: asyncpg.Pool, api: Api) -> None:
    _, key = await new_tenant(pool)
    async with AsyncClient(api.url, key) as client:
        handle = await client.runs.start("rr.double", {"n": 1})
    async with httpx.AsyncClient(base_url=api.url, headers=auth(key), timeout=120) as http:
        polls = [asyncio.create_task(http.get(
            f"/v1/runs/{handle.run_id}/result",
            params={"wait": "60s", "job_id": str(handle.job_id)})) for _ in range(3)]
        await waiting_for(api.ends, 3)
        api.service.stopping.set()  # SIGTERM: the drain begins
        answers = await asyncio.gather(*polls)
    assert [(r.status_code, r.json()["done"]) for r in answers] == [(200, False)] * 3


async def test_the_cli_starts_awaits_and_exits_by_how_the_run_ended(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, api: Api, tmp_path: Path) -> None:
    _, key = await new_tenant(pool)
    env = {"OSTINATO_API_URL": api.url, "OSTINATO_API_KEY": key}

    async def run_waiting(*args: str) -> tuple[int, str, str]:
        """The CLI awaiting a run while an SDK worker (and the scheduler's part) serves."""
        proc = asyncio.create_task(cli(tmp_path, *args, env=env))
        await work(gateway, key, [double, refuse], lambda: _true(proc.done()), "the CLI",
                   between=lambda: schedule_and_dispatch(pool))
        return await proc

    code, out, err = await run_waiting("run", "rr.double", "--payload", '{"n": 4}', "--wait",
                                       "-o", "json")
    assert code == 0, err
    assert (json.loads(out)["state"], json.loads(out)["output"]) == ("succeeded", 8)

    code, out, err = await run_waiting("-o", "json", "run", "rr.refuse", "--wait")
    assert code == 3, err
    assert json.loads(out)["error"]["type"] == "unknown_customer"

    code, out, err = await cli(tmp_path, "-o", "json", "run", "rr.double", env=env)
    assert code == 0, err
    started = json.loads(out)
    await fire_due(pool, store(), SystemClock())
    code, out, err = await cli(tmp_path, "-o", "json", "runs", "wait", started["run_id"],
                               "--timeout", "0.2", env=env)
    assert (code, json.loads(out)["done"], json.loads(out)["state"]) == (5, False, "scheduled")
    async with AsyncClient(api.url, key) as client:
        await client.runs.cancel(started["run_id"])
    code, out, err = await cli(tmp_path, "-o", "json", "runs", "wait", started["run_id"],
                               env=env)
    assert (code, json.loads(out)["state"]) == (4, "cancelled")

    _, other = await new_tenant(pool)
    code, out, err = await cli(tmp_path, "runs", "wait", started["run_id"],
                               env={**env, "OSTINATO_API_KEY": other})
    assert code == 1 and "404" in err and out == ""


@workflow("rr.flow")
async def flow(ctx: WorkflowContext, payload: dict[str, int]) -> int:
    doubled = await ctx.step("double", lambda n: n * 2, payload["n"])
    return int(await ctx.step("inc", lambda n: n + 1, doubled))


@task("rr.node")
async def node_task(payload: dict[str, Any]) -> str:
    if payload["input"]["key"] == "b":
        raise PermanentError("node b refused", type="told_to_fail")
    return str(payload["input"]["key"])


async def test_workflow_and_dag_runs_are_awaited_the_same_way(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, api: Api) -> None:
    _, key = await new_tenant(pool)
    async with AsyncClient(api.url, key) as client:
        wf = await client.runs.start("rr.flow", {"n": 20})
        dag = await client.dags.define({
            "name": "await-me", "edges": [{"from": "a", "to": "b"}],
            "nodes": [{"key": k, "task": "rr.node", "payload": {"key": k}} for k in "ab"]})
        dag_handle = await client.runs.start(f"dag:{dag.id}")
        waiters = [asyncio.create_task(wf.result()), asyncio.create_task(dag_handle.wait())]

        async def between() -> None:
            await schedule_and_dispatch(pool)
            await advance(pool)
        await work(gateway, key, [flow, node_task], lambda: _true(all(w.done() for w in waiters)),
                   "the workflow and the DAG run", between=between)
        assert await waiters[0] == 41
        answer = await waiters[1]
        assert (answer.kind, answer.state, answer.error["type"]) == (
            "dag_run", "failed", "dag_failed")
        with pytest.raises(RunFailedError):
            await dag_handle.result(timeout=5)
