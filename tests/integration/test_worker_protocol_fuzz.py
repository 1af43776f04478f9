"""The worker protocol under generated input (issue "Security and hardening": no 5xx on any
input): every worker-gateway route hit with a worker key and bodies of the right shape with
wrong values, wrong types, huge numbers, deep nesting, bad run ids and stale fencing tokens.
Never a 5xx, every refusal a problem document, and a stale token never changes the run: its
stream gains only `StaleWriteRejected` events, its state and token stay as the claim left
them."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ostinato.clock import SystemClock
from ostinato.wire import worker as p
from services.scheduler.tick import fire_due
from tests.helpers.api import assert_problem, auth
from tests.helpers.integration import dispatch, new_job, new_tenant, store

pytestmark = pytest.mark.integration

OWNER = "fuzz-owner"  # the worker holding the lease; no generated request names it
FUZZ = settings(max_examples=40, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
SINGLE = ("heartbeat", "complete", "fail", "release", "steps")


class Lease:
    def __init__(self, key: str, run_id: str, token: int, version: int) -> None:
        self.key, self.run_id, self.token, self.version = key, run_id, token, version


@pytest.fixture
async def lease(pool: asyncpg.Pool, client: httpx.AsyncClient,
                gateway: httpx.AsyncClient) -> Lease:
    """A tenant's worker key and the one run it holds the lease of (claimed over HTTP)."""
    tenant_id, operator = await new_tenant(pool)
    r = await client.post("/v1/keys", json={"name": "fuzzer", "role": "worker"},
                          headers=auth(operator))
    assert r.status_code == 201, r.text
    key = r.json()["key"]
    await new_job(pool, tenant_id, payload={"n": 1})
    assert len(await fire_due(pool, store(), SystemClock()))
    assert await dispatch(pool) == 1
    r = await gateway.post(p.CLAIM_PATH, json={"worker_id": OWNER, "max_runs": 1},
                           headers=auth(key))
    assert r.status_code == 200, r.text
    [run] = r.json()["runs"]
    version = await pool.fetchval("SELECT max(version) FROM events WHERE stream_id = $1",
                                  uuid.UUID(run["run_id"]))
    return Lease(key, run["run_id"], run["fencing_token"], version)


# -- strategies ----------------------------------------------------------------------------

huge = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from(
    [2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, -1]))
numbers = st.one_of(huge, st.floats(allow_nan=False), st.sampled_from([1e308, -1e308, 0.5]))
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=30))
anything = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12)
bad_ids = st.one_of(st.sampled_from(["", "x", "0", "00000000-0000-0000-0000-000000000000",
                                     "../../v1/jobs", "%00", "a" * 300, str(uuid.uuid4())]),
                    st.text(max_size=80))


def deep(n: int) -> Any:
    value: Any = []
    for _ in range(n):
        value = [value]
    return value


def tokens(current: int) -> st.SearchStrategy[Any]:
    """Any fencing token but the current one: stale ones first, then nonsense."""
    stale = st.one_of(st.integers(-5, current + 5), huge).filter(lambda t: t != current)
    return st.one_of(stale, st.text(max_size=5), st.none(), st.floats(allow_nan=False)
                     .filter(lambda f: f != current))


def error_info() -> st.SearchStrategy[Any]:
    return st.one_of(anything, st.fixed_dictionaries({
        "type": st.one_of(st.text(max_size=300), huge), "message": st.text(max_size=50),
        "retryable": st.one_of(st.booleans(), scalars)},
        optional={"retry_after_seconds": numbers, "classified": scalars}))


def item(run_id: st.SearchStrategy[Any], token: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({"run_id": run_id, "fencing_token": token}, optional={
        "output": anything, "error": error_info(), "logs": st.lists(st.fixed_dictionaries(
            {"t": numbers, "level": st.text(max_size=40), "message": st.text(max_size=20)}),
            max_size=3), "seq": huge, "name": st.text(max_size=20), "tries": huge,
        "duration_ms": numbers, "wait": anything, "child": anything,
        "deadline": st.one_of(numbers, st.text(max_size=30),
                              st.just("2026-12-01T09:00:00"))})


def bodies(lease: Lease, route: str) -> st.SearchStrategy[tuple[str, Any]]:
    """(route, body): the route's own shape with hostile values, or any JSON at all."""
    mine = st.just(lease.run_id)
    stale = tokens(lease.token)
    single = st.tuples(st.just(route), st.one_of(
        st.fixed_dictionaries({"fencing_token": stale}, optional={
            "output": anything, "error": error_info(), "after": huge, "limit": huge,
            "logs": anything}),
        anything))
    batch = st.tuples(st.just("batch"), st.one_of(
        st.fixed_dictionaries({"worker_id": st.text(min_size=1, max_size=300).filter(
            lambda w: w != OWNER)}, optional={
            kind: st.lists(item(st.one_of(mine, bad_ids), stale), max_size=3)
            for kind in ("heartbeats", "completions", "failures", "releases", "steps")}),
        anything))
    claim = st.tuples(st.just("claim"), st.one_of(
        st.fixed_dictionaries({"worker_id": st.one_of(st.text(max_size=300), huge)}, optional={
            "max_runs": huge, "wait_seconds": st.one_of(st.just(0), st.integers(-(10**9), -1),
                                                        st.just(1e308), st.text(max_size=3)),
            "slots": huge, "pools": anything, "payload_versions": anything,
            "versions": anything}),
        anything))
    goodbye = st.tuples(st.just("goodbye"), st.one_of(st.fixed_dictionaries(
        {"worker_id": st.text(max_size=300).filter(lambda w: w != OWNER)}), anything))
    tasks = st.tuples(st.just("tasks"), anything)
    return {"batch": batch, "claim": claim, "goodbye": goodbye, "tasks": tasks}.get(
        route, single)


def names_current_token(body: Any, current: int) -> bool:
    """A generated body that happens to carry the live token could legitimately finish the run;
    the fuzz is about everything else."""
    if isinstance(body, dict):
        if body.get("fencing_token") == current and body.get("fencing_token") is not True:
            return True
        return any(names_current_token(v, current) for v in body.values())
    if isinstance(body, list):
        return any(names_current_token(v, current) for v in body)
    return False


def path_of(route: str, run_id: str) -> str:
    if route in SINGLE:
        return p.run_path(quote(run_id, safe=""), route)  # type: ignore[arg-type]
    return {"batch": p.BATCH_PATH, "claim": p.CLAIM_PATH, "goodbye": p.GOODBYE_PATH,
            "tasks": "/v1/worker/tasks"}[route]


def assert_answered(r: httpx.Response, what: object) -> None:
    assert r.status_code < 500, (what, r.status_code, r.text[:500])
    if r.status_code >= 400:
        assert r.headers["content-type"].startswith("application/problem+json"), (what, r.text)
        assert r.json()["status"] == r.status_code


async def assert_run_unchanged(pool: asyncpg.Pool, lease: Lease) -> None:
    run_id = uuid.UUID(lease.run_id)
    row = await pool.fetchrow("SELECT state, fencing_token FROM runs WHERE id = $1", run_id)
    assert (row["state"], row["fencing_token"]) == ("running", lease.token)
    since = await pool.fetch("SELECT type FROM events WHERE stream_id = $1 AND version > $2",
                             run_id, lease.version)
    assert {e["type"] for e in since} <= {"StaleWriteRejected"}, [e["type"] for e in since]


# -- the fuzz ------------------------------------------------------------------------------

ROUTES = (*SINGLE, "batch", "claim", "goodbye", "tasks")


@pytest.mark.parametrize("route", ROUTES)
@FUZZ
@given(data=st.data())
async def test_a_hostile_worker_gets_no_5xx_and_a_stale_token_changes_nothing(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, lease: Lease, route: str,
        data: st.DataObject) -> None:
    _, body = data.draw(bodies(lease, route))
    if names_current_token(body, lease.token):
        return
    run_id = data.draw(st.one_of(st.just(lease.run_id), bad_ids)) if route in SINGLE \
        else lease.run_id
    r = await gateway.post(path_of(route, run_id), content=json.dumps(body),
                           headers={**auth(lease.key), "Content-Type": "application/json",
                                    "X-Ostinato-Worker": "fuzzer"})
    assert_answered(r, (route, run_id, body))
    await assert_run_unchanged(pool, lease)


@FUZZ
@given(token=st.integers(0, 2**63 - 1),
       route=st.sampled_from(["heartbeat", "complete", "fail", "release", "batch"]))
async def test_stale_tokens_are_409s_recorded_in_the_log(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, lease: Lease, token: int,
        route: str) -> None:
    """Well-formed writes under tokens other than the lease's: each a 409 (per item in a
    batch), each recorded as StaleWriteRejected, the run untouched."""
    if token == lease.token:
        return
    h = auth(lease.key)
    before = await pool.fetchval(
        "SELECT count(*) FROM events WHERE stream_id = $1 AND type = 'StaleWriteRejected'",
        uuid.UUID(lease.run_id))
    error = {"type": "Boom", "message": "late", "retryable": True}
    if route == "batch":
        r = await gateway.post(p.BATCH_PATH, headers=h, json={
            "worker_id": "late-worker",
            "completions": [{"run_id": lease.run_id, "fencing_token": token}],
            "failures": [{"run_id": lease.run_id, "fencing_token": token, "error": error}]})
        assert r.status_code == 200, r.text
        assert [i["status"] for i in r.json()["results"]] == [409, 409]
    else:
        body: dict[str, Any] = {"fencing_token": token}
        if route == "fail":
            body["error"] = error
        r = await gateway.post(p.run_path(lease.run_id, route), json=body,  # type: ignore[arg-type]
                               headers=h)
        assert r.status_code == 409, r.text
    after = await pool.fetchval(
        "SELECT count(*) FROM events WHERE stream_id = $1 AND type = 'StaleWriteRejected'",
        uuid.UUID(lease.run_id))
    assert after > before
    await assert_run_unchanged(pool, lease)


async def test_a_nul_in_a_worker_id_is_a_400(pool: asyncpg.Pool, gateway: httpx.AsyncClient,
                                            lease: Lease) -> None:
    """The fuzz's first find: `{"worker_id": "\\u0000"}` on /batch was a 500."""
    for path in (p.BATCH_PATH, p.GOODBYE_PATH, p.CLAIM_PATH):
        r = await gateway.post(path, json={"worker_id": "\x00"}, headers=auth(lease.key))
        assert_answered(r, path)
        assert r.status_code == 400, (path, r.text)
    await assert_run_unchanged(pool, lease)


@pytest.mark.parametrize("depth", [64, 3000, 20_000])
async def test_deep_nesting_on_every_route_is_a_4xx(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, lease: Lease, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    for route in ROUTES:
        for body in (nested, f'{{"fencing_token": {lease.token}, "output": {nested}}}'
                     if route in SINGLE else f'{{"worker_id": "w", "x": {nested}}}'):
            if route == "complete" and body.startswith("{") and depth <= 64:
                continue  # well-formed: it would complete the run
            r = await gateway.post(path_of(route, lease.run_id), content=body, headers={
                **auth(lease.key), "Content-Type": "application/json"})
            assert_answered(r, (route, depth))
            assert r.status_code >= 400, (route, depth, r.text)
    await assert_run_unchanged(pool, lease)


@pytest.mark.parametrize("pools", [[""], ["a b"], ["default", "Upper"], ["x" * 64], ["-lead"],
                                   ["a\n"]])
async def test_a_claim_naming_an_impossible_pool_is_a_422_naming_pools(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, lease: Lease, pools: list[str]) -> None:
    """Issue 42: `{"pools": [""]}` or `["a b"]` was a 500 (`ValueError: invalid pool name`,
    raised by the topic naming after decoding). A pool name is checked where the claim is
    decoded: a 422 problem naming the field, and nothing claimed."""
    r = await gateway.post(p.CLAIM_PATH, json={"worker_id": "w", "pools": pools},
                           headers=auth(lease.key))
    body = assert_problem(r, 422)
    assert any(e["field"].startswith("pools") for e in body["errors"]), body
    await assert_run_unchanged(pool, lease)
