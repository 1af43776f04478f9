"""Read models recomputed from the log: what `ostinato rebuild-projections` runs, and what the
integration tests compare with the live rows."""

from __future__ import annotations

import asyncpg

from ostinato.eventlog.readmodels import Q, apply
from ostinato.eventlog.store import read_all_after


async def rebuild(conn: asyncpg.Connection, page: int = 2000) -> int:
    """Recompute every read model from the log; returns the number of events folded.

    The start-lag histogram gets every minute of the log back, older ones included: the
    reconciler's retention deletes those again (`ostinato.eventlog.start_lags`)."""
    async with conn.transaction():
        await conn.execute(Q["truncate_read_models"])
        after, total = 0, 0
        while True:
            recorded = await read_all_after(conn, after, page)
            if not recorded:
                return total
            await apply(conn, recorded)
            after, total = recorded[-1].seq, total + len(recorded)
