"""Reads of a tenant's retention policy and of the holds on runs (their read models:
`tenant_retention` and `run_holds`, written by the projector only)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "retention.sql")


class RetentionRow(msgspec.Struct, frozen=True):
    keep_seconds: int
    archive: bool
    updated_at: datetime
    updated_by: str


class HoldRow(msgspec.Struct, frozen=True):
    run_id: uuid.UUID
    reason: str
    held_by: str
    held_at: datetime


async def policy_of(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> RetentionRow | None:
    """The tenant's policy as set; None when it never set one (the default applies)."""
    return one(RetentionRow, await conn.fetchrow(Q["retention_of_tenant"], tenant_id))


async def holds_of(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                   run_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, HoldRow]:
    """The holds of those of `run_ids` that are the tenant's and held."""
    if not run_ids:
        return {}
    rows = many(HoldRow, await conn.fetch(Q["holds_of_runs"], tenant_id, list(run_ids)))
    return {r.run_id: r for r in rows}
