"""The `runs` read model: one run of a tenant, a page of them, and why a waiting run waits."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.domain.states import RunState
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "runs.sql")


class RunRow(msgspec.Struct, frozen=True, kw_only=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    job_id: uuid.UUID
    task: str
    pool: str
    priority: str
    payload_ref: uuid.UUID
    scheduled_for: datetime
    state: str
    attempt: int
    fencing_token: int
    worker_id: str | None
    output_ref: uuid.UUID | None
    last_error: Any
    scheduled_at: datetime | None
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    version: int
    trigger: str
    due_at: datetime | None
    traceparent: str | None
    failures: int
    retry_at: datetime | None
    retry_policy: Any
    timeout_seconds: float | None
    queue_wait_seconds: float | None
    on_queue_wait: str | None
    cancel_requested: bool
    replay_of: uuid.UUID | None
    logs_ref: uuid.UUID | None
    concurrency_key: str | None
    resource: str | None

    @property
    def waits_for_dispatch(self) -> bool:
        """Scheduled, or a retry whose time has come: the dispatcher decides when it runs."""
        return self.state == RunState.SCHEDULED or (
            self.state == RunState.RETRY_SCHEDULED and self.retry_at is None)


async def by_id(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                run_id: uuid.UUID) -> RunRow | None:
    return one(RunRow, await conn.fetchrow(Q["run_by_id"], run_id, tenant_id))


async def page(conn: asyncpg.Connection, tenant_id: uuid.UUID, *, job_id: uuid.UUID | None,
               state: str | None, after: tuple[datetime | None, uuid.UUID | None],
               limit: int) -> list[RunRow]:
    """Latest occurrence first, strictly after the (scheduled_for, id) cursor `after`."""
    return many(RunRow, await conn.fetch(Q["list_runs"], tenant_id, job_id, state, *after, limit))


async def waiting_reason(conn: asyncpg.Connection, run: RunRow) -> str | None:
    """Why a run waiting for the dispatcher waits: the reason of the last decision that looked
    at it, or (not looked at yet: deep in a backlog) its place in its tenant's queue."""
    if not run.waits_for_dispatch:
        return None
    reason = await conn.fetchval(Q["hold_of_run"], run.id, run.tenant_id)
    if reason is not None:
        return reason
    ahead = await conn.fetchval(Q["waiting_position"], run.tenant_id, run.pool, run.priority,
                                run.updated_at, run.id)
    return (f"waiting for the dispatcher; behind {ahead} earlier runs of this tenant in class "
            f"{run.priority} of pool {run.pool}")
