"""Retention: outputs and captured logs older than the retention are deleted (payloads stay, so
dead letters can still be replayed); the run record then shows no output."""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.eventlog.store import expire_blobs
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.reconciler")


async def expire_outputs(pool: asyncpg.Pool, clock: Clock, *, retention: timedelta) -> int:
    """Retention: outputs and captured logs older than `retention` are deleted (payloads stay,
    so dead letters can still be replayed); the run record then shows no output."""
    async with pool.acquire() as conn:
        expired = await expire_blobs(conn, clock.now() - retention)
    if expired:
        metrics.BLOBS_EXPIRED.inc(expired)
        log.info("outputs expired", count=expired, retention_days=retention.days)
    return expired
