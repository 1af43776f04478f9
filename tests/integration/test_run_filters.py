"""GET /v1/runs filtered by priority class and by the last attempt's error type: exactly the
matching runs of the caller's tenant, through cursor pages; bad values are problems."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from ostinato.clock import SystemClock
from services.scheduler.tick import fire_due
from tests.helpers.api import assert_problem, auth, tenant
from tests.helpers.integration import dead_letters, dispatch, store

pytestmark = pytest.mark.integration


async def _ids(client: httpx.AsyncClient, key: str, **params: str) -> list[str]:
    """Every page of GET /v1/runs with these filters, one run a page (the cursor is walked)."""
    out: list[str] = []
    cursor: str | None = None
    while True:
        q = {**params, "limit": "1", **({"cursor": cursor} if cursor else {})}
        r = await client.get("/v1/runs", params=q, headers=auth(key))
        assert r.status_code == 200, r.text
        out += [i["id"] for i in r.json()["items"]]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return out


async def test_runs_filter_by_priority_class_and_last_error_type(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "acme")
    other = await tenant(client, "globex")
    bad_a, rejected, bad_b = await dead_letters(client, pool, key,
                                                ["bad_input", "rejected", "bad_input"])
    [theirs] = await dead_letters(client, pool, other, ["bad_input"])
    r = await client.post("/v1/jobs", json={"name": "bulky", "priority": "bulk"},
                          headers=auth(key))
    assert r.status_code == 201, r.text
    await fire_due(pool, store(), SystemClock())
    await dispatch(pool)
    [bulk] = await _ids(client, key, job_id=r.json()["id"])

    assert set(await _ids(client, key, error_type="bad_input")) == {bad_a, bad_b}
    assert await _ids(client, key, error_type="rejected") == [rejected]
    assert await _ids(client, other, error_type="bad_input") == [theirs]  # tenant-scoped
    assert await _ids(client, key, error_type="timeout") == []
    assert await _ids(client, key, priority="bulk") == [bulk]
    assert set(await _ids(client, key, priority="default")) == {bad_a, rejected, bad_b}
    assert await _ids(client, key, priority="bulk", error_type="bad_input") == []
    assert await _ids(client, key, priority="default", error_type="rejected",
                      state="dead_lettered") == [rejected]
    # the filters keep the order of the unfiltered list
    everything = await _ids(client, key)
    assert await _ids(client, key, error_type="bad_input") == [
        i for i in everything if i in (bad_a, bad_b)]

    assert_problem(await client.get("/v1/runs", params={"priority": "urgent"},
                                    headers=auth(key)), 422, "priority")
    for bad in ({"priority": "Not A Class!"}, {"error_type": "x" * 201}):
        r = await client.get("/v1/runs", params=bad, headers=auth(key))
        assert r.status_code in (400, 422), r.text
        assert r.headers["content-type"].startswith("application/problem+json")
