"""The `operations` table and its frozen selections (`operation_items`, `operation_failures`):
bulk actions by query, tracked (migration 0028, docs/OPERATIONS.md). The selection queries take
the filter's arguments in the order `ostinato.operations.filters` gives them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "operations.sql")

# What each kind selects from: (count query, freeze query).
SELECTIONS = {
    "cancel": ("count_runs_matching", "select_run_items"),
    "retry": ("count_runs_matching", "select_run_items"),
    "replay": ("count_letters_matching", "select_letter_items"),
    "pause": ("count_jobs_matching", "select_job_items"),
}


class OperationRow(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    kind: str
    filter: Any
    total: int
    position: int
    done: int
    skipped: int
    failed: int
    state: str
    actor: str
    created_at: datetime
    finished_at: datetime | None
    cancelled_by: str | None


class Item(msgspec.Struct, frozen=True):
    seq: int
    item_id: uuid.UUID


class Failure(msgspec.Struct, frozen=True):
    seq: int
    item_id: uuid.UUID
    outcome: str  # skipped | failed
    detail: str


async def count(conn: asyncpg.Connection, kind: str, tenant_id: uuid.UUID,
                args: Sequence[Any], at_most: int | None = None) -> int:
    """How many items `kind`'s selection holds; of runs, at most `at_most` (None: all), read
    with a plan made for the states (a failed, dead-lettered or cancelled state's partial index,
    migration 0053, is usable only by such a plan)."""
    if kind not in ("cancel", "retry"):
        return int(await conn.fetchval(Q[SELECTIONS[kind][0]], tenant_id, *args))
    async with conn.transaction():
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        return int(await conn.fetchval(Q[SELECTIONS[kind][0]], tenant_id, *args, at_most))


async def create(conn: asyncpg.Connection, *, op_id: uuid.UUID, tenant_id: uuid.UUID, kind: str,
                 filter_doc: Any, args: Sequence[Any], actor: str, now: datetime) -> int:
    """The operation and its frozen selection, in the caller's transaction: the total."""
    await conn.execute(Q["insert_operation"], op_id, tenant_id, kind, filter_doc, actor, now)
    status = await conn.execute(Q[SELECTIONS[kind][1]], tenant_id, *args, op_id)
    total = int(status.rsplit(" ", 1)[-1])  # "INSERT 0 <n>"
    await conn.execute(Q["set_operation_total"], op_id, total)
    return total


async def by_id(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                op_id: uuid.UUID) -> OperationRow | None:
    return one(OperationRow, await conn.fetchrow(Q["operation_by_id"], op_id, tenant_id))


async def page(conn: asyncpg.Connection, tenant_id: uuid.UUID, *, state: str | None,
               after: tuple[datetime | None, uuid.UUID | None], limit: int) -> list[OperationRow]:
    return many(OperationRow, await conn.fetch(Q["list_operations"], tenant_id, state, *after,
                                               limit))


async def claim_running(conn: asyncpg.Connection) -> OperationRow | None:
    """The oldest running operation, locked (SKIP LOCKED) for one batch of the caller's txn."""
    return one(OperationRow, await conn.fetchrow(Q["claim_running_operation"]))


async def items_after(conn: asyncpg.Connection, op_id: uuid.UUID, position: int,
                      limit: int) -> list[Item]:
    return many(Item, await conn.fetch(Q["operation_items_after"], op_id, position, limit))


async def advance(conn: asyncpg.Connection, op_id: uuid.UUID, *, handled: int, done: int,
                  failures: Sequence[Failure], now: datetime) -> None:
    if failures:
        await conn.execute(Q["record_operation_failures"], op_id, [f.seq for f in failures],
                           [f.item_id for f in failures], [f.outcome for f in failures],
                           [f.detail for f in failures])
    skipped = sum(f.outcome == "skipped" for f in failures)
    await conn.execute(Q["advance_operation"], op_id, handled, done, skipped,
                       len(failures) - skipped, now)


async def cancel(conn: asyncpg.Connection, tenant_id: uuid.UUID, op_id: uuid.UUID, *,
                 actor: str, now: datetime) -> bool:
    return await conn.fetchval(Q["cancel_operation"], op_id, tenant_id, now, actor) is not None


async def failures_of(conn: asyncpg.Connection, op_id: uuid.UUID, limit: int) -> list[Failure]:
    return many(Failure, await conn.fetch(Q["operation_failures_of"], op_id, limit))
