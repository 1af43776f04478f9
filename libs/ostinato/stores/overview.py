"""The web UI's overview page from the api's own tables (`sql/overview.sql`): a tenant's live
runs per pool and state, its runs ended per pool and hour of the day, its schedule-lag
histogram of the hour and its alerts, each in one statement bounded by the tenant and a window;
`ostinato.policy.overview` turns them into the page's figures."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.policy.overview import (
    LAG_MINUTES,
    AlertEpisode,
    EndedHour,
    LagBucket,
    LiveCount,
    day_start,
    lag_start,
)
from ostinato.stores.rows import many

Q = load("ostinato.stores", "overview.sql")
ALERTS_SHOWN = 200  # alert keys read at most (firing first)


class OverviewRows(msgspec.Struct, frozen=True):
    live: list[LiveCount]
    ended: list[EndedHour]
    lags: list[LagBucket]
    alerts: list[AlertEpisode]


async def read(conn: asyncpg.Connection, tenant_id: uuid.UUID, now: datetime) -> OverviewRows:
    """The tenant's overview rows at `now` (the windows: ostinato.policy.overview), read in one
    snapshot so the figures agree with each other (a run that ends between two reads is
    counted once)."""
    if conn.is_in_transaction():
        return await _read(conn, tenant_id, now)
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        return await _read(conn, tenant_id, now)


async def _read(conn: asyncpg.Connection, tenant_id: uuid.UUID, now: datetime) -> OverviewRows:
    day = day_start(now)
    # The live runs lie one a page among the finished ones: read in the index's order (the plan
    # the planner prices lowest) each is a random heap visit, 3.4 times slower than a bitmap
    # scan's page order (20,550 live runs of 1,000,000: 218 ms against 65 ms, bench/ui_pages.py).
    # For this statement only, then the setting as it was (a caller's transaction too).
    was = await conn.fetchval("SELECT current_setting('enable_indexscan'),"
                              " set_config('enable_indexscan', 'off', true)")
    live = many(LiveCount, await conn.fetch(Q["overview_live_runs"], tenant_id))
    await conn.execute("SELECT set_config('enable_indexscan', $1, true)", was)
    return OverviewRows(
        live=live,
        ended=many(EndedHour, await conn.fetch(Q["overview_ended_hours"], tenant_id, day)),
        lags=many(LagBucket, await conn.fetch(Q["overview_lag_buckets"], tenant_id,
                                              lag_start(now), LAG_MINUTES)),
        alerts=many(AlertEpisode, await conn.fetch(Q["overview_alerts"], tenant_id, day,
                                                   ALERTS_SHOWN)))
