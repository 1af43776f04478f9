"""The storage state (migration 0047, docs/RETENTION.md "The disk"): the one row the
reconciler upserts from what it measured and decided (`ostinato.policy.storage`), and that
every api instance reads through a short cache to refuse new work while the storage is full."""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.policy.storage import Level, Usage, Watermarks
from ostinato.stores.rows import one

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


async def record(conn: asyncpg.Connection, level: Level, use: Usage, marks: Watermarks,
                 measured_by: str) -> str | None:
    """Upsert the row; the level it replaced (None: the first record)."""
    return await conn.fetchval(
        Q["storage_record"], level.value, use.used_ratio, use.database_bytes, use.total_bytes,
        use.free_bytes, use.source, marks.alert, marks.refuse, measured_by)


async def read(conn: asyncpg.Connection) -> StorageRow | None:
    """The row, or None when nothing was ever recorded."""
    return one(StorageRow, await conn.fetchrow(Q["storage_state"]))
