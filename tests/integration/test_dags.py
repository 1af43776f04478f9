"""DAGs end to end (docs/DAGS.md): the API in-process, an SDK worker through the worker-gateway,
the dispatcher's decision and the scheduler's advance duty (`ostinato.runs.dags.advance_due`)
over the real PostgreSQL. Each node is an ordinary run; its dependants start when their trigger
rule holds; failures make dependants upstream_failed; retries per node; retry from a node and
cancel; cycles refused; another tenant sees nothing."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.client import ApiError, AsyncClient
from ostinato.clock import FakeClock, SystemClock
from ostinato.dags.targets import dag_run_id_for, task_for
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.eventlog.store import EventStore, read_stream
from ostinato.jobs import submit_job
from ostinato.runs import dags as dag_runs
from ostinato.runs.commands import cancel_run
from ostinato.schedules import ScheduleSpec
from ostinato.sdk import PermanentError, Worker, current, task
from ostinato.stores import dags as dag_store
from ostinato.stores import runs
from ostinato.wire.api import JobRequest
from services.reconciler.checks.gaps import check_gaps
from services.scheduler.tick import fire_due, release_retries
from tests.helpers.api import GATEWAY_BASE, assert_problem, auth
from tests.helpers.cli import cli, new_key
from tests.helpers.dags import advance, node
from tests.helpers.integration import dispatch, new_tenant, store
from tests.helpers.waiting import until

pytestmark = pytest.mark.integration

FINAL = ("succeeded", "failed", "cancelled")


async def define(client: httpx.AsyncClient, key: str, name: str, nodes: list[dict[str, Any]],
                 edges: list[tuple[str, str]]) -> dict[str, Any]:
    r = await client.post("/v1/dags", headers=auth(key), json={
        "name": name, "nodes": nodes, "edges": [{"from": a, "to": b} for a, b in edges]})
    assert r.status_code in (200, 201), r.text
    return r.json()


async def start(client: httpx.AsyncClient, key: str, dag_id: str, **body: Any) -> str:
    r = await client.post(f"/v1/dags/{dag_id}/runs", headers=auth(key), json=body or None)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def dag_run(client: httpx.AsyncClient, key: str, run_id: str) -> dict[str, Any]:
    r = await client.get(f"/v1/dag-runs/{run_id}", headers=auth(key))
    assert r.status_code == 200, r.text
    return r.json()


async def dag_timeline(client: httpx.AsyncClient, key: str, run_id: str) -> list[dict[str, Any]]:
    """Every event of a DAG run's timeline, its pages followed by `next_after`."""
    events: list[dict[str, Any]] = []
    after: int | None = 0
    while after is not None:
        r = await client.get(f"/v1/dag-runs/{run_id}/events", params={"after": after},
                             headers=auth(key))
        assert r.status_code == 200, r.text
        events += r.json()["items"]
        after = r.json()["next_after"]
    return events


async def drive(pool: asyncpg.Pool, gw: httpx.AsyncClient, client: httpx.AsyncClient,
                key: str, tasks: list[Any], dag_run_id: str) -> dict[str, Any]:
    """An SDK worker runs the nodes; between looks the test does the dispatcher's and the
    scheduler's part (dispatch, release retries, advance DAG runs) until the DAG run is final."""
    worker = Worker(GATEWAY_BASE, key, tasks, http_client=gw, claim_wait_seconds=0.2,
                    shutdown_grace_seconds=0, concurrency=8)
    running = asyncio.create_task(worker.run())
    try:
        async def finished() -> dict[str, Any] | None:
            await advance(pool)
            await release_retries(pool, store(), SystemClock())
            await dispatch(pool)
            view = await dag_run(client, key, dag_run_id)
            return view if view["state"] in FINAL else None
        return await until(finished, within=600, what=f"DAG run {dag_run_id} final")
    finally:
        await worker.stop()
        await running


def recorder(seen: list[dict[str, Any]], name: str = "dag.step",
             fail: set[str] | None = None) -> Any:
    @task(name)
    async def step(payload: dict[str, Any]) -> dict[str, Any]:
        seen.append(payload)
        if fail and payload["input"]["key"] in fail:
            raise PermanentError("told to fail", type="told_to_fail")
        return {"done": payload["input"]["key"]}
    return step


async def node_runs(pool: asyncpg.Pool, tenant_id: uuid.UUID,
                    view: dict[str, Any]) -> dict[str, Any]:
    async with pool.acquire() as conn:
        return {n["key"]: await runs.by_id(conn, tenant_id, uuid.UUID(n["run_id"]))
                for n in view["nodes"] if n["run_id"]}


def diamonds(count: int) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """j0 → (l1, r1) → j1 → ... → j{count}, plus a node after j0 and the last join: 3·count + 2
    nodes."""
    nodes, edges = [node("j0")], []
    for i in range(1, count + 1):
        nodes += [node(f"l{i}"), node(f"r{i}"), node(f"j{i}")]
        edges += [(f"j{i - 1}", f"l{i}"), (f"j{i - 1}", f"r{i}"), (f"l{i}", f"j{i}"),
                  (f"r{i}", f"j{i}")]
    nodes.append(node("tail"))
    edges += [("j0", "tail"), (f"j{count}", "tail")]
    return nodes, edges


async def test_a_50_node_dag_with_diamonds_runs_each_node_once_after_its_parents(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    nodes, edges = diamonds(16)
    assert len(nodes) == 50
    dag = await define(client, key, "diamonds", nodes, edges)
    assert dag["created"] is True and dag["version"] == 1 and dag["node_count"] == 50
    seen: list[dict[str, Any]] = []
    run_id = await start(client, key, dag["id"])
    view = await drive(pool, gateway, client, key, [recorder(seen)], run_id)

    assert view["state"] == "succeeded"
    assert view["progress"] == {"total": 50, "succeeded": 50}
    assert Counter(p["input"]["key"] for p in seen) == {n["key"]: 1 for n in nodes}
    by_key = {n["key"]: n for n in view["nodes"]}
    rows = await node_runs(pool, tenant_id, view)
    parents_of: dict[str, list[str]] = {}
    for a, b in edges:
        parents_of.setdefault(b, []).append(a)
    for payload in seen:  # parents' outputs by reference: their run ids and output refs
        me = payload["input"]["key"]
        assert payload["dag"]["dag_run_id"] == run_id and payload["dag"]["node"] == me
        assert set(payload["dag"]["parents"]) == set(parents_of.get(me, []))
        for p, ref in payload["dag"]["parents"].items():
            assert ref["run_id"] == by_key[p]["run_id"] and ref["state"] == "succeeded"
            assert ref["output_ref"] == str(rows[p].output_ref)
    for child, parents in parents_of.items():  # never started before its parents ended
        for p in parents:
            assert rows[child].started_at >= rows[p].finished_at, (p, child)
    for n in view["nodes"]:
        assert n["attempts"] == 1 and n["run_state"] == "succeeded" and n["started_at"]
        assert rows[n["key"]].job_id == uuid.UUID(dag["id"])

    r = await client.get(f"/v1/runs/{by_key['l3']['run_id']}", headers=auth(key))
    assert r.json()["dag_run_id"] == run_id and r.json()["dag_node"] == "l3"
    r = await client.get(f"/v1/runs/{by_key['l3']['run_id']}/events", headers=auth(key))
    scheduled = r.json()["items"][0]
    assert scheduled["type"] == "RunScheduled" and scheduled["data"]["trigger"] == "dag"
    assert (scheduled["data"]["dag_run_id"], scheduled["data"]["dag_node"]) == (run_id, "l3")
    events = await dag_timeline(client, key, run_id)  # 102 events: more than a page (100)
    assert [e["version"] for e in events] == list(range(1, len(events) + 1))
    types = Counter(e["type"] for e in events)
    assert types == {"DagRunStarted": 1, "DagNodeReady": 50, "DagNodeFinished": 50,
                     "DagRunFinished": 1}
    async with pool.acquire() as conn:  # the read models are a fold of the log
        live = await snapshot(conn)
        await rebuild(conn)
        assert await snapshot(conn) == live


async def test_a_50_node_dag_with_a_flaky_node_a_failure_and_a_retry_from_the_failed_node(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    """l3 fails once and succeeds on its node retry; r8 fails for good, so j8 and everything
    below it (26 nodes) are upstream_failed while the other branches finish; a retry
    from r8 re-runs r8 and its downstream to success. Every attempt starts after the end of the
    parents' runs it was handed."""
    tenant_id, key = await new_tenant(pool)
    nodes, edges = diamonds(16)
    for n in nodes:
        if n["key"] == "l3":
            n["retry"] = {"max_attempts": 3, "initial_delay": "0s", "max_delay": "0s"}
    dag = await define(client, key, "diamonds-failing", nodes, edges)
    below_r8 = {"r8", "j8", "tail"} | {f"{s}{i}" for i in range(9, 17) for s in "lrj"}
    assert len(below_r8) == 27  # r8 and the 26 below it
    failing = {"r8"}
    ran: list[tuple[str, uuid.UUID, int, dict[str, Any]]] = []

    @task("dag.step")
    async def step(payload: dict[str, Any]) -> dict[str, Any]:
        me, attempt = payload["dag"]["node"], current().attempt
        ran.append((me, current().run_id, attempt, payload["dag"]["parents"]))
        if me == "l3" and attempt == 1:
            raise RuntimeError("l3 fails its first attempt")
        if me in failing:
            raise PermanentError("told to fail", type="told_to_fail")
        return {"done": me}

    run_id = await start(client, key, dag["id"])
    view = await drive(pool, gateway, client, key, [step], run_id)
    assert view["state"] == "failed"
    states = {n["key"]: n["state"] for n in view["nodes"]}
    assert states == {n["key"]: "failed" if n["key"] == "r8" else "upstream_failed"
                      if n["key"] in below_r8 else "succeeded" for n in nodes}
    by_key = {n["key"]: n for n in view["nodes"]}
    assert by_key["l3"]["attempts"] == 2 and by_key["l3"]["generation"] == 0
    assert Counter(k for k, *_ in ran) == {n["key"]: 2 if n["key"] == "l3" else 1
                                           for n in nodes if n["key"] not in below_r8 - {"r8"}}

    failing.clear()
    r = await client.post(f"/v1/dag-runs/{run_id}/nodes/r8/retry", headers=auth(key),
                          json={"reason": "fixed r8"})
    assert r.status_code == 200, r.text
    assert set(r.json()["reset"]) == below_r8
    view = await drive(pool, gateway, client, key, [step], run_id)

    assert view["state"] == "succeeded"
    assert view["progress"] == {"total": 50, "succeeded": 50}
    assert Counter(k for k, *_ in ran) == {n["key"]: 2 if n["key"] in ("l3", "r8") else 1
                                           for n in nodes}
    by_key = {n["key"]: n for n in view["nodes"]}
    assert {k for k, n in by_key.items() if n["generation"] == 1} == {"r8"}
    assert by_key["l3"]["attempts"] == 2 and by_key["r8"]["attempts"] == 1
    parents_of: dict[str, set[str]] = {}
    for a, b in edges:
        parents_of.setdefault(b, set()).add(a)
    async with pool.acquire() as conn:
        for me, my_run, attempt, parents in ran:
            assert set(parents) == parents_of.get(me, set())
            started = [e.occurred_at for e in await read_stream(conn, my_run, tenant_id)
                       if e.type == "RunStarted" and e.event.attempt == attempt]  # type: ignore[attr-defined]
            assert len(started) == 1
            for p, ref in parents.items():  # handed a succeeded run, started after its end
                parent = await runs.by_id(conn, tenant_id, uuid.UUID(ref["run_id"]))
                assert parent is not None and parent.state == ref["state"] == "succeeded"
                assert started[0] >= parent.finished_at, (p, me)
    timeline = await dag_timeline(client, key, run_id)  # more events than a page
    types = Counter(e["type"] for e in timeline)
    assert types == {"DagRunStarted": 1, "DagNodeReady": 24 + 27, "DagNodeFinished": 24 + 27,
                     "DagNodeSkipped": 26, "DagRunRetriedFromNode": 1, "DagRunFinished": 2}
    [l3_end] = [e["data"] for e in timeline
                if e["type"] == "DagNodeFinished" and e["data"]["key"] == "l3"]
    async with pool.acquire() as conn:  # the timeline has the first attempt's start and the last's
        l3_starts = [e.occurred_at for e in await read_stream(
            conn, uuid.UUID(l3_end["run_id"]), tenant_id) if e.type == "RunStarted"]
    assert len(l3_starts) == 2 and l3_end["attempts"] == 2
    assert (datetime.fromisoformat(l3_end["first_started_at"]),
            datetime.fromisoformat(l3_end["started_at"])) == (l3_starts[0], l3_starts[1])


async def test_the_timeline_shows_each_nodes_real_start_and_end_in_order(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    dag = await define(client, key, "chain", [node("a"), node("b"), node("c")],
                       [("a", "b"), ("b", "c")])
    run_id = await start(client, key, dag["id"])
    view = await drive(pool, gateway, client, key, [recorder([])], run_id)
    assert view["state"] == "succeeded"
    rows = await node_runs(pool, tenant_id, view)

    r = await client.get(f"/v1/dag-runs/{run_id}/events", headers=auth(key))
    finished = {e["data"]["key"]: e for e in r.json()["items"]
                if e["type"] == "DagNodeFinished"}
    assert set(finished) == {"a", "b", "c"}
    start_of = {k: datetime.fromisoformat(e["data"]["started_at"]) for k, e in finished.items()}
    end_of = {k: datetime.fromisoformat(e["data"]["finished_at"]) for k, e in finished.items()}
    for k, e in finished.items():  # the run's own times (its RunStarted, its end), not the poll's
        assert (start_of[k], end_of[k]) == (rows[k].started_at, rows[k].finished_at)
        assert e["data"]["attempts"] == 1 and start_of[k] <= end_of[k]
        assert e["data"]["first_started_at"] == e["data"]["started_at"]
        assert end_of[k] <= datetime.fromisoformat(e["occurred_at"])  # noticed afterwards
        async with pool.acquire() as conn:
            ran = {x.type: x.occurred_at for x in await read_stream(conn, rows[k].id,
                                                                   tenant_id)}
        assert (start_of[k], end_of[k]) == (ran["RunStarted"], ran["RunSucceeded"])
    assert end_of["a"] <= start_of["b"] and end_of["b"] <= start_of["c"]  # after its parent


async def test_a_failed_node_makes_its_dependants_upstream_failed_and_all_done_runs(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    dag = await define(client, key, "failing", [
        node("a"), node("b"), node("c"), node("d"), node("cleanup", trigger_rule="all_done"),
        node("any", trigger_rule="one_success"), node("side")],
        [("a", "b"), ("b", "c"), ("c", "d"), ("b", "cleanup"), ("a", "side"),
         ("b", "any"), ("side", "any")])
    seen: list[dict[str, Any]] = []
    run_id = await start(client, key, dag["id"])
    view = await drive(pool, gateway, client, key, [recorder(seen, fail={"b"})], run_id)

    states = {n["key"]: n["state"] for n in view["nodes"]}
    assert states == {"a": "succeeded", "b": "failed", "c": "upstream_failed",
                      "d": "upstream_failed", "cleanup": "succeeded", "any": "succeeded",
                      "side": "succeeded"}
    assert view["state"] == "failed"
    assert view["progress"]["upstream_failed"] == 2 and view["progress"]["failed"] == 1
    b = next(n for n in view["nodes"] if n["key"] == "b")
    assert b["run_state"] == "dead_lettered" and b["last_error"]["type"] == "told_to_fail"
    r = await client.post(f"/v1/runs/{b['run_id']}/retry", headers=auth(key))
    assert "nodes/{key}/retry" in assert_problem(r, 409)["detail"]  # not outside its DAG run
    r = await client.post(f"/v1/dead-letters/{b['run_id']}/replay", headers=auth(key),
                          json={})
    assert_problem(r, 409)
    assert {p["input"]["key"] for p in seen} == {"a", "b", "cleanup", "any", "side"}
    assert next(n for n in view["nodes"] if n["key"] == "c")["run_id"] is None
    r = await client.get(f"/v1/dag-runs/{run_id}/events", headers=auth(key))
    skipped = [e["data"] for e in r.json()["items"] if e["type"] == "DagNodeSkipped"]
    assert [(s["key"], s["state"]) for s in skipped] == [("c", "upstream_failed"),
                                                         ("d", "upstream_failed")]
    assert skipped[0]["cause"] == "b failed"


async def test_a_node_retries_per_its_policy_then_succeeds(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    dag = await define(client, key, "flaky", [
        node("a", "dag.flaky", retry={"max_attempts": 3, "initial_delay": "0s",
                                      "max_delay": "0s"}, timeout_seconds=60),
        node("b")], [("a", "b")])
    tries: list[int] = []

    @task("dag.flaky")
    async def flaky(payload: dict[str, Any]) -> str:
        tries.append(1)
        if len(tries) < 2:
            raise RuntimeError("first try fails")
        return "ok"

    seen: list[dict[str, Any]] = []
    run_id = await start(client, key, dag["id"])
    view = await drive(pool, gateway, client, key, [flaky, recorder(seen)], run_id)
    assert view["state"] == "succeeded"
    a = next(n for n in view["nodes"] if n["key"] == "a")
    assert a["attempts"] == 2 and a["generation"] == 0 and len(tries) == 2
    assert [p["input"]["key"] for p in seen] == ["b"]


async def test_retry_from_a_node_reruns_it_and_its_downstream_in_the_same_dag_run(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    dag = await define(client, key, "retry-me", [node("a"), node("b"), node("c"), node("x")],
                       [("a", "b"), ("b", "c"), ("a", "x")])
    seen: list[dict[str, Any]] = []
    failing = {"b"}
    run_id = await start(client, key, dag["id"])
    view = await drive(pool, gateway, client, key, [recorder(seen, fail=failing)], run_id)
    assert view["state"] == "failed"
    first_b = next(n for n in view["nodes"] if n["key"] == "b")["run_id"]

    r = await client.post(f"/v1/dag-runs/{run_id}/nodes/x/retry", headers=auth(key),
                          json={"reason": "x again"})  # allowed: x is final, a is final
    assert r.status_code == 200, r.text
    failing.clear()
    r = await client.post(f"/v1/dag-runs/{run_id}/nodes/b/retry", headers=auth(key),
                          json={"reason": "fixed the bug"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["reset"] == ["b", "c"] and body["state"] == "running"
    assert body["run_id"] != first_b
    again = await client.post(f"/v1/dag-runs/{run_id}/nodes/b/retry", headers=auth(key))
    assert_problem(again, 409)  # b is running again

    view = await drive(pool, gateway, client, key, [recorder(seen, fail=failing)], run_id)
    assert view["state"] == "succeeded"
    by_key = {n["key"]: n for n in view["nodes"]}
    assert by_key["b"]["generation"] == 1 and by_key["b"]["run_id"] == body["run_id"]
    assert by_key["a"]["generation"] == 0 and by_key["x"]["generation"] == 1
    assert Counter(p["input"]["key"] for p in seen) == {"a": 1, "b": 2, "c": 1, "x": 2}
    r = await client.get(f"/v1/dag-runs/{run_id}/events", headers=auth(key))
    retried = [e for e in r.json()["items"] if e["type"] == "DagRunRetriedFromNode"]
    assert [(e["data"]["key"], e["data"]["reason"]) for e in retried] == [
        ("x", "x again"), ("b", "fixed the bug")]
    assert all(e["actor"].startswith("tenant:") for e in retried)
    assert [e["type"] for e in r.json()["items"]].count("DagRunFinished") == 2


async def test_cancel_cancels_waiting_and_running_nodes(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    dag = await define(client, key, "to-cancel", [node("a"), node("b"), node("c")],
                       [("a", "c"), ("b", "c")])
    run_id = await start(client, key, dag["id"])
    await dispatch(pool)  # a and b queued, no worker: they wait
    r = await client.post(f"/v1/dag-runs/{run_id}/cancel", headers=auth(key),
                          json={"reason": "not today"})
    assert r.status_code == 200, r.text
    assert r.json()["cancelled_runs"] == 2
    assert await advance(pool) == 1
    view = await dag_run(client, key, run_id)
    assert view["state"] == "cancelled" and view["cancel_requested"] is True
    assert {n["key"]: (n["state"], n["run_state"]) for n in view["nodes"]} == {
        "a": ("cancelled", "cancelled"), "b": ("cancelled", "cancelled"),
        "c": ("cancelled", None)}
    assert_problem(await client.post(f"/v1/dag-runs/{run_id}/cancel", headers=auth(key)), 409)


async def test_cancel_stops_a_node_a_worker_is_running_and_its_waiting_nodes(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    dag = await define(client, key, "cancel-running", [
        node("a", "dag.block"), node("b"), node("c")], [("a", "b"), ("a", "c")])
    started = asyncio.Event()
    told: list[bool] = []

    @task("dag.block")
    async def block(payload: dict[str, Any]) -> None:
        started.set()
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:  # the cancel signal, relayed by a heartbeat
            told.append(current().is_cancelled())
            raise

    seen: list[dict[str, Any]] = []
    run_id = await start(client, key, dag["id"])
    worker = Worker(GATEWAY_BASE, key, [block, recorder(seen)], http_client=gateway,
                    claim_wait_seconds=0.2, shutdown_grace_seconds=0, concurrency=8)
    running = asyncio.create_task(worker.run())
    try:
        async def a_running() -> bool:
            await dispatch(pool)
            return started.is_set()
        await until(a_running, within=120, what="node a running on the worker")
        r = await client.post(f"/v1/dag-runs/{run_id}/cancel", headers=auth(key),
                              json={"reason": "stop it"})
        assert r.status_code == 200, r.text
        assert r.json()["cancelled_runs"] == 1

        async def finished() -> dict[str, Any] | None:
            await advance(pool)
            await dispatch(pool)
            view = await dag_run(client, key, run_id)
            return view if view["state"] in FINAL else None
        view = await until(finished, within=120, what="the DAG run final")
    finally:
        await worker.stop()
        await running

    assert told == [True]  # the handler was stopped by the cancel, not by the worker's stop
    assert view["state"] == "cancelled" and seen == []
    assert {n["key"]: (n["state"], n["run_state"]) for n in view["nodes"]} == {
        "a": ("cancelled", "cancelled"), "b": ("cancelled", None), "c": ("cancelled", None)}
    a_run = uuid.UUID(next(n["run_id"] for n in view["nodes"] if n["key"] == "a"))
    async with pool.acquire() as conn:
        types = [e.type for e in await read_stream(conn, a_run, tenant_id)]
    assert types.index("RunStarted") < types.index("CancelRequested") < types.index(
        "RunCancelled") and types[-1] == "RunCancelled"
    r = await client.get(f"/v1/dag-runs/{run_id}/events", headers=auth(key))
    timeline = [(e["type"], e["data"].get("key"), e["data"].get("state"))
                for e in r.json()["items"]]
    assert timeline[-1] == ("DagRunFinished", None, None)
    assert ("DagNodeFinished", "a", "cancelled") in timeline
    assert {t for t in timeline if t[0] == "DagNodeSkipped"} == {
        ("DagNodeSkipped", "b", "cancelled"), ("DagNodeSkipped", "c", "cancelled")}


async def test_a_dag_run_at_an_instant_waits_until_then(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    dag = await define(client, key, "later", [node("a"), node("b")], [("a", "b")])
    at = datetime.now(UTC) + timedelta(hours=1)
    run_id = await start(client, key, dag["id"], at=at.isoformat())
    view = await dag_run(client, key, run_id)
    assert view["state"] == "pending" and view["trigger"] == "at"
    assert all(n["run_id"] is None for n in view["nodes"])
    await advance(pool)
    assert (await dag_run(client, key, run_id))["state"] == "pending"
    await advance(pool, now=at + timedelta(seconds=1))
    view = await dag_run(client, key, run_id)
    assert view["state"] == "running"
    assert [n["key"] for n in view["nodes"] if n["state"] == "active"] == ["a"]


async def test_advancing_twice_creates_no_second_node_run(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    dag = await define(client, key, "once", [node("a"), node("b")], [("a", "b")])
    run_id = await start(client, key, dag["id"])
    view = await dag_run(client, key, run_id)
    a_run = uuid.UUID(view["nodes"][0]["run_id"])
    assert a_run == dag_runs.node_run_id(uuid.UUID(run_id), "a", 0)
    async with pool.acquire() as conn:  # a ends (cancelled: the quickest end without a worker)
        await cancel_run(conn, store(), tenant_id=tenant_id, run_id=a_run, actor="test")
    counts = await asyncio.gather(advance(pool), advance(pool), advance(pool))
    assert sum(counts) == 1  # one advanced it; the others skipped the locked row or found none
    assert await advance(pool) == 0
    r = await client.get(f"/v1/dag-runs/{run_id}/events", headers=auth(key))
    types = [e["type"] for e in r.json()["items"]]
    assert types == ["DagRunStarted", "DagNodeReady", "DagNodeFinished", "DagNodeSkipped",
                     "DagRunFinished"]


async def test_definitions_are_validated_and_versioned(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    r = await client.post("/v1/dags", headers=auth(key), json={
        "name": "loop", "nodes": [node("a"), node("b"), node("c")],
        "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}, {"from": "c", "to": "a"}]})
    body = assert_problem(r, 422, "edges")
    assert body["cycle"] == ["a", "b", "c", "a"] and "a -> b -> c -> a" in body["detail"]
    r = await client.post("/v1/dags", headers=auth(key), json={
        "name": "bad", "nodes": [node("a")], "edges": [{"from": "a", "to": "zz"}]})
    assert_problem(r, 422, "edges[0].to")
    r = await client.post("/v1/dags", headers=auth(key), json={
        "name": "bad", "nodes": [node("a", pool="nowhere")]})
    assert_problem(r, 422, "nodes[0].pool")
    r = await client.get("/v1/dags", headers=auth(key))
    assert r.json()["items"] == []  # nothing was written

    one = await define(client, key, "v", [node("a"), node("b")], [("a", "b")])
    same = await define(client, key, "v", [node("b"), node("a")], [("a", "b")])
    assert same["created"] is False and same["version"] == 1 and same["id"] == one["id"]
    two = await define(client, key, "v", [node("a"), node("b")], [("b", "a")])
    assert two["created"] is True and two["version"] == 2 and two["id"] == one["id"]
    assert two["version_hash"] != one["version_hash"]
    got = (await client.get(f"/v1/dags/{one['id']}", headers=auth(key))).json()
    assert got["version"] == 2 and got["edges"] == [{"from": "b", "to": "a"}]
    listed = (await client.get("/v1/dags", headers=auth(key))).json()["items"]
    assert [d["name"] for d in listed] == ["v"]
    # back to the first definition (schemathesis found this a 500): a change, so version 3
    back = await define(client, key, "v", [node("a"), node("b")], [("a", "b")])
    assert (back["created"], back["version"], back["version_hash"]) == (
        True, 3, one["version_hash"])


async def test_another_tenants_key_sees_nothing(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    _, other = await new_tenant(pool)
    dag = await define(client, key, "mine", [node("a"), node("b")], [("a", "b")])
    run_id = await start(client, key, dag["id"])
    for method, path in [("GET", f"/v1/dags/{dag['id']}"), ("POST", f"/v1/dags/{dag['id']}/runs"),
                         ("GET", f"/v1/dags/{dag['id']}/runs"),
                         ("GET", f"/v1/dag-runs/{run_id}"),
                         ("GET", f"/v1/dag-runs/{run_id}/events"),
                         ("POST", f"/v1/dag-runs/{run_id}/cancel"),
                         ("POST", f"/v1/dag-runs/{run_id}/nodes/a/retry")]:
        r = await client.request(method, path, headers=auth(other))
        assert_problem(r, 404)
    assert (await client.get("/v1/dags", headers=auth(other))).json()["items"] == []
    assert (await dag_run(client, key, run_id))["state"] == "running"  # untouched


async def test_a_dag_job_runs_the_dag_on_its_cron_across_a_dst_change(
        pool: asyncpg.Pool) -> None:
    """A job whose task is `dag:<id>` starts one DAG run per occurrence through the same
    scheduler: the daily 02:30 Europe/Berlin cron across the spring-forward of 2026-03-29 (02:30
    does not exist that night: shift_forward runs it at 03:00 CEST), once per local day."""
    t0 = datetime(2026, 3, 26, 12, 0, tzinfo=UTC)
    clock = FakeClock(t0)
    tenant_id, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        dag, _ = await dag_runs.define(
            conn, store(clock), tenant_id=tenant_id, name="nightly",
            document={"nodes": [node("extract"), node("load")],
                      "edges": [{"from": "extract", "to": "load"}]},
            rules=dag_runs.Rules(), actor="test")
        job, _ = await submit_job(
            conn, store(clock), clock, tenant_id=tenant_id, request=JobRequest(
                name="nightly-etl", task=task_for(dag.id), schedule=ScheduleSpec(
                    cron="30 2 * * *", timezone="Europe/Berlin", start_at=t0)),
            pools=("default",), max_payload_bytes=1024, actor="test")
    started: list[datetime] = []
    t = t0
    while t < datetime(2026, 4, 1, 0, 0, tzinfo=UTC):
        t += timedelta(minutes=15)
        clock.set(t)
        assert await fire_due(pool, store(clock), clock) == []  # no plain runs
        assert await fire_due(pool, store(clock), clock) == []
        while await advance(pool, now=t):
            pass
    async with pool.acquire() as conn:
        made = await dag_store.runs_of(conn, tenant_id, dag.id, 100)
        for run in made:
            started.append(run.scheduled_for)
            assert run.id == dag_run_id_for(job.id, run.scheduled_for)
            assert run.trigger == "schedule" and run.job_id == job.id and run.state == "running"
        nodes = await dag_store.nodes(conn, [r.id for r in made])
        roots = [await runs.by_id(conn, tenant_id, n.run_id) for r in made
                 for n in nodes[r.id] if n.run_id]
    assert sorted(started) == [
        datetime(2026, 3, 27, 1, 30, tzinfo=UTC), datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # 03:00 CEST: the first instant after the gap
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC), datetime(2026, 3, 31, 0, 30, tzinfo=UTC)]
    assert len(roots) == 5  # each DAG run started its root, as a run of the job's occurrence
    assert {(r.job_id, r.task) for r in roots if r} == {(job.id, "dag.step")}
    assert sorted(r.scheduled_for for r in roots if r) == sorted(started)


async def test_the_reconciler_sees_a_dag_jobs_occurrences_and_repairs_one_with_a_dag_run(
        pool: asyncpg.Pool) -> None:
    """A DAG job's occurrence is a DAG run: one whose roots the advance duty has not created yet
    is no gap, and a slot the scheduler silently skipped is repaired with a DAG run (trigger
    `repair`, the occurrence's own id), never with a plain run of the task `dag:<id>`."""
    t0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    clock = FakeClock(t0)
    tenant_id, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        dag, _ = await dag_runs.define(
            conn, store(clock), tenant_id=tenant_id, name="minutely",
            document={"nodes": [node("only")], "edges": []}, rules=dag_runs.Rules(),
            actor="test")
        job, _ = await submit_job(
            conn, store(clock), clock, tenant_id=tenant_id, request=JobRequest(
                name="minutely-etl", task=task_for(dag.id), schedule=ScheduleSpec(
                    every="1m", start_at=t0, misfire="catch_up")),
            pools=("default",), max_payload_bytes=1024, actor="test")
    clock.set(t0 + timedelta(seconds=5))
    assert await fire_due(pool, store(clock), clock) == []  # slot 0: a DAG run, no root yet
    # A faulty writer moves the job past slots 1 and 2 with neither a DAG run nor a skip.
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE jobs SET next_slot = $2, next_run_at = $2 WHERE id = $1",
                           job.id, t0 + timedelta(minutes=3))
    clock.set(t0 + timedelta(minutes=2, seconds=50))
    missed = await check_gaps(pool, store(clock), clock, window=timedelta(hours=1),
                              grace=timedelta(seconds=30))
    assert missed == 2  # slots 1 and 2; slot 0's DAG run counts before its root exists
    async with pool.acquire() as conn:
        made = await dag_store.runs_of(conn, tenant_id, dag.id, 100)
        plain = await runs.page(conn, tenant_id, job_id=job.id, state=None,
                                after=(None, None), limit=10)
    assert sorted((r.scheduled_for, r.trigger) for r in made) == [
        (t0, "schedule"), (t0 + timedelta(minutes=1), "repair"),
        (t0 + timedelta(minutes=2), "repair")]
    assert all(r.id == dag_run_id_for(job.id, r.scheduled_for) for r in made)
    assert plain == []  # nothing runs the task dag:<id> itself
    while await advance(pool, now=clock.now()):
        pass
    assert await check_gaps(pool, store(clock), clock, window=timedelta(hours=1),
                            grace=timedelta(seconds=30)) == 0
    async with pool.acquire() as conn:
        roots = await runs.page(conn, tenant_id, job_id=job.id, state=None,
                                after=(None, None), limit=10)
    assert sorted(r.scheduled_for for r in roots) == [t0 + timedelta(minutes=k) for k in range(3)]
    assert {r.task for r in roots} == {"dag.step"}


async def test_a_dag_job_must_name_a_dag_of_its_tenant(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, key = await new_tenant(pool)
    _, other = await new_tenant(pool)
    dag = await define(client, key, "mine", [node("a")], [])
    for task_name in (f"dag:{uuid.uuid4()}", "dag:nope"):
        r = await client.post("/v1/jobs", headers=auth(key), json={
            "name": "j", "task": task_name, "schedule": {"cron": "0 3 * * *"}})
        assert_problem(r, 422, "task")
    r = await client.post("/v1/jobs", headers=auth(other), json={
        "name": "j", "task": f"dag:{dag['id']}", "schedule": {"cron": "0 3 * * *"}})
    assert_problem(r, 422, "task")
    r = await client.post("/v1/jobs", headers=auth(key), json={
        "name": "j", "task": f"dag:{dag['id']}", "schedule": {"cron": "0 3 * * *"}})
    assert r.status_code == 201, r.text


async def test_the_client_and_the_cli_define_run_cancel_and_retry(
        api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    async with AsyncClient(api_url, key) as client:
        dag = await client.dags.define(name="etl", nodes=[node("a"), node("b")],
                                       edges=[{"from": "a", "to": "b"}])
        assert dag.created and dag.version == 1
        with pytest.raises(ApiError) as refused:
            await client.dags.define(name="loop", nodes=[node("a"), node("b")],
                                     edges=[{"from": "a", "to": "b"}, {"from": "b", "to": "a"}])
        assert refused.value.status == 422 and "a -> b -> a" in refused.value.problem.detail
        assert [d.name async for d in client.dags.list()] == ["etl"]
        started = await client.dags.run(dag.id)
        view = await client.dag_runs.get(started.id)
        assert view.state == "running" and [n.state for n in view.nodes] == ["active",
                                                                              "waiting"]
        assert [r.id for r in await client.dags.runs(dag.id)] == [started.id]
        dag_job = await client.jobs.create(name="etl-job", task=f"dag:{dag.id}",
                                           schedule={"cron": "0 3 * * *"})
        triggered = [await client.jobs.trigger(dag_job.id, request_key="once")
                     for _ in range(2)]
        assert [(t.run_id, t.created) for t in triggered] == [(None, True), (None, False)]
        assert triggered[0].dag_run_id == triggered[1].dag_run_id
        assert (await client.dag_runs.get(triggered[0].dag_run_id)).trigger == "manual"
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    code, out, err = await cli(tmp_path, "dags", "list", env=env)
    assert code == 0, err
    assert "etl" in out and out.splitlines()[0].split()[:3] == ["ID", "NAME", "VERSION"]
    code, out, err = await cli(tmp_path, "dag-runs", "get", str(started.id), "-o", "json",
                               env=env)
    assert code == 0, err
    assert json.loads(out)["progress"] == {"total": 2, "active": 1, "waiting": 1}
    code, out, err = await cli(tmp_path, "dag-runs", "retry", str(started.id), "a", env=env)
    assert code == 1 and "still running" in err  # a's run has not ended
    code, out, err = await cli(tmp_path, "dag-runs", "cancel", str(started.id), "--reason",
                               "test", "-o", "json", env=env)
    assert code == 0, err
    assert json.loads(out)["cancelled_runs"] == 1
    code, out, err = await cli(tmp_path, "dags", "define", "-", env=env, stdin=json.dumps(
        {"name": "etl", "nodes": [node("a")]}))
    assert code == 0, err
    code, out, err = await cli(tmp_path, "-o", "json", "dags", "get", str(dag.id), env=env)
    assert code == 0, err
    assert json.loads(out)["version"] == 2


class _CrashAfterAppend(EventStore):
    """Appends, then fails before the commit: as a scheduler killed mid-transaction."""

    async def append(self, conn: asyncpg.Connection, events: Any) -> Any:
        await super().append(conn, events)
        raise ConnectionResetError("killed before the commit")


async def test_a_crash_before_the_commit_leaves_the_node_to_the_next_advance(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    dag = await define(client, key, "crashy", [node("a"), node("b"), node("c")],
                       [("a", "b"), ("a", "c")])
    run_id = await start(client, key, dag["id"])
    a_run = dag_runs.node_run_id(uuid.UUID(run_id), "a", 0)
    async with pool.acquire() as conn:
        await cancel_run(conn, store(), tenant_id=tenant_id, run_id=a_run, actor="test")
        crashing = _CrashAfterAppend(SystemClock(), store().topics)
        with pytest.raises(ConnectionResetError):
            await dag_runs.advance_due(conn, crashing, now=datetime.now(UTC), batch_size=10,
                                       actor="scheduler", rules=dag_runs.Rules())
    view = await dag_run(client, key, run_id)
    assert {n["key"]: n["state"] for n in view["nodes"]} == {
        "a": "active", "b": "waiting", "c": "waiting"}  # nothing of the crashed advance stayed
    assert await advance(pool) == 1
    assert await advance(pool) == 0
    r = await client.get(f"/v1/dag-runs/{run_id}/events", headers=auth(key))
    assert [e["type"] for e in r.json()["items"]] == [
        "DagRunStarted", "DagNodeReady", "DagNodeFinished", "DagNodeSkipped", "DagNodeSkipped",
        "DagRunFinished"]
    assert (await dag_run(client, key, run_id))["state"] == "cancelled"


async def test_triggering_a_dag_job_starts_one_dag_run_per_request_key(
        pool: asyncpg.Pool, client: httpx.AsyncClient, gateway: httpx.AsyncClient) -> None:
    """`POST /v1/jobs/{id}/trigger` of a DAG job starts a DAG run now (trigger `manual`,
    answered as `dag_run_id`), pending until the advance duty starts its roots; the same
    request key again starts nothing and answers the same DAG run; the trigger is audited."""
    _, key = await new_tenant(pool)
    dag = await define(client, key, "etl", [node("a"), node("b")], [("a", "b")])
    r = await client.post("/v1/jobs", headers=auth(key), json={
        "name": "etl-job", "task": f"dag:{dag['id']}", "schedule": {"cron": "0 3 * * *"}})
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    first = await client.post(f"/v1/jobs/{job_id}/trigger", headers=auth(key),
                              json={"request_key": "k1"})
    assert first.status_code == 201, first.text
    body = first.json()
    assert (body["run_id"], body["trigger"], body["created"], body["job_id"]) == \
        (None, "manual", True, job_id)
    dag_run_id = body["dag_run_id"]
    view = await dag_run(client, key, dag_run_id)
    assert (view["state"], view["trigger"], view["job_id"]) == ("pending", "manual", job_id)
    assert [n["state"] for n in view["nodes"]] == ["waiting", "waiting"]

    resent = await client.post(f"/v1/jobs/{job_id}/trigger", headers=auth(key),
                               json={"request_key": "k1"})
    assert resent.status_code == 200, resent.text
    assert (resent.json()["dag_run_id"], resent.json()["created"]) == (dag_run_id, False)
    made = (await client.get(f"/v1/dags/{dag['id']}/runs", headers=auth(key))).json()["items"]
    assert [m["id"] for m in made] == [dag_run_id]

    assert await advance(pool) >= 1  # the scheduler's duty starts the root
    view = await dag_run(client, key, dag_run_id)
    assert view["state"] == "running" and [n["state"] for n in view["nodes"]] == ["active",
                                                                                "waiting"]
    seen: list[dict[str, Any]] = []
    final = await drive(pool, gateway, client, key, [recorder(seen)], dag_run_id)
    assert final["state"] == "succeeded"
    assert [p["input"]["key"] for p in seen] == ["a", "b"]
    again = await client.post(f"/v1/jobs/{job_id}/trigger", headers=auth(key),
                              json={"request_key": "k1"})
    assert (again.status_code, again.json()["dag_run_id"]) == (200, dag_run_id)
    made = (await client.get(f"/v1/dags/{dag['id']}/runs", headers=auth(key))).json()["items"]
    assert [m["id"] for m in made] == [dag_run_id]
    plain = (await client.get("/v1/runs", params={"job_id": job_id},
                              headers=auth(key))).json()["items"]
    assert sorted(r["task"] for r in plain) == ["dag.step", "dag.step"]  # the nodes' runs only

    other = await client.post(f"/v1/jobs/{job_id}/trigger", headers=auth(key),
                              json={"request_key": "k2"})
    assert other.status_code == 201 and other.json()["dag_run_id"] != dag_run_id
    audit = (await client.get("/v1/audit", params={"action": "job.trigger"},
                              headers=auth(key))).json()["items"]
    assert sorted((a["status"], a["after"]["dag_run_id"]) for a in audit) == sorted(
        [(201, dag_run_id), (200, dag_run_id), (200, dag_run_id),
         (201, other.json()["dag_run_id"])])
    assert_problem(await client.post(f"/v1/jobs/{job_id}/trigger", headers=auth(key),
                                     json={"request_key": ""}), 422, "request_key")
