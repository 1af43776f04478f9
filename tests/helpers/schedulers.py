"""What the scheduler fault tests read from the database: a job's expected slots, runs and
skips, the database's clock, whether every job has moved past an instant."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from ostinato.schedules import expected_slots, from_document
from ostinato.stores import jobs as job_store


async def coverage(pool: asyncpg.Pool, job_id: object, start: datetime
                   ) -> tuple[list[datetime], list[datetime], list[tuple[datetime, datetime]]]:
    """(expected slots before the job's next slot, runs, recorded skips) of one job, read in one
    snapshot (schedulers may still be firing)."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read"):
        job = await conn.fetchrow("SELECT schedule, next_slot, tenant_id FROM jobs WHERE id = $1",
                                  job_id)
        runs = [r["scheduled_for"] for r in await conn.fetch(
            "SELECT scheduled_for FROM runs WHERE job_id = $1 ORDER BY 1", job_id)]
        skips = [(r.first_slot, r.last_slot) for r in await job_store.skips_between(
            conn, job_id, start, job["next_slot"])]
    expected = expected_slots(from_document(job["schedule"]), start, job["next_slot"])
    return expected, runs, skips


async def db_now(pool: asyncpg.Pool) -> datetime:
    return await pool.fetchval("SELECT clock_timestamp()")


async def every_job_past(pool: asyncpg.Pool, instant: datetime) -> bool:
    """Every job's next slot is after `instant`: each slot due by then was fired (or skipped)."""
    return bool(await pool.fetchval("SELECT bool_and(next_slot > $1) FROM jobs", instant))
