"""Inputs that used to answer 500 or a reset connection (issue "Security and hardening",
measured items): a batch racing itself on one idempotency key, a reused key with another body,
JSON nested thousands deep, schedule instants at the ends of the calendar, limits past the
database's integers, and a body far over the limit sent to a real server (the api's and the
worker-gateway's). Each gets a problem
document (4xx) and changes nothing."""

from __future__ import annotations

import asyncio
from collections import Counter

import asyncpg
import httpx
import pytest

from ostinato.clock import SystemClock
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.wire import worker as p
from services.worker_gateway.app import MAX_BODY_BYTES
from services.worker_gateway.app import create_app as create_gateway_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.wakeups import ReadySignals
from tests.helpers.api import ADMIN, assert_problem, auth, tenant
from tests.helpers.integration import store

pytestmark = pytest.mark.integration


async def jobs_named(pool: asyncpg.Pool, name: str) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM jobs WHERE name = $1", name))


async def test_a_batch_racing_itself_on_one_key_creates_one_job_and_no_error(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    key = await tenant(client, "racer")
    body = {"jobs": [{"name": "race", "idempotency_key": "k-1"}]}
    for _ in range(5):
        answers = await asyncio.gather(*(client.post("/v1/jobs/batch", json=body,
                                                     headers=auth(key)) for _ in range(8)))
        assert Counter(a.status_code for a in answers) == {200: 8}, [a.text for a in answers]
        created = [a.json()["items"][0]["created"] for a in answers]
        ids = {a.json()["items"][0]["id"] for a in answers}
        assert len(ids) == 1 and created.count(True) <= 1
    assert await jobs_named(pool, "race") == 1


async def test_a_key_reused_with_another_body_is_a_conflict_naming_the_key(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    key = await tenant(client, "reuser")
    first = {"name": "pay", "idempotency_key": "order-7", "payload": {"amount": 10}}
    assert (await client.post("/v1/jobs", json=first, headers=auth(key))).status_code == 201
    assert (await client.post("/v1/jobs", json=first, headers=auth(key))).status_code == 200
    other = {**first, "payload": {"amount": 99}}
    body = assert_problem(await client.post("/v1/jobs", json=other, headers=auth(key)), 409)
    assert "order-7" in body["detail"]
    body = assert_problem(await client.post("/v1/jobs/batch", json={"jobs": [other]},
                                            headers=auth(key)), 409)
    assert "order-7" in body["detail"]
    twice = {"jobs": [{**first, "idempotency_key": "order-8"},
                      {**other, "idempotency_key": "order-8"}]}
    assert_problem(await client.post("/v1/jobs/batch", json=twice, headers=auth(key)), 409)
    assert await jobs_named(pool, "pay") == 1


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/jobs/batch", "/v1/schedules/preview"])
async def test_json_nested_thousands_deep_is_a_400(pool: asyncpg.Pool, client: httpx.AsyncClient,
                                                   path: str) -> None:
    key = await tenant(client, "nester")
    deep = b'{"name": "deep", "payload": ' + b"[" * 3000 + b"]" * 3000 + b"}"
    r = await client.post(path, content=deep, headers={**auth(key),
                                                       "Content-Type": "application/json"})
    assert_problem(r, 400)
    assert await jobs_named(pool, "deep") == 0


@pytest.mark.parametrize("instant", ["9999-12-31T00:00:00Z", "0001-01-01T00:00:00Z"])
@pytest.mark.parametrize("kind", ["cron", "every", "at"])
async def test_schedule_instants_at_the_ends_of_the_calendar_are_a_422(
        pool: asyncpg.Pool, client: httpx.AsyncClient, instant: str, kind: str) -> None:
    key = await tenant(client, f"ends-{kind}-{instant[:4]}")
    schedule = {"cron": {"cron": "0 9 * * *", "start_at": instant},
                "every": {"every": "1h", "start_at": instant},
                "at": {"at": instant}}[kind]
    for path, body in (("/v1/schedules/preview", {"schedule": schedule}),
                       ("/v1/jobs", {"name": "ends", "schedule": schedule})):
        r = await client.post(path, json=body, headers=auth(key))
        assert r.status_code < 500, r.text
        if r.status_code != 200 and r.status_code != 201:
            assert_problem(r, 422)
    # 0001 is in the past: an `at` then is due now; 9999 has no next occurrence in range
    assert await jobs_named(pool, "ends") <= 1


async def test_limits_past_the_databases_integers_are_a_422(client: httpx.AsyncClient) -> None:
    key = await tenant(client, "limiter")
    r = await client.put("/v1/limits/tasks/report", json={"max_concurrency": 2**31},
                         headers=auth(key))
    assert_problem(r, 422, "max_concurrency")
    for field, value in (("rate_per_second", 1e300), ("burst", 1e300)):
        r = await client.put("/v1/limits/tasks/report", json={field: value}, headers=auth(key))
        assert_problem(r, 422, field)
    r = await client.put("/v1/limits/tasks/report", json={"max_concurrency": 1_000_000},
                         headers=auth(key))
    assert r.status_code == 200, r.text  # the documented maximum itself is fine


async def test_a_body_far_over_the_limit_gets_a_413_problem_not_a_reset(api_url: str) -> None:
    async with httpx.AsyncClient(base_url=api_url, timeout=60) as http:
        r = await http.post("/v1/tenants", content=b"{" + b" " * (11 << 20) + b"}",
                            headers={**auth(ADMIN), "Content-Type": "application/json"})
        assert_problem(r, 413)
        assert (await http.get("/livez")).status_code == 200  # the server is still there


async def test_a_body_far_over_the_gateways_limit_gets_a_413_problem_not_a_reset(
        pool: asyncpg.Pool, db_url: str) -> None:
    service = Service("worker-gateway", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    server = HttpServer(create_gateway_app(service, attempts, ReadySignals()), "127.0.0.1", 0)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}",
                                     timeout=60) as http:
            r = await http.post(p.BATCH_PATH, content=b"{" + b" " * (MAX_BODY_BYTES + 1) + b"}",
                                headers={**auth(ADMIN), "Content-Type": "application/json"})
            body = assert_problem(r, 413)
            assert str(MAX_BODY_BYTES) in body["detail"]
            assert (await http.get("/livez")).status_code == 200  # the server is still there
            schema = (await http.get("/schema/openapi.json")).json()
            answers = schema["paths"][p.BATCH_PATH]["post"]["responses"]
            assert "application/problem+json" in answers["413"]["content"]
    finally:
        await server.stop()


async def test_a_method_not_allowed_says_which_are(client: httpx.AsyncClient) -> None:
    key = await tenant(client, "methods")
    r = await client.delete("/v1/jobs", headers=auth(key))
    assert_problem(r, 405)
    assert {m.strip() for m in r.headers["allow"].split(",")} >= {"GET", "POST"}
