"""The DAG read models: `dags` and `dag_versions` (definitions), `dag_runs` and
`dag_run_nodes` (executions, each node with the run that executes it)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "dags.sql")


class DagRow(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    version: int  # the current definition's number
    version_hash: str
    node_count: int
    created_at: datetime
    updated_at: datetime
    stream_version: int


class DagCurrent(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    version: int
    definition: Any


class DagVersionRow(msgspec.Struct, frozen=True):
    dag_id: uuid.UUID
    version: int
    version_hash: str
    definition: Any
    created_at: datetime


class DagRunRow(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    dag_id: uuid.UUID
    dag_version: int
    state: str  # pending | running | succeeded | failed | cancelled
    trigger: str
    due_at: datetime
    job_id: uuid.UUID | None
    scheduled_for: datetime | None
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    version: int


class DagNodeRow(msgspec.Struct, frozen=True):
    dag_run_id: uuid.UUID
    key: str
    state: str  # ostinato.dags.decide.NodeState
    run_id: uuid.UUID | None
    generation: int
    ready_at: datetime | None
    finished_at: datetime | None
    run_state: str | None
    attempt: int
    run_started_at: datetime | None
    run_finished_at: datetime | None
    output_ref: uuid.UUID | None
    last_error: Any


async def by_id(conn: asyncpg.Connection, tenant_id: uuid.UUID, dag_id: uuid.UUID
                ) -> DagRow | None:
    return one(DagRow, await conn.fetchrow(Q["dag_by_id"], dag_id, tenant_id))


async def by_name(conn: asyncpg.Connection, tenant_id: uuid.UUID, name: str) -> DagRow | None:
    return one(DagRow, await conn.fetchrow(Q["dag_by_name"], tenant_id, name))


async def lock_by_name(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                       name: str) -> DagRow | None:
    return one(DagRow, await conn.fetchrow(Q["lock_dag_by_name"], tenant_id, name))


async def page(conn: asyncpg.Connection, tenant_id: uuid.UUID, after: str,
               limit: int) -> list[DagRow]:
    return many(DagRow, await conn.fetch(Q["list_dags"], tenant_id, after, limit))


async def version(conn: asyncpg.Connection, dag_id: uuid.UUID,
                  number: int) -> DagVersionRow | None:
    return one(DagVersionRow, await conn.fetchrow(Q["dag_version"], dag_id, number))


async def versions(conn: asyncpg.Connection, keys: Sequence[tuple[uuid.UUID, int]]
                   ) -> dict[tuple[uuid.UUID, int], DagVersionRow]:
    rows = many(DagVersionRow, await conn.fetch(Q["dag_versions_of"], [k[0] for k in keys],
                                                [k[1] for k in keys]))
    return {(r.dag_id, r.version): r for r in rows}


async def run_by_id(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                    dag_run_id: uuid.UUID) -> DagRunRow | None:
    return one(DagRunRow, await conn.fetchrow(Q["dag_run_by_id"], dag_run_id, tenant_id))


async def lock_run(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                   dag_run_id: uuid.UUID) -> DagRunRow | None:
    return one(DagRunRow, await conn.fetchrow(Q["lock_dag_run"], dag_run_id, tenant_id))


async def lock_runs_skip(conn: asyncpg.Connection,
                         ids: Sequence[uuid.UUID]) -> list[DagRunRow]:
    """Lock DAG runs of any tenant in id order, skipping those locked elsewhere."""
    return many(DagRunRow, await conn.fetch(Q["lock_dag_runs_skip"], list(ids)))


async def runs_of(conn: asyncpg.Connection, tenant_id: uuid.UUID, dag_id: uuid.UUID,
                  limit: int) -> list[DagRunRow]:
    return many(DagRunRow, await conn.fetch(Q["dag_runs_of_dag"], tenant_id, dag_id, limit))


async def nodes(conn: asyncpg.Connection,
                dag_run_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[DagNodeRow]]:
    out: dict[uuid.UUID, list[DagNodeRow]] = {i: [] for i in dag_run_ids}
    for row in many(DagNodeRow, await conn.fetch(Q["dag_run_nodes"], list(dag_run_ids))):
        out[row.dag_run_id].append(row)
    return out


async def first_starts(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID],
                       tenant_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, datetime]:
    """When each run (of the tenant beside it) first started; runs never started are absent."""
    if not run_ids:
        return {}
    return {r["run_id"]: r["started_at"] for r in await conn.fetch(
        Q["first_starts"], list(run_ids), list(tenant_ids))}


async def with_ended_nodes(conn: asyncpg.Connection, limit: int) -> list[uuid.UUID]:
    return [r["dag_run_id"] for r in await conn.fetch(Q["dag_runs_with_ended_nodes"], limit)]


async def due(conn: asyncpg.Connection, now: datetime, limit: int) -> list[uuid.UUID]:
    return [r["id"] for r in await conn.fetch(Q["dag_runs_due"], now, limit)]


async def any_work(conn: asyncpg.Connection, now: datetime) -> bool:
    """Whether a DAG run has a node whose run ended, or a start time come by `now`."""
    return bool(await conn.fetchval(Q["any_dag_work"], now))


async def current_definitions(conn: asyncpg.Connection,
                              ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, DagCurrent]:
    rows = many(DagCurrent, await conn.fetch(Q["current_definitions"], list(ids)))
    return {r.id: r for r in rows}


async def existing_ids(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                       ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    return {r["id"] for r in await conn.fetch(Q["existing_dag_ids"], tenant_id, list(ids))}


async def node_of_run(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                      run_id: uuid.UUID) -> tuple[uuid.UUID, str] | None:
    """The DAG run and node key a run currently executes (None: not a DAG node's run)."""
    row = await conn.fetchrow(Q["dag_node_of_run"], tenant_id, run_id)
    return (row["dag_run_id"], row["key"]) if row else None
