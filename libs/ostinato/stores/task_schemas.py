"""Payload schemas workers registered (table `task_schemas`, migration 0022), per scope: a
tenant (its workers' key) or `*` (shared workers, the admin key).

Not a read model: like the worker registry, it is state the worker-gateway writes from its
own traffic (`register`), not a fold of the log; what the log records is the version each job
and run was validated against (`JobCreated.payload_version`, `RunScheduled.payload_version`).
A (scope, task, payload_version) names one schema for good: `register` reports a pair whose
schema differs from the stored one instead of changing it. The only module that reads the
table: callers get typed rows, never records.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many

Q = load("ostinato.stores", "task_schemas.sql")


class RegisteredSchema(msgspec.Struct, frozen=True):
    """A pair held now with the registered schema; `created`: inserted by this registration."""

    task: str
    payload_version: int
    created: bool


class NewestSchema(msgspec.Struct, frozen=True):
    """The schema a submission of `task` is validated against (`schema`: JSON text)."""

    scope: str
    task: str
    payload_version: int
    schema: str


class TaskSchemaRow(msgspec.Struct, frozen=True):
    scope: str
    tenant_id: uuid.UUID | None  # None: registered by a shared worker, for every tenant
    task: str
    payload_version: int
    schema: str  # JSON text
    first_seen: datetime
    last_seen: datetime


class SchemaDefinition(msgspec.Struct, frozen=True):
    """One schema to register: `schema` as JSON text."""

    task: str
    payload_version: int
    schema: str


async def register(conn: asyncpg.Connection, tenant_id: uuid.UUID | None,
                   schemas: Sequence[SchemaDefinition],
                   now: datetime | None) -> list[RegisteredSchema]:
    """Insert new (task, payload_version) pairs and see known ones again, in one statement; a
    pair missing from the answer is registered with another schema and was left unchanged (run
    it in a transaction the caller rolls back to refuse the whole registration). The pairs must
    be distinct."""
    if not schemas:
        return []
    return many(RegisteredSchema, await conn.fetch(
        Q["register_task_schemas"], tenant_id, [s.task for s in schemas],
        [s.payload_version for s in schemas], [s.schema for s in schemas], now))


async def newest(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                 tasks: Sequence[str]) -> list[NewestSchema]:
    """Per task, its newest payload version in the tenant's scope, else in the shared one;
    tasks without a schema are absent."""
    if not tasks:
        return []
    return many(NewestSchema, await conn.fetch(Q["newest_task_schemas"], tenant_id,
                                               sorted(set(tasks))))


async def of_scope(conn: asyncpg.Connection,
                   tenant_id: uuid.UUID | None) -> list[TaskSchemaRow]:
    """Every schema of one scope (None: the shared one), by task, newest version first."""
    return many(TaskSchemaRow, await conn.fetch(Q["task_schemas_of_scope"], tenant_id))
