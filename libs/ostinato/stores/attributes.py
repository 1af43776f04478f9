"""Searchable attributes (migration 0043, docs/SEARCH_ATTRIBUTES.md): a tenant's declarations
(`search_attributes`, written by the api: tenant configuration, audited, like the worker
registry not a fold of the log) and the values of jobs and runs (`job_attributes`,
`run_attributes`: read models of JobCreated, RunScheduled and AttributesUpserted). A filter
reaches SQL only as bind parameters of fixed statements (`list_query`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.domain.attributes import AttributeFilter, bind_args
from ostinato.stores.rows import many

Q = load("ostinato.stores", "attributes.sql")


class Declared(msgspec.Struct, frozen=True):
    name: str
    type: str
    created_at: datetime
    actor: str


async def declared(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> list[Declared]:
    return many(Declared, await conn.fetch(Q["declared"], tenant_id))


async def types_of(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> dict[str, str]:
    """name → type of the tenant's declarations."""
    return {d.name: d.type for d in await declared(conn, tenant_id)}


async def types_of_tenants(conn: asyncpg.Connection,
                           tenant_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, dict[str, str]]:
    out: dict[uuid.UUID, dict[str, str]] = {t: {} for t in tenant_ids}
    for r in await conn.fetch(Q["declared_of_tenants"], list(tenant_ids)):
        out[r["tenant_id"]][r["name"]] = r["type"]
    return out


async def lock(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> None:
    """Serialise declarations of one tenant for the caller's transaction (the cap)."""
    await conn.execute(Q["lock_declarations"], str(tenant_id))


async def declare(conn: asyncpg.Connection, tenant_id: uuid.UUID, name: str, type_: str, *,
                  now: datetime, actor: str) -> None:
    await conn.execute(Q["declare"], tenant_id, name, type_, now, actor)


async def remove(conn: asyncpg.Connection, tenant_id: uuid.UUID, name: str) -> bool:
    return await conn.fetchval(Q["remove"], tenant_id, name) is not None


async def of_runs(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                  run_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    if not run_ids:
        return {}
    return {r["run_id"]: r["attributes"]
            for r in await conn.fetch(Q["of_runs"], list(run_ids), tenant_id)}


async def of_jobs(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                  job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    if not job_ids:
        return {}
    return {r["job_id"]: r["attributes"]
            for r in await conn.fetch(Q["of_jobs"], list(job_ids), tenant_id)}


def list_query(f: AttributeFilter) -> tuple[str, tuple[Any, ...]]:
    """The run list's statement for `f` and its attribute parameters (after the page's own):
    with a numeric comparison, the variant that can use run_attribute_numbers' btree."""
    args = bind_args(f)
    if args[4] is None:  # no numeric range
        return Q["list_runs_by_attributes"], args[:4]
    return Q["list_runs_by_attribute_range"], args
