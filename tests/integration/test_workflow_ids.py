"""Workflow ids and signal-with-start (issue 40 item 3): a run started under the caller's own
id, signalled by the id (started first when none runs), the id reuse policies after it ends,
one run for concurrent calls, tenants apart, bad input refused."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.client import ApiError, AsyncClient, Client
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.sdk import WorkflowContext, workflow
from services.api.app import create_app
from tests.helpers.api import ADMIN, assert_problem, auth
from tests.helpers.cli import cli
from tests.helpers.integration import dispatch, new_tenant, store
from tests.helpers.workflows import work_until

pytestmark = pytest.mark.integration


def collector() -> Any:
    @workflow("carts.collect")
    async def collect(ctx: WorkflowContext, payload: Any) -> list[Any]:
        first = await ctx.wait_for_signal("item")
        second = await ctx.wait_for_signal("item")
        return [payload, first, second]

    return collect


def _sws(client: httpx.AsyncClient, key: str, wid: str, item: Any, **body: Any) -> Any:
    return client.post(f"/v1/workflows/carts.collect/{wid}/signal-with-start",
                       json={"signal": "item", "signal_payload": item, **body},
                       headers=auth(key))


async def test_signal_with_start_starts_then_signals_the_same_run_and_policies_after_it_ends(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    wf = collector()
    r = await _sws(client, key, "cart-7", "apple", payload="start")
    assert r.status_code == 201, r.text
    first = r.json()
    assert first["started"] is True and first["workflow_id"] == "cart-7"
    run_id = first["run_id"]
    # a second start while it runs is a 409 naming the run
    r = await client.post("/v1/workflows/carts.collect/cart-7/start", json={},
                          headers=auth(key))
    assert_problem(r, 409)
    assert run_id in r.text
    assert await dispatch(pool) == 1
    await work_until(pool, gateway, key, wf, tenant_id, run_id, "suspended")
    r = await _sws(client, key, "cart-7", "pear", payload="ignored")
    assert r.status_code == 200, r.text
    assert r.json()["run_id"] == run_id and r.json()["started"] is False
    await dispatch(pool)
    await work_until(pool, gateway, key, wf, tenant_id, run_id, "succeeded")
    out = (await client.get(f"/v1/runs/{run_id}/result", headers=auth(key))).json()
    assert out["output"] == ["start", "apple", "pear"]
    assert await pool.fetchval(
        "SELECT count(*) FROM run_workflow_ids WHERE workflow_id = 'cart-7'") == 1

    # after it ended (succeeded): each policy's answer
    assert_problem(await _sws(client, key, "cart-7", "x", id_reuse_policy="reject_duplicate"),
                   409)
    assert_problem(await _sws(client, key, "cart-7", "x",
                              id_reuse_policy="allow_duplicate_failed_only"), 409)
    r = await _sws(client, key, "cart-7", "x", id_reuse_policy="allow_duplicate")
    assert r.status_code == 201 and r.json()["run_id"] != run_id


async def test_two_concurrent_calls_start_one_run_and_the_same_key_answers_the_same(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    answers = await asyncio.gather(*[_sws(client, key, "race", i) for i in range(6)])
    assert all(a.status_code in (200, 201) for a in answers), [a.text for a in answers]
    assert len({a.json()["run_id"] for a in answers}) == 1
    assert sorted(a.json()["started"] for a in answers) == [False] * 5 + [True]
    assert await pool.fetchval(
        "SELECT count(*) FROM run_workflow_ids WHERE workflow_id = 'race'") == 1
    body = {"payload": 1, "idempotency_key": "k1"}
    a = await client.post("/v1/workflows/carts.collect/keyed/start", json=body,
                          headers=auth(key))
    b = await client.post("/v1/workflows/carts.collect/keyed/start", json=body,
                          headers=auth(key))
    assert a.status_code == 201 and b.status_code == 200, b.text
    assert a.json()["run_id"] == b.json()["run_id"]


async def test_a_dead_lettered_run_reopened_while_its_id_runs_again_is_no_5xx(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    """G2's question: with the id in a side table there is no unique index for a reopen to hit.
    The old run is reopened (200); the id then names two running runs and goes to the newest;
    a rebuild of the read models gives the same run_workflow_ids rows."""
    _, key = await new_tenant(pool)
    start = "/v1/workflows/carts.collect/again/start"
    old = (await client.post(start, json={}, headers=auth(key))).json()["run_id"]
    r = await client.post(f"/v1/runs/{old}/fail", json={"reason": "test: give up on it"},
                          headers=auth(key))
    assert r.status_code == 200 and r.json()["state"] == "dead_lettered", r.text
    r = await client.post(start, json={}, headers=auth(key))
    assert r.status_code == 201, r.text
    new = r.json()["run_id"]
    r = await client.post(f"/v1/runs/{old}/steps/0/retry", json={"reason": "test: reopen it"},
                          headers=auth(key))
    assert r.status_code == 200, r.text
    assert r.json()["state"] not in ("dead_lettered", "succeeded", "cancelled")
    r = await _sws(client, key, "again", "x")
    assert r.status_code == 200 and r.json()["run_id"] == new, r.text
    r = await client.post(start, json={}, headers=auth(key))
    assert_problem(r, 409)
    assert new in r.text
    async with pool.acquire() as conn:
        live = await snapshot(conn)
        assert len([m for m in live["run_workflow_ids"] if m["workflow_id"] == "again"]) == 2
        await rebuild(conn)
        assert await snapshot(conn) == live


async def test_the_same_workflow_id_in_two_tenants_names_two_runs(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key_a = await new_tenant(pool)
    _, key_b = await new_tenant(pool)
    a = await _sws(client, key_a, "shared", 1)
    b = await _sws(client, key_b, "shared", 2)
    assert a.status_code == 201 and b.status_code == 201
    assert a.json()["run_id"] != b.json()["run_id"]
    assert_problem(await client.get(f"/v1/runs/{a.json()['run_id']}", headers=auth(key_b)),
                   404)


async def test_bad_input_is_refused_and_changes_nothing(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    assert_problem(await _sws(client, key, "x" * 201, 1), 422)
    assert_problem(await _sws(client, key, "ok", 1, id_reuse_policy="terminate"), 422)
    r = await client.post("/v1/workflows/dag:abc/ok/signal-with-start",
                          json={"signal": "item"}, headers=auth(key))
    assert_problem(r, 422)
    r = await client.post("/v1/workflows/carts.collect//signal-with-start",
                          json={"signal": "item"}, headers=auth(key))
    assert 400 <= r.status_code < 500
    assert_problem(await client.post("/v1/workflows/carts.collect/ok/signal-with-start",
                                      json={"signal": ""}, headers=auth(key)), 422)
    assert await pool.fetchval("SELECT count(*) FROM run_workflow_ids") == 0


async def test_the_clients_start_and_signal_with_start_by_workflow_id(
        pool: asyncpg.Pool, db_url: str) -> None:
    _, key = await new_tenant(pool)
    service = Service("api", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    server = HttpServer(create_app(service, store()), "127.0.0.1", 0)
    await server.start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        async with AsyncClient(url, key) as client:
            first = await client.runs.signal_with_start("carts.collect", "c-1", "item", "a",
                                                        payload="p")
            again = await client.runs.signal_with_start("carts.collect", "c-1", "item", "b")
            assert first.started and not again.started and first.run_id == again.run_id
            with pytest.raises(ApiError) as refused:
                await client.runs.start_workflow("carts.collect", "c-1")
            assert refused.value.status == 409

        def sync_calls() -> Any:
            with Client(url, key) as sync:
                return sync.runs.start_workflow("carts.collect", "c-2", {"n": 1})

        started = await asyncio.to_thread(sync_calls)
        assert started.started and started.workflow_id == "c-2"
    finally:
        await server.stop()


async def test_the_cli_starts_and_signals_with_start_by_workflow_id(
        pool: asyncpg.Pool, db_url: str, tmp_path: Path) -> None:
    """`ostinato workflows start` / `signal-with-start` against a real API: started, the same
    run signalled, a running id's start refused (exit 1, the 409 naming the run), a
    reject_duplicate reuse of an ended id refused, a bad policy refused and nothing made."""
    _, key = await new_tenant(pool)
    service = Service("api", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    server = HttpServer(create_app(service, store()), "127.0.0.1", 0)
    await server.start()
    env = {"OSTINATO_API_URL": f"http://127.0.0.1:{server.port}", "OSTINATO_API_KEY": key}
    try:
        code, out, err = await cli(tmp_path, "workflows", "signal-with-start", "carts.collect",
                                   "cart-9", "--signal", "item", "--signal-payload", '"apple"',
                                   "--payload", '{"user": 1}', "-o", "json", env=env)
        assert code == 0, err
        first = json.loads(out)
        assert first["started"] is True and first["workflow_id"] == "cart-9"
        assert first["delivered"] is False and first["signal_id"]
        run_id = first["run_id"]
        code, out, err = await cli(tmp_path, "workflows", "signal-with-start", "carts.collect",
                                   "cart-9", "--signal", "item", "--signal-payload", '"pear"',
                                   "-o", "json", env=env)
        assert code == 0, err
        assert json.loads(out)["run_id"] == run_id and json.loads(out)["started"] is False
        assert await pool.fetchval(
            "SELECT count(*) FROM run_signals WHERE run_id = $1", uuid.UUID(run_id)) == 2
        code, out, err = await cli(tmp_path, "workflows", "start", "carts.collect", "cart-9",
                                   env=env)
        assert code == 1 and "409" in err and run_id in err, (out, err)

        code, out, err = await cli(tmp_path, "workflows", "start", "carts.collect", "once",
                                   "--payload", "[1, 2]", "--idempotency-key", "k-1",
                                   "-o", "json", env=env)
        assert code == 0, err
        once = json.loads(out)
        assert once["started"] is True
        code, out, err = await cli(tmp_path, "workflows", "start", "carts.collect", "once",
                                   "--payload", "[1, 2]", "--idempotency-key", "k-1",
                                   "-o", "json", env=env)
        assert code == 0, err
        assert json.loads(out)["run_id"] == once["run_id"] and not json.loads(out)["started"]
        r = await pool.fetchval("SELECT count(*) FROM run_workflow_ids")
        code, out, err = await cli(tmp_path, "workflows", "start", "carts.collect", "other",
                                   "--reuse-policy", "terminate", env=env)
        assert code == 1 and "422" in err and "id_reuse_policy" in err, (out, err)
        assert await pool.fetchval("SELECT count(*) FROM run_workflow_ids") == r
    finally:
        await server.stop()
