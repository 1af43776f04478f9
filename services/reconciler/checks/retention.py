"""Retention: outputs and captured logs older than the retention are deleted (payloads stay, so
dead letters can still be replayed); the run record then shows no output. The start-lag
histogram (`start_lag_minutes`) keeps only the minutes the lag rule can still read. The web
UI's expired sessions are deleted (a read already refuses them: this only keeps the table
small)."""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.eventlog import start_lags
from ostinato.eventlog.store import expire_blobs
from ostinato.stores import ui_sessions
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.reconciler")
START_LAG_BATCH = 10_000  # histogram rows deleted per tick at most


async def expire_outputs(pool: asyncpg.Pool, clock: Clock, *, retention: timedelta) -> int:
    """Retention: outputs and captured logs older than `retention` are deleted (payloads stay,
    so dead letters can still be replayed); the run record then shows no output."""
    async with pool.acquire() as conn:
        expired = await expire_blobs(conn, clock.now() - retention)
    if expired:
        metrics.BLOBS_EXPIRED.inc(expired)
        log.info("outputs expired", count=expired, retention_days=retention.days)
    return expired


async def expire_start_lags(pool: asyncpg.Pool, clock: Clock, *, keep: timedelta,
                            limit: int = START_LAG_BATCH) -> int:
    """Up to `limit` rows of the start-lag histogram's minutes older than `keep` deleted (a
    minute's rows are read by OstinatoLagSLOBreach for `lag_window` only); how many went."""
    async with pool.acquire() as conn:
        expired = await start_lags.expire(conn, clock.now() - keep, limit)
    if expired:
        log.info("start lag minutes expired", count=expired, keep_seconds=keep.total_seconds())
    return expired


async def expire_ui_sessions(pool: asyncpg.Pool, clock: Clock) -> int:
    """The web UI's sessions past their expiry, deleted (`ui_sessions.EXPIRE_BATCH` a pass:
    the rest go next pass); how many."""
    async with pool.acquire() as conn:
        expired = await ui_sessions.expire(conn, clock.db_now())
    if expired:
        log.info("ui sessions expired", count=expired)
    return expired


async def expire_retained(pool: asyncpg.Pool, clock: Clock, *, retention: timedelta) -> int:
    """The retention duty's pass: outputs past `retention`, then expired UI sessions."""
    return (await expire_outputs(pool, clock, retention=retention)
            + await expire_ui_sessions(pool, clock))
