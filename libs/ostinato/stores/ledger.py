"""What the expected-occurrence ledger reads (the reconciler's check and `GET
/v1/jobs/{id}/ledger`): recurring jobs, a job's runs and recorded skips over a window, and which
findings the log already holds."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many

Q = load("ostinato.stores", "ledger.sql")
_FIRST_ID = uuid.UUID(int=0)


class LedgerJob(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    schedule: dict[str, Any]
    status: str
    next_slot: datetime | None
    overlap: str
    calendar: str | None
    version: int
    shard: int = 0
    last_missing_slot: datetime | None = None  # the latest slot recorded missing, not resolved


class LedgerRun(msgspec.Struct, frozen=True):
    id: uuid.UUID
    scheduled_for: datetime
    state: str
    dag: bool  # a DAG run (a DAG job's occurrence), `state` a DAG run's state


class LedgerSkip(msgspec.Struct, frozen=True):
    first_slot: datetime
    last_slot: datetime
    reason: str


async def jobs_after(conn: asyncpg.Connection, after: uuid.UUID | None,
                     limit: int) -> list[LedgerJob]:
    """Active and paused recurring jobs with an id after `after` (None: from the first)."""
    return many(LedgerJob, await conn.fetch(Q["ledger_jobs"], after or _FIRST_ID, limit))


async def runs_between(conn: asyncpg.Connection, tenant_id: uuid.UUID, job_id: uuid.UUID,
                       start: datetime, end: datetime) -> list[LedgerRun]:
    return many(LedgerRun, await conn.fetch(Q["ledger_runs_of_job"], job_id, tenant_id, start,
                                            end))


async def skips_between(conn: asyncpg.Connection, tenant_id: uuid.UUID, job_id: uuid.UUID,
                        start: datetime, end: datetime) -> list[LedgerSkip]:
    return many(LedgerSkip, await conn.fetch(Q["ledger_skips_of_job"], job_id, tenant_id, start,
                                             end))


class LedgerCarried(msgspec.Struct, frozen=True):
    first_slot: datetime
    last_slot: datetime
    state: str


async def carried_between(conn: asyncpg.Connection, tenant_id: uuid.UUID, job_id: uuid.UUID,
                          start: datetime, end: datetime) -> list[LedgerCarried]:
    """The job's removed runs' slots overlapping [start, end), as ranges of one state."""
    return many(LedgerCarried, await conn.fetch(Q["ledger_carried_of_job"], job_id, tenant_id,
                                                start, end))


async def unresolved_missing(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                             job_id: uuid.UUID, start: datetime, end: datetime) -> list[datetime]:
    """The job's slots in [start, end) recorded missing and not resolved since, ascending."""
    return [r["slot"] for r in await conn.fetch(Q["ledger_unresolved_missing"], job_id,
                                                 tenant_id, start, end)]


async def findings_recorded(conn: asyncpg.Connection,
                            event_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    if not event_ids:
        return set()
    return {r["event_id"] for r in await conn.fetch(Q["ledger_findings_recorded"],
                                                    list(event_ids))}
