"""Requests per API key at the api: a token bucket per key, the tenant's own rate set by the
admin, a 429 problem with Retry-After that changes nothing, refilled by the api's clock."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import httpx
import pytest

from ostinato.clock import Clock, FakeClock
from tests.helpers.api import ADMIN, assert_problem, auth, issue, tenant
from tests.helpers.integration import tenant_id_of

pytestmark = pytest.mark.integration


@pytest.fixture
def api_clock() -> Clock:
    return FakeClock(datetime.now(UTC))


async def test_a_key_over_its_tenants_rate_gets_429_and_changes_nothing(
        client: httpx.AsyncClient, pool: asyncpg.Pool, api_clock: FakeClock) -> None:
    key = await tenant(client, "rl-a")
    tid = str(await tenant_id_of(pool, "rl-a"))
    r = await client.put(f"/v1/tenants/{tid}/limits/api", json={"rate_per_second": 2, "burst": 3},
                         headers=auth(ADMIN))
    assert r.status_code == 200, r.text
    for _ in range(3):  # the burst
        assert (await client.get("/v1/jobs", headers=auth(key))).status_code == 200
    r = await client.post("/v1/jobs", json={"name": "refused", "task": "t"}, headers=auth(key))
    body = assert_problem(r, 429)
    assert r.headers["retry-after"] == "1" and body["retry_after_seconds"] == 0.5
    assert body["type"].endswith("/rate-limited")
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM jobs") == 0  # refused before the route

    other = await issue_after_refill(client, key, api_clock)  # a second key: its own bucket
    for _ in range(3):
        assert (await client.get("/v1/jobs", headers=auth(other))).status_code == 200
    assert_problem(await client.get("/v1/jobs", headers=auth(other)), 429)

    api_clock.advance(0.5)  # one token back for each key
    assert (await client.get("/v1/jobs", headers=auth(key))).status_code == 200
    assert_problem(await client.get("/v1/jobs", headers=auth(key)), 429)
    for _ in range(10):  # the admin key is never limited
        assert (await client.get("/v1/jobs", headers={
            **auth(ADMIN), "X-Ostinato-Tenant": tid})).status_code == 200


async def issue_after_refill(client: httpx.AsyncClient, key: str, clock: FakeClock) -> str:
    clock.advance(0.5)  # one token to issue the key with
    return (await issue(client, key, "viewer", "second"))["key"]


async def test_a_tenant_rate_is_per_tenant_and_the_default_applies_elsewhere(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    slow = await tenant(client, "rl-b")
    fast = await tenant(client, "rl-c")
    r = await client.put(f"/v1/tenants/{await tenant_id_of(pool, 'rl-b')}/limits/api",
                         json={"rate_per_second": 1}, headers=auth(ADMIN))
    assert r.status_code == 200, r.text
    assert (await client.get("/v1/jobs", headers=auth(slow))).status_code == 200
    assert_problem(await client.get("/v1/jobs", headers=auth(slow)), 429)  # burst = rate = 1
    for _ in range(20):  # the default (1,000/s, bursts of 2,000)
        assert (await client.get("/v1/jobs", headers=auth(fast))).status_code == 200
    limits = (await client.get("/v1/limits", headers=auth(fast))).json()["items"]
    assert limits == []


async def test_bad_api_rates_are_refused(client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "rl-d")
    tid = str(await tenant_id_of(pool, "rl-d"))
    for body in ({"rate_per_second": -1}, {"rate_per_second": 5, "burst": 0},
                 {"rate_per_second": 5, "max_concurrency": 3}, {}):
        assert_problem(await client.put(f"/v1/tenants/{tid}/limits/api", json=body,
                                        headers=auth(ADMIN)), 422)
    assert_problem(await client.put(f"/v1/tenants/{tid}/limits/api",
                                    json={"rate_per_second": 5}, headers=auth(key)), 403)
