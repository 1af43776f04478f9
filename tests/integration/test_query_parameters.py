"""A query parameter a route does not take is a 422 naming it, never ignored (issue 42:
`GET /v1/runs?task=nosuchtask` answered every run), on every documented route, found from the
app's own routes so a route added later is covered; date-time parameters refuse numbers."""

from __future__ import annotations

import re
import uuid

import asyncpg
import httpx
import pytest
from litestar.routes import HTTPRoute

from ostinato.clock import SystemClock
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from services.api.app import create_app
from services.scheduler.tick import fire_due
from tests.helpers.api import ADMIN, assert_problem, auth, tenant
from tests.helpers.integration import store

pytestmark = pytest.mark.integration

ACT_FOR = "X-Ostinato-Tenant"


def documented_routes(method: str) -> list[str]:
    """Every documented path of the API with `method`, path parameters filled in."""
    app = create_app(Service("api", Settings()), store())
    paths: set[str] = set()
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            if method in handler.http_methods and handler.include_in_schema:
                paths.add(re.sub(r"\{(\w+):(\w+)\}", lambda m: str(uuid.uuid4())
                                 if m.group(2) == "uuid" else "x", route.path))
    return sorted(paths)


GET_ROUTES = documented_routes("GET")


def test_the_list_routes_are_among_those_checked() -> None:
    for path in ("/v1/runs", "/v1/jobs", "/v1/audit", "/v1/dead-letters", "/v1/tenants",
                 "/v1/operations", "/v1/dags", "/v1/keys", "/v1/tasks", "/v1/pools"):
        assert path in GET_ROUTES


@pytest.fixture
async def acting(client: httpx.AsyncClient, pool: asyncpg.Pool) -> dict[str, str]:
    """The admin key acting for a tenant: allowed on every route, tenant's or admin's."""
    await tenant(client, "unknown-parameters")
    tenant_id = await pool.fetchval("SELECT id FROM tenants WHERE name = 'unknown-parameters'")
    return {**auth(ADMIN), ACT_FOR: str(tenant_id)}


@pytest.mark.parametrize("path", GET_ROUTES)
async def test_an_unknown_query_parameter_is_a_422_naming_it(
        client: httpx.AsyncClient, acting: dict[str, str], path: str) -> None:
    r = await client.get(path, params={"no_such_filter": "x"}, headers=acting)
    assert [e["field"] for e in assert_problem(r, 422)["errors"]] == ["no_such_filter"]


async def test_a_list_route_still_takes_what_it_declares(
        client: httpx.AsyncClient, acting: dict[str, str]) -> None:
    """Declared parameters, under their wire names (`state`, `from`, `to`), are accepted."""
    r = await client.get("/v1/runs", params={"state": "queued", "limit": 5}, headers=acting)
    assert r.status_code == 200, r.text
    r = await client.get("/v1/audit", params={"from": "2026-01-01T00:00:00Z",
                                              "to": "2027-01-01T00:00:00Z"}, headers=acting)
    assert r.status_code == 200, r.text
    body = assert_problem(await client.get("/v1/runs", params={
        "tag": "a", "state": "queued", "after": "b"}, headers=acting), 422)
    assert [e["field"] for e in body["errors"]] == ["tag", "after"]


async def test_an_unknown_parameter_on_a_create_changes_nothing(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "unknown-create")
    r = await client.post("/v1/jobs", params={"dry_run": "true"}, headers=auth(key),
                          json={"name": "not-made", "schedule": {"at": "2026-12-01T09:00:00Z"}})
    assert_problem(r, 422, "dry_run")
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE name = 'not-made'") == 0


async def test_the_key_is_checked_before_an_unknown_parameter(
        client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/v1/runs", params={"task": "x"}), 401)
    assert_problem(await client.get("/v1/runs", params={"task": "x"},
                                    headers=auth("no-such-key")), 401)


@pytest.mark.parametrize("name", ["to", "from"])
@pytest.mark.parametrize("value", ["0.5", "0", "1764579600", "2026-12-01T09:00:00"])
async def test_an_audit_bound_must_be_a_date_time(client: httpx.AsyncClient, name: str,
                                                  value: str) -> None:
    """`GET /v1/audit?to=0.5` was read as an epoch time (1970)."""
    assert_problem(await client.get("/v1/audit", params={name: value}, headers=auth(ADMIN)),
                   422, name)


async def test_runs_filter_by_task_pool_and_scheduled_range(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    """The filters a script reaches for on GET /v1/runs narrow it, tenant-scoped: a task no
    run has lists nothing (it once listed every run)."""
    key = await tenant(client, "run-filters")
    other = await tenant(client, "run-filters-other")
    made = {}
    for name, at in (("alpha", "2025-06-01T09:00:00Z"), ("beta", "2025-06-02T09:00:00Z")):
        r = await client.post("/v1/jobs", json={"name": name, "task": name,
                                                "schedule": {"at": at}}, headers=auth(key))
        assert r.status_code == 201, r.text
        made[name] = r.json()["id"]
    r = await client.post("/v1/jobs", json={"name": "alpha", "task": "alpha", "schedule": {
        "at": "2025-06-01T09:00:00Z"}}, headers=auth(other))
    assert r.status_code == 201, r.text
    await fire_due(pool, store(), SystemClock())  # both are past: due now

    async def jobs_of(**params: str) -> list[str]:
        r = await client.get("/v1/runs", params=params, headers=auth(key))
        assert r.status_code == 200, r.text
        return [i["job_id"] for i in r.json()["items"]]

    assert await jobs_of() == [made["beta"], made["alpha"]]
    assert await jobs_of(task="alpha") == [made["alpha"]]
    assert await jobs_of(task="nosuchtask") == []
    assert await jobs_of(pool="default", task="beta") == [made["beta"]]
    assert await jobs_of(pool="nosuchpool") == []
    assert await jobs_of(since="2025-06-02T00:00:00Z") == [made["beta"]]
    assert await jobs_of(until="2025-06-02T00:00:00Z") == [made["alpha"]]
    assert_problem(await client.get("/v1/runs", params={"since": "0.5"}, headers=auth(key)),
                   422, "since")
