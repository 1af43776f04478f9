"""A run's timeline is paged (issue 42: a 20,000-step run answered 20,009 events, 8 MB, at
once): `GET /v1/runs/{id}/events?after=&limit=` gives the events after a stream version, in
order, and `next_after` for the next page; followed to the end, the pages hold every event
once, with no gap. The clients (sync and async) iterate the pages lazily."""

from __future__ import annotations

import asyncio
import uuid
from itertools import islice

import asyncpg
import httpx
import pytest

from ostinato.client import AsyncClient, Client
from ostinato.eventlog.store import read_stream
from ostinato.runs.signals import send_signal
from tests.helpers.api import assert_problem, auth
from tests.helpers.integration import new_tenant, queued_workflow_run, store

pytestmark = pytest.mark.integration

SIGNALS = 23  # each kept signal is one event: the run has more events than a page of 10


async def long_run(pool: asyncpg.Pool) -> tuple[uuid.UUID, uuid.UUID, str, list[int]]:
    """A queued run with a few dozen events; its tenant, key and its stream's versions."""
    tenant_id, key = await new_tenant(pool)
    run_id = await queued_workflow_run(pool, tenant_id, "orders.approval")
    async with pool.acquire() as conn:
        for n in range(SIGNALS):
            await send_signal(conn, store(), tenant_id=tenant_id, run_id=run_id, name="note",
                              payload={"n": n}, actor="test", idempotency_key=None,
                              max_payload_bytes=1000)
        versions = [r.version for r in await read_stream(conn, run_id, tenant_id)]
    assert len(versions) > 2 * 10
    return tenant_id, run_id, key, versions


async def test_a_run_s_events_come_in_pages_in_order_without_gap_or_repeat(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    _, run_id, key, versions = await long_run(pool)
    seen: list[int] = []
    after: int | None = 0
    pages = 0
    while after is not None:
        r = await client.get(f"/v1/runs/{run_id}/events", params={"after": after, "limit": 10},
                             headers=auth(key))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["run_id"] == str(run_id) and len(body["items"]) <= 10
        assert body["items"], "a page named by next_after is never empty"
        seen += [e["version"] for e in body["items"]]
        after = body["next_after"]
        if after is not None:
            assert after == body["items"][-1]["version"]
        pages += 1
    assert seen == versions  # every event once, in version order
    assert pages == -(-len(versions) // 10)

    # the first page without parameters: the first 100 (all of these), the last page
    r = await client.get(f"/v1/runs/{run_id}/events", headers=auth(key))
    assert [e["version"] for e in r.json()["items"]] == versions
    assert r.json()["next_after"] is None
    assert r.json()["items"][0]["type"] == "RunScheduled"
    # past the end: an empty page of a run that exists; a run that does not: 404
    r = await client.get(f"/v1/runs/{run_id}/events", params={"after": versions[-1]},
                         headers=auth(key))
    assert (r.status_code, r.json()["items"], r.json()["next_after"]) == (200, [], None)
    assert_problem(await client.get(f"/v1/runs/{uuid.uuid4()}/events", headers=auth(key)), 404)
    assert_problem(await client.get(f"/v1/runs/{uuid.uuid4()}/events", params={"after": 3},
                                    headers=auth(key)), 404)
    for bad in ({"limit": 0}, {"limit": 1001}, {"after": -1}, {"after": "x"}):
        r = await client.get(f"/v1/runs/{run_id}/events", params=bad, headers=auth(key))
        assert r.status_code in (400, 422), r.text


async def test_another_tenant_reads_no_page_of_the_run(pool: asyncpg.Pool,
                                                       client: httpx.AsyncClient) -> None:
    _, run_id, _, versions = await long_run(pool)
    _, other = await new_tenant(pool)
    for after in (0, versions[3]):
        assert_problem(await client.get(f"/v1/runs/{run_id}/events", params={"after": after},
                                        headers=auth(other)), 404)


async def test_the_clients_iterate_a_run_s_pages_lazily(pool: asyncpg.Pool,
                                                        api_url: str) -> None:
    _, run_id, key, versions = await long_run(pool)
    async with AsyncClient(api_url, key) as client:
        assert [e.version async for e in client.runs.events(run_id, page_size=10)] == versions
        events = client.runs.events(run_id, page_size=7)
        assert [await anext(events) for _ in range(3)][-1].version == versions[2]

    def sync() -> tuple[list[int], list[int]]:
        with Client(api_url, key) as c:
            every = [e.version for e in c.runs.events(run_id, page_size=10)]
            head = [e.version for e in islice(c.runs.events(run_id, page_size=5), 7)]
        return every, head

    every, head = await asyncio.to_thread(sync)
    assert every == versions and head == versions[:7]
