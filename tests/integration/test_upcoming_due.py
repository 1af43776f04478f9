"""The scaling signal `ostinato_upcoming_due{pool,window}`: the reconciler's health check counts
per pool what falls due within 1, 5 and 15 minutes (each job's next occurrence), so workers can
be added before a known peak."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import pytest
from prometheus_client import REGISTRY

from ostinato.clock import SystemClock
from services.reconciler.checks import pipeline
from tests.helpers.integration import new_job, new_tenant

pytestmark = pytest.mark.integration


def gauge(window: str) -> float | None:
    return REGISTRY.get_sample_value("ostinato_upcoming_due",
                                     {"pool": "default", "window": window})


async def test_jobs_due_soon_are_counted_per_window(pool: asyncpg.Pool) -> None:
    tenant_id, _ = await new_tenant(pool)
    now = await pool.fetchval("SELECT clock_timestamp()")
    for i, ahead in enumerate((timedelta(seconds=30), timedelta(minutes=3),
                               timedelta(minutes=10), timedelta(hours=2))):
        await new_job(pool, tenant_id, at=now + ahead, name=f"peak-{i}")
    await pipeline.check_once(pool, SystemClock(), stuck_after=timedelta(minutes=5))
    assert (gauge("1m"), gauge("5m"), gauge("15m")) == (1, 2, 3)
