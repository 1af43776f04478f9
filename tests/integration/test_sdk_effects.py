"""``ostinato.sdk.effects`` against the real PostgreSQL: effects applied once across attempts
(also when the attempt that applied one crashed before reporting), nothing left behind by a
rolled-back attempt, and fenced writes that refuse an older attempt, also concurrently."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
import pytest

from ostinato.sdk import LeaseLost, OstinatoWorkerError, RunContext, current
from ostinato.sdk.context import use_context
from ostinato.sdk.effects import apply_once, fence, install

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
USER_DDL = """
CREATE TABLE charges (id serial PRIMARY KEY, order_id int NOT NULL, amount int NOT NULL);
CREATE TABLE balances (account text PRIMARY KEY, amount int NOT NULL, written_by bigint);
INSERT INTO balances VALUES ('acct-1', 0, NULL);
"""


def attempt(n: int, *, token: int | None = None, run_id: str = "run-1") -> RunContext:
    """The context a worker would give attempt ``n``: same idempotency key, growing token."""
    return RunContext(
        run_id=run_id, job_id="job-1", tenant_id="t1", task="billing.charge", attempt=n,
        fencing_token=n if token is None else token, idempotency_key=f"idem-{run_id}",
        scheduled_for=T0, lease_expires_at=T0, lease_ttl_seconds=30.0,
    )


@pytest.fixture
async def db(pool: asyncpg.Pool) -> asyncpg.Pool:
    async with pool.acquire() as conn:
        await asyncio.gather(install(conn), _install_again(pool))  # concurrent installs are fine
        await install(conn)  # and idempotent
        await conn.execute(USER_DDL)
    return pool


async def _install_again(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await install(conn)


async def charge(pool: asyncpg.Pool, order_id: int, *, crash: bool = False) -> bool:
    """A handler's effect: charge once per run, whatever the number of attempts."""
    async with pool.acquire() as conn, conn.transaction():
        if not await apply_once(conn, name="charge"):
            return False
        await conn.execute("INSERT INTO charges (order_id, amount) VALUES ($1, 42)", order_id)
        if crash:
            raise RuntimeError("worker died before commit")
        return True


async def test_apply_once_applies_an_effect_once_across_attempts(db: asyncpg.Pool) -> None:
    with use_context(attempt(1)):
        assert await charge(db, 7) is True  # applied, then the worker crashed before reporting
    with use_context(attempt(2)):
        assert await charge(db, 7) is False  # the retry sees the dedupe row and skips
    with use_context(attempt(1, run_id="run-2")):
        assert await charge(db, 8) is True  # another run: its own key
    assert await db.fetchval("SELECT count(*) FROM charges WHERE order_id = 7") == 1
    rows = await db.fetch("SELECT key, run_id, attempt FROM ostinato_effects ORDER BY key")
    assert [tuple(r) for r in rows] == [
        ("idem-run-1/charge", "run-1", 1), ("idem-run-2/charge", "run-2", 1)
    ]


async def test_rolled_back_attempt_leaves_no_dedupe_row_so_the_retry_applies(
    db: asyncpg.Pool,
) -> None:
    with use_context(attempt(1)), pytest.raises(RuntimeError):
        await charge(db, 7, crash=True)
    assert await db.fetchval("SELECT count(*) FROM ostinato_effects") == 0
    assert await db.fetchval("SELECT count(*) FROM charges") == 0
    with use_context(attempt(2)):
        assert await charge(db, 7) is True
    assert await db.fetchval("SELECT count(*) FROM charges") == 1
    assert await db.fetchval("SELECT attempt FROM ostinato_effects") == 2


async def test_apply_once_with_an_explicit_key_and_outside_a_transaction(
    db: asyncpg.Pool,
) -> None:
    async with db.acquire() as conn:
        async with conn.transaction():
            assert await apply_once(conn, "order-7", name="email", run_id="r", attempt=1)
            assert not await apply_once(conn, "order-7", name="email")
        with pytest.raises(OstinatoWorkerError, match="inside the transaction"):
            await apply_once(conn, "order-8")
        with pytest.raises(OstinatoWorkerError, match="explicit key"):
            await apply_once(conn)
    assert await db.fetchval("SELECT key FROM ostinato_effects") == "order-7/email"


async def write_balance(pool: asyncpg.Pool, amount: int) -> None:
    """A fenced write: the balance write and the fence commit together or not at all."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "UPDATE balances SET amount = $1, written_by = $2 WHERE account = 'acct-1'",
            amount, current().fencing_token,
        )
        await fence(conn)  # after the write here, to show that the refusal rolls it back


async def test_fence_refuses_an_older_token_and_rolls_its_write_back(db: asyncpg.Pool) -> None:
    with use_context(attempt(2)):
        await write_balance(db, 200)
    stale = attempt(1)
    with use_context(stale), pytest.raises(LeaseLost, match="older"):
        await write_balance(db, 100)  # a paused attempt 1 wakes up after attempt 2 wrote
    assert stale.is_lease_lost()  # the worker will not report its outcome either
    row = await db.fetchrow("SELECT amount, written_by FROM balances")
    assert tuple(row) == (200, 2)
    with use_context(attempt(2)):
        await write_balance(db, 250)  # the same attempt may fence again
    with use_context(attempt(3)):
        await write_balance(db, 300)
    row = await db.fetchrow("SELECT amount, written_by FROM balances")
    assert tuple(row) == (300, 3)
    assert await db.fetchval("SELECT fencing_token FROM ostinato_fences") == 3
    async with db.acquire() as conn:
        with pytest.raises(OstinatoWorkerError, match="inside the transaction"):
            await fence(conn, "run-1", 4)
        with pytest.raises(OstinatoWorkerError, match="run_id and token"):
            await fence(conn)


async def test_concurrent_older_attempt_waits_for_the_newer_and_is_refused(
    db: asyncpg.Pool,
) -> None:
    newer_fenced = asyncio.Event()

    async def newer() -> None:
        async with db.acquire() as conn, conn.transaction():
            await fence(conn, "run-1", 5)
            newer_fenced.set()
            await wait_for_a_lock_wait(db)  # the stale attempt queues behind our fence row
            await conn.execute("UPDATE balances SET amount = 500, written_by = 5")

    async def stale() -> None:
        await asyncio.wait_for(newer_fenced.wait(), 5)
        async with db.acquire() as conn, conn.transaction():
            await fence(conn, "run-1", 4)  # blocks until the newer commits, then refused
            await conn.execute("UPDATE balances SET amount = 400, written_by = 4")

    results = await asyncio.gather(newer(), stale(), return_exceptions=True)
    assert results[0] is None and isinstance(results[1], LeaseLost)
    assert tuple(await db.fetchrow("SELECT amount, written_by FROM balances")) == (500, 5)
    assert await db.fetchval("SELECT fencing_token FROM ostinato_fences") == 5


async def wait_for_a_lock_wait(pool: asyncpg.Pool, within: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await pool.fetchval(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ):
        assert loop.time() < deadline, "the stale attempt never waited for the fence row"
        await asyncio.sleep(0.005)
