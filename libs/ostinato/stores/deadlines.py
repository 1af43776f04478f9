"""What the completion-deadline check reads: runs (a DAG job's: DAG runs) past their job's
`complete_within` without a success, and recurring jobs whose last success is older than their
`max_staleness`."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many

Q = load("ostinato.stores", "deadlines.sql")


class OverdueRun(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    job_id: uuid.UUID
    run_id: uuid.UUID
    scheduled_for: datetime
    state: str
    dag: bool  # run_id is a DAG run's (a DAG job's occurrence), state a DAG run's
    deadline: datetime


class StaleJob(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    job_id: uuid.UUID
    last_success_at: datetime | None
    deadline: datetime


async def overdue_runs(conn: asyncpg.Connection, now: datetime, since: datetime,
                       limit: int) -> list[OverdueRun]:
    """Unmarked occurrences whose deadline passed in [since, now) unmet, oldest deadline
    first."""
    return many(OverdueRun, await conn.fetch(Q["deadline_overdue_runs"], now, since, limit))


async def stale_jobs(conn: asyncpg.Connection, now: datetime, limit: int) -> list[StaleJob]:
    return many(StaleJob, await conn.fetch(Q["deadline_stale_jobs"], now, limit))
