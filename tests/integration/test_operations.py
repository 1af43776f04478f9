"""Bulk actions by query as tracked operations (POST /v1/operations, docs/OPERATIONS.md): no
page cap, the selection frozen at creation and tenant-scoped, a dry run that writes nothing, and
an operation that survives a kill -9 of the api process mid-way and is resumed by the next one
without acting on any item twice."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from ostinato.clock import SystemClock
from ostinato.operations import work
from ostinato.wire import worker as p
from services.worker_gateway.attempts import Attempts
from tests.helpers.api import assert_problem, auth, tenant
from tests.helpers.env import KAFKA_BOOTSTRAP, app_url_for
from tests.helpers.integration import dispatch, runs_of, store, tenant_id_of
from tests.helpers.lab.cluster import Cluster

pytestmark = pytest.mark.integration


async def states(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> dict[tuple[str, str], int]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT task, state, count(*) AS n FROM runs WHERE tenant_id = $1"
                                " GROUP BY task, state", tenant_id)
    return {(r["task"], r["state"]): r["n"] for r in rows}


async def drain(pool: asyncpg.Pool) -> int:
    """Run the api's operations duty until it has nothing left: the batches it took."""
    batches = 0
    while await work.work_once(pool, store(), SystemClock()):
        batches += 1
    return batches


async def test_a_bulk_cancel_by_filter_cancels_every_match_and_nothing_else(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key_a, key_b = await tenant(client, "ops-a"), await tenant(client, "ops-b")
    a, b = await tenant_id_of(pool, "ops-a"), await tenant_id_of(pool, "ops-b")
    await runs_of(pool, a, "bulk", 2500)
    await runs_of(pool, a, "other", 30)
    await runs_of(pool, b, "bulk", 30)
    body = {"kind": "cancel", "filter": {"task": "bulk"}}

    dry = await client.post("/v1/operations", json={**body, "dry_run": True}, headers=auth(key_a))
    assert dry.status_code == 200, dry.text
    assert dry.json() == {"kind": "cancel", "filter": {"task": "bulk"}, "count": 2500,
                          "dry_run": True}
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM operations") == 0
    assert await states(pool, a) == {("bulk", "scheduled"): 2500, ("other", "scheduled"): 30}

    r = await client.post("/v1/operations", json=body, headers=auth(key_a))
    assert r.status_code == 202, r.text
    op = r.json()
    assert r.headers["location"] == f"/v1/operations/{op['id']}"
    assert (op["state"], op["total"], op["processed"]) == ("running", 2500, 0)
    assert op["actor"] == "tenant:ops-a"

    assert await drain(pool) == 13  # 2,500 in batches of 200, no cap
    got = (await client.get(f"/v1/operations/{op['id']}", headers=auth(key_a))).json()
    assert (got["state"], got["total"], got["processed"], got["done"], got["skipped"],
            got["failed"]) == ("completed", 2500, 2500, 2500, 0, 0)
    assert got["finished_at"] and got["failures"] == []
    assert await states(pool, a) == {("bulk", "cancelled"): 2500, ("other", "scheduled"): 30}
    assert await states(pool, b) == {("bulk", "scheduled"): 30}
    async with pool.acquire() as conn:  # each cancel recorded with the operation's actor
        assert await conn.fetchval(
            "SELECT count(*) FROM events WHERE type = 'RunCancelled' AND actor = 'tenant:ops-a'"
        ) == 2500

    # another tenant sees none of it; the list shows it to its own tenant
    assert_problem(await client.get(f"/v1/operations/{op['id']}", headers=auth(key_b)), 404)
    assert (await client.get("/v1/operations", headers=auth(key_b))).json()["items"] == []
    listed = (await client.get("/v1/operations", headers=auth(key_a))).json()["items"]
    assert [o["id"] for o in listed] == [op["id"]]
    # finished: it cannot be cancelled
    assert_problem(await client.post(f"/v1/operations/{op['id']}/cancel", headers=auth(key_a)),
                   409)


async def test_the_selection_is_frozen_and_items_that_no_longer_qualify_are_skipped(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "ops-c")
    tid = await tenant_id_of(pool, "ops-c")
    await runs_of(pool, tid, "t", 5)
    op = (await client.post("/v1/operations", json={"kind": "cancel", "filter": {"task": "t"}},
                            headers=auth(key))).json()
    await runs_of(pool, tid, "t", 3)  # matches too, but after the selection was frozen
    async with pool.acquire() as conn:
        first = await conn.fetchval("SELECT item_id FROM operation_items WHERE seq = 1")
    assert (await client.post(f"/v1/runs/{first}/cancel", headers=auth(key))).status_code == 200
    await drain(pool)
    got = (await client.get(f"/v1/operations/{op['id']}", headers=auth(key))).json()
    assert (got["total"], got["done"], got["skipped"], got["failed"]) == (5, 4, 1, 0)
    assert [(f["item_id"], f["outcome"]) for f in got["failures"]] == [(str(first), "skipped")]
    assert await states(pool, tid) == {("t", "cancelled"): 5, ("t", "scheduled"): 3}


async def test_retry_replay_and_pause_operations_act_once_per_item(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "ops-d")
    tid = await tenant_id_of(pool, "ops-d")
    await runs_of(pool, tid, "r", 4)
    await client.post("/v1/operations", json={"kind": "cancel"}, headers=auth(key))
    await drain(pool)
    retry = (await client.post("/v1/operations", json={
        "kind": "retry", "filter": {"states": ["cancelled"], "task": "r"}},
        headers=auth(key))).json()
    assert retry["total"] == 4
    await drain(pool)
    assert await states(pool, tid) == {("r", "cancelled"): 4, ("r", "scheduled"): 4}
    async with pool.acquire() as conn:
        assert await conn.fetchval(
            "SELECT count(*) FROM runs WHERE tenant_id = $1 AND trigger = 'retry'", tid) == 4
    pause = (await client.post("/v1/operations", json={"kind": "pause", "filter": {"task": "r"}},
                               headers=auth(key))).json()
    assert pause["total"] == 0 and pause["state"] == "completed"  # one-off jobs: none active
    replay = (await client.post("/v1/operations", json={"kind": "replay"},
                                headers=auth(key))).json()
    assert replay["total"] == 0 and replay["state"] == "completed"


async def test_bad_operation_requests_are_problems_that_write_nothing(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "ops-e")
    for body, field in [
        ({}, "kind"),
        ({"kind": "explode"}, "kind"),
        ({"kind": "cancel", "filter": {"error_type": "x"}}, "filter.error_type"),
        ({"kind": "cancel", "filter": {"states": ["succeeded"]}}, "filter.states"),
        ({"kind": "retry", "filter": {"states": ["running"]}}, "filter.states"),
        ({"kind": "replay", "filter": {"task": "x"}}, "filter.task"),
        ({"kind": "cancel", "filter": {"since": "2026-01-01T00:00:00"}}, None),
        ({"kind": "cancel", "filter": {"since": "2026-01-02T00:00:00Z",
                                       "until": "2026-01-01T00:00:00Z"}}, "filter.until"),
        ({"kind": "cancel", "filter": {"nope": 1}}, None),
    ]:
        assert_problem(await client.post("/v1/operations", json=body, headers=auth(key)), 422,
                       field)
    assert_problem(await client.post(f"/v1/operations/{uuid.uuid4()}/cancel",
                                     headers=auth(key)), 404)
    assert_problem(await client.get(f"/v1/operations/{uuid.uuid4()}", headers=auth(key)), 404)
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM operations") == 0


async def test_a_cancelled_operation_stops_where_it_was(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "ops-f")
    tid = await tenant_id_of(pool, "ops-f")
    await runs_of(pool, tid, "c", 10)
    op = (await client.post("/v1/operations", json={"kind": "cancel"}, headers=auth(key))).json()
    assert await work.work_once(pool, store(), SystemClock(), batch=4) == 4
    r = await client.post(f"/v1/operations/{op['id']}/cancel", headers=auth(key))
    assert r.status_code == 200, r.text
    assert (r.json()["state"], r.json()["processed"]) == ("cancelled", 4)
    assert r.json()["cancelled_by"] == "tenant:ops-f"
    assert await drain(pool) == 0
    assert await states(pool, tid) == {("c", "cancelled"): 4, ("c", "scheduled"): 6}


async def test_an_operation_resumes_after_the_api_is_killed_mid_way(
        pool: asyncpg.Pool, db_url: str, topic_prefix: str, tmp_path: Path) -> None:
    """The api process acts on batches of 20; kill -9 it once some are committed, start a new
    one: it completes the operation from where the committed batches left it, and every run
    is cancelled exactly once."""
    cluster = Cluster(database_url=app_url_for(urlsplit(db_url).path.lstrip("/")),
                      kafka_bootstrap=KAFKA_BOOTSTRAP, topic_prefix=topic_prefix, log_dir=tmp_path,
                      extra_env={"OSTINATO_OPERATION_BATCH_SIZE": "20"})
    api = "api"
    try:
        await asyncio.to_thread(cluster.start, (api,))
        async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as http:
            r = await http.post("/v1/tenants", json={"name": "ops-kill"},
                                headers=auth(cluster.admin_key))
            key = r.json()["api_key"]
            tid = uuid.UUID(r.json()["id"])
            await runs_of(pool, tid, "k", 1000)
            r = await http.post("/v1/operations", json={"kind": "cancel"}, headers=auth(key))
            assert r.status_code == 202, r.text
            op_id = r.json()["id"]
            async with pool.acquire() as conn:
                deadline = time.monotonic() + 120
                while await conn.fetchval("SELECT position FROM operations") == 0:
                    assert time.monotonic() < deadline, cluster.tail(api)
                    await asyncio.sleep(0.01)
                cluster.kill(api)  # kill -9, mid-batch or between batches
                at_kill = await conn.fetchval("SELECT position FROM operations")
                cancelled = await conn.fetchval(
                    "SELECT count(*) FROM runs WHERE state = 'cancelled'")
            assert 0 < at_kill < 1000 and at_kill % 20 == 0
            assert cancelled == at_kill  # the batch in flight was rolled back with its position
            await asyncio.to_thread(cluster.start, (api,))
            deadline = time.monotonic() + 300
            while (got := (await http.get(f"/v1/operations/{op_id}",
                                          headers=auth(key))).json())["state"] == "running":
                assert time.monotonic() < deadline, cluster.tail(api)
                await asyncio.sleep(0.2)
        assert (got["state"], got["done"], got["skipped"], got["failed"]) == (
            "completed", 1000, 0, 0)
        async with pool.acquire() as conn:
            assert await conn.fetchval(
                "SELECT count(*) FROM runs WHERE state = 'cancelled'") == 1000
            assert await conn.fetchval(
                "SELECT count(*) FROM events WHERE type = 'RunCancelled'") == 1000
    finally:
        await asyncio.to_thread(cluster.stop)


async def test_a_bulk_cancel_asks_a_running_run_to_stop_as_a_single_cancel_does(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    """The batch path (`runs.cancel_runs`) keeps cancel_run's rule: a waiting run is cancelled
    at once, a running one gets CancelRequested (its worker stops at the next heartbeat)."""
    key = await tenant(client, "ops-g")
    tid = await tenant_id_of(pool, "ops-g")
    await runs_of(pool, tid, "w", 3)
    assert await dispatch(pool) == 3
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    [claimed] = await attempts.claim(tid, p.ClaimRequest(worker_id="w1", max_runs=1))
    op = (await client.post("/v1/operations", json={"kind": "cancel"}, headers=auth(key))).json()
    await drain(pool)
    got = (await client.get(f"/v1/operations/{op['id']}", headers=auth(key))).json()
    assert (got["total"], got["done"], got["skipped"]) == (3, 3, 0)
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, state, cancel_requested FROM runs")
        kinds = await conn.fetch("SELECT stream_id, type FROM events WHERE type IN "
                                 "('RunCancelled', 'CancelRequested')")
    assert sorted((str(r["id"]) == claimed.run_id, r["state"], r["cancel_requested"])
                  for r in rows) == [(False, "cancelled", False), (False, "cancelled", False),
                                     (True, "running", True)]
    assert sorted(k["type"] for k in kinds) == ["CancelRequested", "RunCancelled",
                                                "RunCancelled"]
