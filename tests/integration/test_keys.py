"""API keys with roles, against the real PostgreSQL: issue, list with last use, revoke, rotate
with a grace period; and the matrix of every authenticated route of the api and the worker
gateway against every role — each allowed call gets past authorization, each refused one is a
403 naming the role, and the refused calls together append nothing to the log."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest
from litestar import Litestar
from litestar.routes import HTTPRoute

from ostinato.clock import Clock, FakeClock, SystemClock
from ostinato.domain import roles
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.wire import worker as p
from services.worker_gateway.app import create_app as create_gateway_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.wakeups import ReadySignals
from tests.helpers.api import ADMIN, assert_problem, auth, issue, tenant
from tests.helpers.integration import event_count, store, tenant_id_of

pytestmark = pytest.mark.integration


@pytest.fixture
def api_clock() -> Clock:
    return FakeClock(datetime.now(UTC))


async def test_a_key_is_shown_once_listed_without_its_secret_and_notes_its_last_use(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    operator = await tenant(client, "keys-a")
    viewer = await issue(client, operator, "viewer", "grafana")
    assert viewer["key"].startswith("ost_") and viewer["role"] == "viewer"
    assert (await client.get("/v1/runs", headers=auth(viewer["key"]))).status_code == 200

    listed = (await client.get("/v1/keys", headers=auth(operator))).json()["keys"]
    by_id = {k["id"]: k for k in listed}
    assert set(by_id[viewer["id"]]) == {"id", "name", "role", "pools", "created_at", "active",
                                        "revoked_at", "last_used_at"}  # no key, no hash
    assert by_id[viewer["id"]]["name"] == "grafana" and by_id[viewer["id"]]["active"]
    assert by_id[viewer["id"]]["last_used_at"] is not None  # it was just used
    first = [k for k in listed if k["name"] == ""]
    assert len(first) == 1 and first[0]["role"] == "operator"
    async with pool.acquire() as conn:  # only the hash is stored
        stored = await conn.fetchval("SELECT count(*) FROM api_keys WHERE key_hash = "
                                     "sha256(convert_to($1, 'UTF8'))", viewer["key"])
        anywhere = await conn.fetchval("SELECT count(*) FROM events WHERE data::text LIKE $1",
                                       f"%{viewer['key']}%")
    assert stored == 1 and anywhere == 0


async def test_a_revoked_key_no_longer_authenticates_and_the_last_operator_key_stays(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    operator = await tenant(client, "keys-b")
    submitter = await issue(client, operator, "submitter", "producer")
    r = await client.delete(f"/v1/keys/{submitter['id']}", headers=auth(operator))
    assert r.status_code == 204, r.text
    assert_problem(await client.post("/v1/jobs", json={"name": "x", "task": "t"},
                                     headers=auth(submitter["key"])), 401)
    assert_problem(await client.delete(f"/v1/keys/{submitter['id']}", headers=auth(operator)),
                   409)  # already revoked

    first = next(k for k in (await client.get("/v1/keys", headers=auth(operator))).json()["keys"]
                 if k["name"] == "")
    body = assert_problem(await client.delete(f"/v1/keys/{first['id']}", headers=auth(operator)),
                          409)
    assert "last operator key" in body["detail"]
    assert (await client.get("/v1/keys", headers=auth(operator))).status_code == 200
    async with pool.acquire() as conn:
        actors = await conn.fetch("SELECT actor, type FROM events WHERE type = 'ApiKeyRevoked'")
    assert [(a["actor"], a["type"]) for a in actors] == [("tenant:keys-b", "ApiKeyRevoked")]


async def test_rotation_gives_a_new_key_and_the_old_one_works_until_its_grace_ends(
        client: httpx.AsyncClient, api_clock: FakeClock) -> None:
    operator = await tenant(client, "keys-c")
    worker = await issue(client, operator, "worker", "fleet", pools=["default"])
    r = await client.post(f"/v1/keys/{worker['id']}/rotate", json={"grace_seconds": 600},
                          headers=auth(operator))
    assert r.status_code == 201, r.text
    rotated = r.json()
    new = rotated["key"]
    assert new["key"] != worker["key"] and new["id"] != worker["id"]
    assert (new["name"], new["role"], new["pools"]) == ("fleet", "worker", ["default"])
    assert datetime.fromisoformat(rotated["old_key_expires_at"]) == \
        api_clock.now() + timedelta(seconds=600)

    # A worker key on the api authenticates and is then refused (403); a revoked one is unknown.
    api_clock.advance(599)
    assert_problem(await client.get("/v1/runs", headers=auth(worker["key"])), 403)
    assert (await client.get(f"/v1/keys/{worker['id']}", headers=auth(operator))).json()[
        "active"] is True
    api_clock.advance(2)
    assert_problem(await client.get("/v1/runs", headers=auth(worker["key"])), 401)
    assert_problem(await client.get("/v1/runs", headers=auth(new["key"])), 403)  # the new works
    assert (await client.get(f"/v1/keys/{worker['id']}", headers=auth(operator))).json()[
        "active"] is False
    assert_problem(await client.post(f"/v1/keys/{worker['id']}/rotate", headers=auth(operator)),
                   409)  # a key whose grace is over is revoked


async def test_bad_key_requests_are_problems_that_change_nothing(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    operator = await tenant(client, "keys-d")
    async with pool.acquire() as conn:
        before = await event_count(conn)
    for body, status, field in [
            ({"name": "x", "role": "root"}, 422, "role"),
            ({"name": "", "role": "viewer"}, 422, "name"),
            ({"name": "x", "role": "viewer", "pools": ["default"]}, 422, "pools"),
            ({"name": "x", "role": "worker", "pools": ["nowhere"]}, 422, "pools")]:
        r = await client.post("/v1/keys", json=body, headers=auth(operator))
        assert_problem(r, status, field)
    assert_problem(await client.post(f"/v1/keys/{uuid.uuid4()}/rotate",
                                     json={"grace_seconds": 10**9}, headers=auth(operator)), 422)
    assert_problem(await client.delete(f"/v1/keys/{uuid.uuid4()}", headers=auth(operator)), 404)
    async with pool.acquire() as conn:
        assert await event_count(conn) == before


async def test_a_tenants_keys_are_invisible_to_another_tenant(client: httpx.AsyncClient) -> None:
    a = await tenant(client, "keys-e")
    b = await tenant(client, "keys-f")
    viewer = await issue(client, a, "viewer")
    assert_problem(await client.get(f"/v1/keys/{viewer['id']}", headers=auth(b)), 404)
    assert_problem(await client.delete(f"/v1/keys/{viewer['id']}", headers=auth(b)), 404)
    assert viewer["id"] not in {k["id"] for k in
                                (await client.get("/v1/keys", headers=auth(b))).json()["keys"]}


async def test_the_admin_acts_for_a_named_tenant_and_is_named_in_the_log(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    operator = await tenant(client, "keys-g")
    async with pool.acquire() as conn:
        tid = await conn.fetchval("SELECT id FROM tenants WHERE name = 'keys-g'")
    as_admin = {**auth(ADMIN), "X-Ostinato-Tenant": str(tid)}
    r = await client.post("/v1/jobs", json={"name": "by-admin", "task": "t"}, headers=as_admin)
    assert r.status_code == 201, r.text
    listed = (await client.get("/v1/jobs", headers=auth(operator))).json()
    assert [j["name"] for j in listed["items"]] == ["by-admin"]
    async with pool.acquire() as conn:
        actor = await conn.fetchval("SELECT actor FROM events WHERE type = 'JobCreated'")
    assert actor == "admin"
    assert_problem(await client.get("/v1/jobs", headers=auth(ADMIN)), 403)  # no tenant named
    assert_problem(await client.get("/v1/jobs", headers={
        **auth(ADMIN), "X-Ostinato-Tenant": str(uuid.uuid4())}), 404)
    other = await tenant(client, "keys-h")
    assert_problem(await client.get("/v1/jobs", headers={
        **auth(other), "X-Ostinato-Tenant": str(tid)}), 403)


# -- the matrix ---------------------------------------------------------------------------------

PARAM = re.compile(r"\{(\w+):(\w+)\}")


def _path(template: str) -> str:
    fill = {"uuid": str(uuid.uuid4()), "str": "default", "int": "1", "path": "/x"}
    return PARAM.sub(lambda m: fill[m.group(2)], template)


def routes_of(app: Litestar) -> list[tuple[str, str, str]]:
    """(method, path template, action) of every route of the app."""
    out = []
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            for method in sorted(handler.http_methods - {"OPTIONS", "HEAD"}):
                action = handler.opt.get("action") or roles.default_action(method)
                out.append((method, route.path_format if "{" not in route.path else route.path,
                            action))
    return out


async def _authenticated(http: httpx.AsyncClient,
                         app: Litestar) -> list[tuple[str, str, str]]:
    """The routes that want a key (the rest: health, metrics, the schema, assets, and the web
    UI, which takes a session cookie: tests/e2e/test_ui.py)."""
    out = []
    for method, template, action in routes_of(app):
        if template.startswith("/ui"):
            continue
        if (await http.request(method, _path(template), json={})).status_code == 401:
            out.append((method, template, action))
    return out


async def _matrix(http: httpx.AsyncClient, app: Litestar, keys: dict[str, dict[str, str]],
                  pool: asyncpg.Pool) -> tuple[int, int, int]:
    """(routes, calls, refusals). The refused calls go first and append nothing to the log;
    then every allowed call gets past authentication and authorization."""
    routes = await _authenticated(http, app)
    refused = allowed = 0
    async with pool.acquire() as conn:
        before = await event_count(conn)
    for method, template, action in routes:
        for role, headers in keys.items():
            if not roles.may(role, action):
                r = await http.request(method, _path(template), json={}, headers=headers)
                body = assert_problem(r, 403)
                assert body["detail"] == roles.refusal(role, action), (role, method, template)
                refused += 1
    async with pool.acquire() as conn:
        assert await event_count(conn) == before
    for method, template, action in routes:
        for role, headers in keys.items():
            if roles.may(role, action):
                r = await http.request(method, _path(template), json={}, headers=headers)
                assert r.status_code not in (401, 403), (role, method, template, r.text)
                assert r.status_code < 500, (role, method, template, r.text)
                allowed += 1
    return len(routes), refused + allowed, refused


async def _keys(client: httpx.AsyncClient, pool: asyncpg.Pool, name: str,
                admin_header: bool) -> dict[str, dict[str, str]]:
    operator = await tenant(client, name)
    tid = await tenant_id_of(pool, name)
    keys = {roles.OPERATOR: auth(operator),
            roles.ADMIN: {**auth(ADMIN), **({"X-Ostinato-Tenant": str(tid)} if admin_header
                                            else {})}}
    for role in (roles.VIEWER, roles.SUBMITTER, roles.WORKER):
        keys[role] = auth((await issue(client, operator, role))["key"])
    return keys


async def test_every_api_route_against_every_role(client: httpx.AsyncClient,
                                                  pool: asyncpg.Pool) -> None:
    keys = await _keys(client, pool, "matrix", admin_header=True)
    app = client._transport.app  # type: ignore[attr-defined]
    routes, calls, refused = await _matrix(client, app, keys, pool)
    assert routes >= 50 and calls == routes * len(keys)
    print(f"api matrix: {routes} routes x {len(keys)} roles = {calls} cells, {refused} refused, "
          f"{calls - refused} allowed")


async def test_the_worker_gateway_takes_worker_operator_and_admin_keys_only(
        client: httpx.AsyncClient, gateway: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    keys = await _keys(client, pool, "gw-matrix", admin_header=False)
    app = gateway._transport.app  # type: ignore[attr-defined]
    routes, calls, refused = await _matrix(gateway, app, keys, pool)
    assert routes >= 8 and refused == 2 * routes  # the viewer's and the submitter's
    print(f"gateway matrix: {routes} routes x {len(keys)} roles = {calls} cells, "
          f"{refused} refused, {calls - refused} allowed")


async def test_a_worker_key_limited_to_pools_claims_from_those_only(
        client: httpx.AsyncClient, pool: asyncpg.Pool, db_url: str) -> None:
    operator = await tenant(client, "gw-pools")
    worker = await issue(client, operator, "worker", "fleet", pools=["default"])
    service = Service("worker-gateway", Settings(database_url=db_url, admin_key=ADMIN,
                                                 pools="default,gpu"))
    service.pool = pool
    app = create_gateway_app(service, Attempts(pool, store(), SystemClock(),
                                               lease_ttl_seconds=30), ReadySignals())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://gateway.test") as gw:
        claim = {"worker_id": "w1", "pools": ["default"], "tasks": ["t"], "max_runs": 1,
                 "wait_seconds": 0}
        r = await gw.post(p.CLAIM_PATH, json=claim, headers=auth(worker["key"]))
        assert r.status_code == 200, r.text
        r = await gw.post(p.CLAIM_PATH, json={**claim, "pools": ["default", "gpu"]},
                          headers=auth(worker["key"]))
        body = assert_problem(r, 403)
        assert "default only, not gpu" in body["detail"]
        r = await gw.post(p.CLAIM_PATH, json={**claim, "pools": ["gpu"]}, headers=auth(operator))
        assert r.status_code == 200, r.text  # an operator key serves every pool
