"""The storage state (migration 0047, docs/RETENTION.md "The disk"): the one row the
reconciler upserts from what it measured and decided (`ostinato.policy.storage`), and that
every api instance reads through a short cache to refuse new work while the storage is full."""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.policy.storage import (
    TOAST_CHUNK_BYTES,
    Level,
    RelationSpace,
    Usage,
    Watermarks,
    tuple_bytes,
)
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "storage.sql")


class StorageRow(msgspec.Struct, frozen=True):
    level: str
    used_ratio: float | None
    database_bytes: int
    total_bytes: int | None
    free_bytes: int | None
    source: str
    alert_ratio: float
    refuse_ratio: float
    measured_at: datetime
    age_seconds: float  # now − measured_at, by the database's clock


async def database_size(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(Q["storage_database_size"]))


class RelationRow(msgspec.Struct, frozen=True):
    name: str
    size_bytes: int
    live_tuples: int
    dead_tuples: int
    columns: int
    data_width: float | None  # sum(pg_stats.avg_width); None: never analyzed
    toast: bool
    fillfactor: int

    def space(self) -> RelationSpace:
        """As `policy.storage` counts it: a TOAST chunk at its largest, a table's tuple from
        its columns and widths (none without statistics)."""
        width = TOAST_CHUNK_BYTES if self.toast else (
            None if self.data_width is None else tuple_bytes(self.columns, self.data_width))
        return RelationSpace(self.size_bytes, self.live_tuples, self.dead_tuples, width,
                             self.fillfactor)


async def relations(conn: asyncpg.Connection) -> list[RelationRow]:
    """The tables and TOAST tables of the database with what their room is estimated from."""
    return many(RelationRow, await conn.fetch(Q["storage_relations"]))


async def record(conn: asyncpg.Connection, level: Level, use: Usage, marks: Watermarks,
                 measured_by: str) -> str | None:
    """Upsert the row; the level it replaced (None: the first record)."""
    return await conn.fetchval(
        Q["storage_record"], level.value, use.used_ratio, use.database_bytes, use.total_bytes,
        use.free_bytes, use.source, marks.alert, marks.refuse, measured_by)


async def read(conn: asyncpg.Connection) -> StorageRow | None:
    """The row, or None when nothing was ever recorded."""
    return one(StorageRow, await conn.fetchrow(Q["storage_state"]))
