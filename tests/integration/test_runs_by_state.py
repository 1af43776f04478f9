"""The runs list filtered by state and the overview's start-lag read, after issue 41 item 6 made
them fast with a large tenant (migration 0053's runs_tenant_state; the histogram's minutes named
one by one): they answer what they answered. Through the api's own app over the real
PostgreSQL: every run of the state once, newest or oldest first, page after page, never
another tenant's; the bulk offer's count is the state's; the page reads the state's index; the
histogram's hour is exactly its 60 minutes, of the tenant only. Correctness, not timing
(bench/ui_pages.py and bench/ui_overview.py time them)."""

from __future__ import annotations

import html as markup
import re
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from ostinato.policy.overview import LAG_MINUTES, lag_start, summarize
from ostinato.stores import overview
from ostinato.stores import runs as run_store
from tests.helpers.integration import login, new_tenant

pytestmark = pytest.mark.integration
AT = datetime(2026, 12, 1, tzinfo=UTC)
COPY = re.compile(r'<tr data-state="([a-z_]+)">\s*<td>.*?data-copy="([^"]+)"', re.S)
# one run a minute; the state by its number: mostly succeeded, some dead-lettered, a few
# cancelled (final states only: a queued or running run would need its dispatcher slot)
STATES = """CASE WHEN i % 5 = 0 THEN 'dead_lettered' WHEN i % 11 = 0 THEN 'cancelled'
                 ELSE 'succeeded' END"""


async def _runs(pool: asyncpg.Pool, tenant_id: uuid.UUID, n: int) -> None:
    """n runs of the tenant in a mix of states, straight into the read model (a list's rows);
    two of them share a scheduled instant (the id breaks the tie)."""
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref,"
            " scheduled_for, state, attempt, fencing_token, updated_at, version, trigger,"
            f" failures) SELECT gen_random_uuid(), $1, gen_random_uuid(), 't', 'default',"
            " 'default', gen_random_uuid(),"
            " $2::timestamptz - make_interval(mins => CASE WHEN i = 10 THEN 20 ELSE i END),"
            f" {STATES}, 1, 1, $2, 3, 'schedule', 0 FROM generate_series(1, $3::int) i",
            tenant_id, AT, n)


async def _page_ids(client: httpx.AsyncClient, path: str) -> list[tuple[str, str]]:
    """(state, run id) of every row the list shows, following its next-page links."""
    shown: list[tuple[str, str]] = []
    while path:
        r = await client.get(path)
        assert r.status_code == 200, r.text
        shown += COPY.findall(r.text)
        after = re.search(r'<a href="([^"]+)">next page', r.text)
        path = markup.unescape(after.group(1)) if after else ""
    return shown


@pytest.mark.parametrize("state", ["dead_lettered", "cancelled", "succeeded", "running"])
async def test_a_state_pages_through_its_runs_once_both_ways_and_the_tenants_only(
        client: httpx.AsyncClient, pool: asyncpg.Pool, state: str) -> None:
    mine, key = await new_tenant(pool)
    theirs, _ = await new_tenant(pool)
    await _runs(pool, mine, 600)  # 120 dead-lettered (three pages), 44 cancelled, 436 succeeded
    await _runs(pool, theirs, 100)
    await login(client, key)
    ordered = [str(r["id"]) for r in await pool.fetch(
        "SELECT id FROM runs WHERE tenant_id = $1 AND state = $2 ORDER BY scheduled_for, id",
        mine, state)]
    newest = await _page_ids(client, f"/ui/runs?state={state}")
    assert [s for s, _ in newest] == [state] * len(ordered)
    assert [i for _, i in newest] == ordered[::-1]
    oldest = await _page_ids(client, f"/ui/runs?state={state}&order=oldest")
    assert [i for _, i in oldest] == ordered
    if state == "running":
        assert ordered == []  # a state no run is in: an empty list, not every run read


async def test_the_bulk_offer_counts_the_states_runs(client: httpx.AsyncClient,
                                                     pool: asyncpg.Pool) -> None:
    mine, key = await new_tenant(pool)
    theirs, _ = await new_tenant(pool)
    await _runs(pool, mine, 600)
    await _runs(pool, theirs, 100)
    await login(client, key)
    page = (await client.get("/ui/runs?state=dead_lettered")).text
    assert "Re-run all 120 runs matching" in page
    page = (await client.get("/ui/runs?state=cancelled")).text
    assert "Re-run all 44 runs matching" in page and "Cancel all" not in page
    page = (await client.get("/ui/runs?state=running")).text
    assert "Re-run all" not in page and "Cancel all" not in page  # none to act on


async def test_the_bulk_offer_says_a_thousand_and_more_and_its_confirmation_counts_all(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    mine, key = await new_tenant(pool)
    await _runs(pool, mine, 6000)  # 1,200 dead-lettered
    await login(client, key)
    page = (await client.get("/ui/runs?state=dead_lettered")).text
    assert "Re-run all 1,000+ runs matching" in page
    href = markup.unescape(re.search(r'href="(/ui/operations/new[^"]+)"', page).group(1))
    confirm = (await client.get(href)).text
    assert "1,200 runs" in confirm


async def test_a_state_filtered_page_reads_the_states_index(pool: asyncpg.Pool) -> None:
    """A page of a state reads runs_tenant_state in the list's order (no sort of the state's
    runs) either way, whatever plans the connection made before for other states."""
    mine, _ = await new_tenant(pool)
    await _runs(pool, mine, 3000)
    async with pool.acquire() as conn:
        await conn.execute("ANALYZE runs")
        for _ in range(8):  # past the plan cache's five custom plans
            await run_store.page(conn, mine, job_id=None, state="cancelled",
                                 after=(None, None), limit=51)
        for name, oldest in (("list_runs", False), ("list_runs_oldest", True)):
            args = (mine, None, "dead_lettered", None, None, None, None, None, None, None, 51,
                    None) if oldest else (mine, None, "dead_lettered", None, None, 51)
            async with conn.transaction():
                await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
                plan = "\n".join(r[0] for r in await conn.fetch(
                    "EXPLAIN " + run_store.Q[name], *args))
            assert "runs_tenant_state" in plan and "Sort" not in plan, plan
        rows = await run_store.page(conn, mine, job_id=None, state="dead_lettered",
                                    after=(None, None), limit=51)
    assert len(rows) == 51 and {r.state for r in rows} == {"dead_lettered"}


async def test_the_lag_histograms_hour_is_its_minutes_of_the_tenant_only(
        pool: asyncpg.Pool) -> None:
    """Rows in the first and the last minute of the hour are read, the minute before it and
    another tenant's rows are not; the histogram's primary key is probed, never scanned."""
    mine, _ = await new_tenant(pool)
    theirs, _ = await new_tenant(pool)
    now = datetime(2026, 3, 2, 14, 30, 20, tzinfo=UTC)
    first, last = lag_start(now), now.replace(second=0)
    assert last - first == timedelta(minutes=LAG_MINUTES - 1)
    rows = [(first - timedelta(minutes=1), mine, 9, 0.5), (first, mine, 1, 1.0),
            (last, mine, 2, 2.0), (last + timedelta(minutes=1), mine, 9, 0.5),
            (first, theirs, 5, 3.0), (last, theirs, 5, 3.0)]
    async with pool.acquire() as conn:
        await conn.executemany(
            "INSERT INTO start_lag_minutes (minute, tenant_id, pool, bucket, starts,"
            " max_seconds) VALUES ($1, $2, 'default', 73, $3, $4)", rows)
        # another tenant's whole histogram around it: a table worth an index's probe
        await conn.execute(
            "INSERT INTO start_lag_minutes (minute, tenant_id, pool, bucket, starts,"
            " max_seconds) SELECT $1::timestamptz + make_interval(mins => m), $2, 'default',"
            " b, 1, 1.0 FROM generate_series(-70, 5) m, generate_series(100, 399) b",
            first, theirs)
        await conn.execute("ANALYZE start_lag_minutes")
        read = await overview.read(conn, mine, now)
        plan = "\n".join(r[0] for r in await conn.fetch(
            "EXPLAIN " + overview.Q["overview_lag_buckets"], mine, first, LAG_MINUTES))
    assert [(b.minute, b.starts) for b in read.lags] == [(first, 1), (last, 2)]
    [p] = summarize(["default"], read.live, read.ended, read.lags, read.alerts, now=now,
                    slo_seconds=60).pools
    assert p.lag_starts == 3
    assert p.lag_p99_by_minute[0] == pytest.approx(1.0)
    assert p.lag_p99_by_minute[-1] == pytest.approx(2.0)
    assert "start_lag_minutes_pkey" in plan and "Seq Scan on start_lag" not in plan, plan
