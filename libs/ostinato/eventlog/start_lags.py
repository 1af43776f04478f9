"""The schedule-lag histogram `start_lag_minutes` (migration 0036) outside its projection: the
RunStarted projection counts each run's first start in it (readmodels.sql
`project_run_started`), OstinatoLagSLOBreach reads it (`ostinato.stores.alerts.lag_by_pool`),
and this module deletes the minutes no rule looks at any more (a rebuild empties and refills it
with the other read models)."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg

from ostinato.db.queries import load

Q = load("ostinato.eventlog", "start_lags.sql")
KEEP_AT_LEAST = timedelta(hours=1)


def retention(lag_window: timedelta) -> timedelta:
    """How long minutes are kept: twice the rule's window (a longer configured window keeps
    what it reads), and at least an hour."""
    return max(KEEP_AT_LEAST, 2 * lag_window)


async def expire(conn: asyncpg.Connection, older_than: datetime, limit: int) -> int:
    """Delete up to `limit` rows of minutes before `older_than`; returns how many went."""
    status = await conn.execute(Q["expire_start_lag_minutes"], older_than, limit)
    return int(status.split()[-1])
