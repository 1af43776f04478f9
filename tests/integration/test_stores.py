"""Every store query returns exactly the columns of its typed row: a migration that adds,
drops or renames a column fails here, not at a caller that reads the row."""

from __future__ import annotations

import asyncpg
import msgspec
import pytest

from ostinato.stores import calendars, dead_letters, jobs, limits, runs

pytestmark = pytest.mark.integration

ROW_OF = {
    (runs, "run_by_id"): runs.RunRow,
    (runs, "list_runs"): runs.RunRow,
    (jobs, "job_by_id"): jobs.JobRow,
    (jobs, "job_by_idempotency_key"): jobs.JobRow,
    (jobs, "list_jobs"): jobs.JobRow,
    (dead_letters, "list_dead_letters"): dead_letters.DeadLetterRow,
    (dead_letters, "dead_letter_by_id"): dead_letters.DeadLetterRow,
    (dead_letters, "dead_letter_counts"): dead_letters.Count,
    (calendars, "calendar_by_name"): calendars.CalendarRow,
    (calendars, "list_calendars"): calendars.CalendarRow,
    (limits, "limits_of_tenant"): limits.LimitRow,
    (limits, "pool_controls_visible"): limits.PoolControlRow,
    (limits, "waiting_depth"): limits.WaitingLoad,
    (limits, "in_flight_runs"): limits.InFlight,
}
SCALAR = {(runs, "hold_of_run"), (runs, "waiting_position")}


def test_every_store_query_is_accounted_for() -> None:
    named = {(store, name) for store in (runs, jobs, dead_letters, calendars, limits)
             for name in store.Q}
    assert named == set(ROW_OF) | SCALAR


@pytest.mark.parametrize(("store", "name"), list(ROW_OF), ids=lambda x: getattr(x, "__name__", x))
async def test_a_store_query_returns_the_columns_of_its_row(
    pool: asyncpg.Pool, store: object, name: str,
) -> None:
    async with pool.acquire() as conn:
        statement = await conn.prepare(store.Q[name])  # type: ignore[attr-defined]
        columns = [a.name for a in statement.get_attributes()]
    fields = list(msgspec.structs.fields(ROW_OF[(store, name)]))
    assert sorted(columns) == sorted(f.name for f in fields)
