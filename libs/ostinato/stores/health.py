"""A job's health over a window, from the log and the runs read model: runs by outcome, the
schedule lag of first attempts (p50, p99, max), the reconciler's findings and the last success
(`GET /v1/jobs/{id}/health`)."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import one

Q = load("ostinato.stores", "health.sql")


class RunHealth(msgspec.Struct, frozen=True):
    runs: int
    succeeded: int
    failed: int
    in_progress: int
    started: int
    lag_p50_seconds: float | None
    lag_p99_seconds: float | None
    lag_max_seconds: float | None


class FindingCounts(msgspec.Struct, frozen=True):
    missed: int
    ledger_missing: int
    overdue: int
    skips: int


async def runs_between(conn: asyncpg.Connection, tenant_id: uuid.UUID, job_id: uuid.UUID,
                       start: datetime, end: datetime) -> RunHealth:
    row = one(RunHealth, await conn.fetchrow(Q["job_health_runs"], job_id, tenant_id, start,
                                             end))
    assert row is not None  # an aggregate: always one row
    return row


async def dag_runs_between(conn: asyncpg.Connection, tenant_id: uuid.UUID, job_id: uuid.UUID,
                           start: datetime, end: datetime) -> RunHealth:
    """As `runs_between` for a DAG job: each DAG run is one occurrence (its nodes are not)."""
    row = one(RunHealth, await conn.fetchrow(Q["job_health_dag_runs"], job_id, tenant_id,
                                             start, end))
    assert row is not None  # an aggregate: always one row
    return row


async def findings_between(conn: asyncpg.Connection, tenant_id: uuid.UUID, job_id: uuid.UUID,
                           start: datetime, end: datetime) -> FindingCounts:
    row = one(FindingCounts, await conn.fetchrow(Q["job_health_findings"], job_id, tenant_id,
                                                 start, end))
    assert row is not None
    return row


async def last_success(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                       job_id: uuid.UUID) -> datetime | None:
    return await conn.fetchval(Q["job_last_success"], job_id, tenant_id)


async def last_dag_success(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                           job_id: uuid.UUID) -> datetime | None:
    """When a DAG job's latest succeeded DAG run finished."""
    return await conn.fetchval(Q["job_last_dag_success"], job_id, tenant_id)
