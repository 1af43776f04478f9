"""The `run_steps` read model: a workflow run's recorded steps, paged by position."""

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


async def page(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID, *,
               after: int, limit: int) -> list[StepRow]:
    """Steps at positions after `after` (-1: from the first), in order."""
    return many(StepRow, await conn.fetch(Q["steps_of_run"], run_id, tenant_id, after, limit))
