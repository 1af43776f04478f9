"""The `run_steps` read model: a workflow run's recorded steps, paged by position; and
`run_steps_set_aside`, the records operator interventions set aside."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many

Q = load("ostinato.stores", "steps.sql")


class StepRow(msgspec.Struct, frozen=True):
    seq: int
    name: str
    succeeded: bool
    output: Any
    output_ref: uuid.UUID | None
    error_type: str | None
    message: str | None
    attempt: int
    tries: int
    duration_ms: float
    recorded_at: datetime
    supplied_by: str | None = None  # a skipped step's: who supplied its output


class SetAsideStepRow(msgspec.Struct, frozen=True):
    set_aside_version: int  # the run-stream version of the intervention that set it aside
    seq: int
    name: str
    succeeded: bool
    output: Any
    output_ref: uuid.UUID | None
    error_type: str | None
    message: str | None
    attempt: int
    tries: int
    duration_ms: float
    recorded_at: datetime
    supplied_by: str | None
    set_aside_at: datetime


async def page(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID, *,
               after: int, limit: int) -> list[StepRow]:
    """Steps at positions after `after` (-1: from the first), in order."""
    return many(StepRow, await conn.fetch(Q["steps_of_run"], run_id, tenant_id, after, limit))


async def at(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID,
             seq: int) -> StepRow | None:
    """The step recorded at position `seq`, if any."""
    found = await page(conn, tenant_id, run_id, after=seq - 1, limit=1)
    return found[0] if found and found[0].seq == seq else None


class StateRow(msgspec.Struct, frozen=True):
    name: str
    value: Any
    seq: int
    set_at: datetime


async def state(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID,
                name: str | None = None) -> list[StateRow]:
    """The latest value of each name the workflow published (`ctx.set`), or of `name` alone."""
    return many(StateRow, await conn.fetch(Q["state_of_run"], run_id, tenant_id, name))


async def reply(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID,
                step_name: str) -> Any:
    """The answer recorded under `step_name` (`reply:<update id>`); None: not answered yet."""
    row = await conn.fetchrow(Q["reply_of_run"], run_id, tenant_id, step_name)
    return None if row is None else row["output"]


async def set_aside_page(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID, *,
                         after: tuple[int, int], limit: int) -> list[SetAsideStepRow]:
    """Set-aside records after the (set_aside_version, seq) cursor `after`, in order."""
    return many(SetAsideStepRow, await conn.fetch(Q["set_aside_steps_of_run"], run_id,
                                                  tenant_id, *after, limit))


async def undone_by_set_aside(conn: asyncpg.Connection, run_id: uuid.UUID,
                              from_seq: int) -> list[str]:
    """Steps kept before `from_seq` whose completed compensation is recorded from it on."""
    return [r["name"] for r in await conn.fetch(Q["undone_by_set_aside"], run_id, from_seq)]
