"""Reads for job edits (`ostinato.jobs.edit`): each job's definition version (the API's ETag) and
the runs an edit with `apply_to_scheduled` amends. The rows are written by the projector only
(`JobUpdated`, `RunAmended`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many

Q = load("ostinato.stores", "job_edits.sql")


class WaitingRun(msgspec.Struct, frozen=True):
    """A run of the job not yet dispatched, locked: enough to append RunAmended."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    version: int
    state: str


async def definition_versions(conn: asyncpg.Connection,
                              job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, int]:
    """Each job's definition version: 1 until its first edit."""
    found = {r["job_id"]: r["definition_version"]
             for r in await conn.fetch(Q["definition_versions"], list(job_ids))}
    return {job_id: found.get(job_id, 1) for job_id in job_ids}


async def definition_version(conn: asyncpg.Connection, job_id: uuid.UUID) -> int:
    return (await definition_versions(conn, [job_id]))[job_id]


async def lock_scheduled_runs(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                              job_id: uuid.UUID) -> list[WaitingRun]:
    """The job's runs in state scheduled, oldest slot first, locked (caller's transaction)."""
    return many(WaitingRun, await conn.fetch(Q["lock_scheduled_runs"], job_id, tenant_id))
