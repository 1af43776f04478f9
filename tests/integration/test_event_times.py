"""An event's two times, by the database's clock: `occurred_at` (the writer's decision, its
`DatabaseClock`) is never after `recorded_at` (PostgreSQL's write, not the transaction's start),
even when the transaction ran a while before the append; a `DatabaseClock` follows the
database's time, not the host's."""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg
import pytest

from ostinato.clock import DatabaseClock
from ostinato.eventlog.records import StreamHead
from tests.helpers.integration import new_tenant, store
from tests.helpers.run_stories import scheduled

pytestmark = pytest.mark.integration


async def test_recorded_at_is_the_write_and_never_before_occurred_at(pool: asyncpg.Pool) -> None:
    tenant_id, _ = await new_tenant(pool)
    clock = DatabaseClock()
    async with pool.acquire() as conn:
        await clock.sync(conn)
        async with conn.transaction():
            started = await conn.fetchval("SELECT now()")  # the transaction's start
            await conn.execute("SELECT pg_sleep(0.05)")  # the writer deliberates
            head = StreamHead(uuid.uuid4(), tenant_id)
            await store(clock).append(conn, [head.next(scheduled(), "test")])
        occurred, recorded = await conn.fetchrow(
            "SELECT occurred_at, recorded_at FROM events WHERE stream_id = $1", head.stream_id)
    assert started < occurred <= recorded


async def test_a_database_clock_tells_the_databases_time(pool: asyncpg.Pool) -> None:
    clock = DatabaseClock()
    assert not clock.synced
    async with pool.acquire() as conn:
        skew = await clock.sync(conn)
        mine = clock.now()
        after = await conn.fetchval("SELECT clock_timestamp()")
    assert clock.synced and clock.db_now() is None
    assert abs(skew) < timedelta(minutes=1)  # the same host: a skew test runs faketime'd ones
    assert mine <= after  # never ahead of the database (the host clock plays no part)
