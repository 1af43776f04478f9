"""The `fan_outs` read model (migration 0029): a workflow's chunked fan-outs, one row per
position, written only by the projector (`FanOutStarted` / `FanOutProgressed` /
`FanOutCompleted`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.domain.fanout import Window
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "fan_outs.sql")


class FanOutRow(msgspec.Struct, frozen=True):
    parent_run_id: uuid.UUID
    seq: int
    tenant_id: uuid.UUID
    name: str
    task: str
    pool: str
    priority: str
    total: int
    max_concurrency: int
    on_failure: str
    on_complete: str | None
    retry: Any  # jsonb: each chunk run's retry policy document
    timeout_seconds: float | None
    admitted: int
    succeeded: int
    failed: int
    failures: Any  # jsonb: the first failed chunks
    state: str  # running | succeeded | failed
    completion_run_id: uuid.UUID | None
    started_at: datetime
    finished_at: datetime | None

    @property
    def window(self) -> Window:
        return Window(self.total, self.max_concurrency, self.admitted, self.succeeded,
                      self.failed)

    @property
    def listed_failures(self) -> list[Any]:
        return list(_doc(self.failures) or [])

    @property
    def retry_document(self) -> dict[str, Any] | None:
        return _doc(self.retry)


def _doc(value: Any) -> Any:
    """A jsonb column's value (text when the connection has no jsonb codec)."""
    return msgspec.json.decode(value) if isinstance(value, str) else value


async def of_parents(conn: asyncpg.Connection,
                     parent_ids: Sequence[uuid.UUID]) -> dict[tuple[uuid.UUID, int], FanOutRow]:
    """The fan-outs of these parents, by (parent run id, position)."""
    if not parent_ids:
        return {}
    rows = many(FanOutRow, await conn.fetch(Q["fan_outs_of_parents"], list(parent_ids)))
    return {(r.parent_run_id, r.seq): r for r in rows}


async def latest(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                 run_id: uuid.UUID) -> FanOutRow | None:
    """The run's latest fan-out in the tenant, or None."""
    return one(FanOutRow, await conn.fetchrow(Q["latest_fan_out"], run_id, tenant_id))
