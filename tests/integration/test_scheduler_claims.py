"""SKIP LOCKED claiming: two schedulers polling the same table concurrently create each of
1,000 due occurrences exactly once, and never lock the same one."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from ostinato.clock import SystemClock
from ostinato.domain import events as ev
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.schedules import ScheduleSpec
from services.scheduler.tick import fire_due
from tests.helpers.integration import new_tenant, pool_logging_statements, store

pytestmark = pytest.mark.integration
N = 1000


async def submit_at(conn: asyncpg.Connection, tenant_id: uuid.UUID, name: str,
                    at: datetime) -> None:
    """A one-off job due at `at`, submitted as the API does."""
    await submit_job(conn, store(), SystemClock(), tenant_id=tenant_id,
                     request=JobRequest(name=name, schedule=ScheduleSpec(at=at)),
                     pools=("default",), max_payload_bytes=1024, actor="test")


RETRY_AT = timedelta(minutes=5)  # after the job's time, in `a_run_waiting_to_retry`


async def a_run_waiting_to_retry(pool: asyncpg.Pool, at: datetime,
                                 later: datetime | None = None) -> ev.RunScheduled:
    """A job due at `at` fired, its run then waiting for a retry due at `at + RETRY_AT` (and,
    given `later`, a second job due then, not fired)."""
    from ostinato.clock import FakeClock

    tenant_id, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        await submit_at(conn, tenant_id, "retried", at)
        if later is not None:
            await submit_at(conn, tenant_id, "later", later)
    [run] = await fire_due(pool, store(), FakeClock(at))
    async with pool.acquire() as conn:
        await conn.execute("UPDATE runs SET state = 'retry_scheduled', retry_at = $1",
                           at + RETRY_AT)
    return run


async def copy_job(conn: asyncpg.Connection, tenant_id: uuid.UUID, name: str, count: int,
                   first: datetime, step: timedelta, *, shards: int | None = None) -> None:
    """`count` copies of the tenant's job `name` by SQL (many jobs fast): the g-th due at
    `first + g * step`, spread over `shards` shards when given (else the original's shard)."""
    await conn.execute(
        "INSERT INTO jobs SELECT (jsonb_populate_record(j, jsonb_build_object("
        "  'id', gen_random_uuid(), 'name', j.name || '-' || g, 'idempotency_key', NULL,"
        "  'shard', coalesce(g % $5::int, j.shard),"
        "  'next_run_at', $3::timestamptz + g * $4::interval))).* "
        "FROM jobs j, generate_series(1, $6::int) AS g WHERE j.tenant_id = $1 AND j.name = $2",
        tenant_id, name, first, step, shards, count)


async def test_two_claimers_never_get_the_same_occurrence(pool: asyncpg.Pool) -> None:
    tenant_id, _ = await new_tenant(pool)
    base = datetime.now(UTC) - timedelta(minutes=5)
    async with pool.acquire() as conn:
        for i in range(N):
            await submit_at(conn, tenant_id, f"j{i}", base + timedelta(milliseconds=i))

    async def due_left() -> int:
        async with pool.acquire() as conn:
            return int(await conn.fetchval(
                "SELECT count(*) FROM jobs WHERE tenant_id = $1 AND next_run_at IS NOT NULL",
                tenant_id))

    async def claimer(name: str) -> list[ev.RunScheduled]:
        mine: list[ev.RunScheduled] = []
        while True:
            batch = await fire_due(pool, store(), SystemClock(), batch_size=25, actor=name)
            # An empty batch can also mean that every candidate this poll saw was locked or
            # just taken by the other claimer: only an empty table of due jobs ends the loop.
            if not batch and not await due_left():
                return mine
            mine += batch
            await asyncio.sleep(0)  # let the other claimer interleave

    a, b = await asyncio.gather(claimer("scheduler-a"), claimer("scheduler-b"))
    keys_a = {(r.job_id, r.scheduled_for) for r in a}
    keys_b = {(r.job_id, r.scheduled_for) for r in b}
    assert a and b, "both claimers should have taken part"
    assert keys_a.isdisjoint(keys_b)
    assert len(keys_a) + len(keys_b) == N == len(a) + len(b)
    async with pool.acquire() as conn:
        runs = await conn.fetchval("SELECT count(*) FROM runs WHERE tenant_id = $1", tenant_id)
        events = await conn.fetchval(
            "SELECT count(*) FROM events WHERE tenant_id = $1 AND type = 'RunScheduled'",
            tenant_id)
        due_left = await conn.fetchval(
            "SELECT count(*) FROM jobs WHERE tenant_id = $1 AND next_run_at IS NOT NULL",
            tenant_id)
    assert runs == events == N
    assert due_left == 0


async def test_the_due_poll_reads_its_candidates_by_primary_key_whatever_the_costs(
        pool: asyncpg.Pool) -> None:
    # Statistics taken while `jobs` was small made the planner hash a sequential scan of the
    # whole table into every poll (7 ms a poll under load); cost settings that favour sequential
    # scans the same way must leave the poll on the primary key, so a poll never reads every job.
    from ostinato.stores import jobs

    tenant_id, _ = await new_tenant(pool)
    now = datetime.now(UTC)
    async with pool.acquire() as conn:
        for i in range(40):
            await submit_at(conn, tenant_id, f"due{i}", now - timedelta(seconds=i))
        # 5,000 future jobs more (only their size matters here).
        await copy_job(conn, tenant_id, "due0", 5000, now + timedelta(days=1),
                       timedelta(seconds=1))
        async with conn.transaction():
            await conn.execute("SET LOCAL seq_page_cost = 0.05")
            await conn.execute("SET LOCAL random_page_cost = 8")
            plan = await conn.fetchval("EXPLAIN (FORMAT JSON) " + jobs.Q["claim_due_jobs"],
                                       now, 400, [], list(range(16)))
            claimed = await jobs.claim_due(conn, now, 400, [], range(16))

    nodes = plan_nodes(plan[0]["Plan"])  # json: decoded by the pool's codec
    assert not [n for n in nodes if n[:2] == ("Seq Scan", "j")], repr(nodes)
    assert [n for n in nodes if n[2] == "jobs_pkey"], repr(nodes)
    assert len(claimed) == 40


async def test_a_busy_due_poll_reads_twice_its_batch_whatever_the_shards(
        pool: asyncpg.Pool) -> None:
    # 3,200 due jobs over the 16 shards: the poll merges the shards' ordered descents and stops
    # after the oldest 2 x batch candidates, instead of reading a batch from every shard
    # (16 x batch index entries and heap rows: 8 of a 400-job poll's 11 ms in a burst), and it
    # still locks the oldest due jobs of all shards. It does so with statistics taken while the
    # jobs are due, too: in a burst they say every job is due, and a branch planned for all its
    # rows read and sorted every due job of its shard (13 ms a poll over 20,000 due jobs).
    from ostinato.leases.shard import SHARDS
    from ostinato.stores import jobs

    # one branch of the merge per shard: a shard without one would never be polled
    assert jobs.Q["claim_due_jobs"].count("($4::smallint[])[") == SHARDS
    tenant_id, _ = await new_tenant(pool)
    now = datetime.now(UTC)
    batch = 100
    async with pool.acquire() as conn:
        await submit_at(conn, tenant_id, "due", now + timedelta(days=1))
        await copy_job(conn, tenant_id, "due", 3200, now - timedelta(minutes=1),
                       -timedelta(milliseconds=1), shards=SHARDS)
        await conn.execute("ANALYZE jobs")
        async with conn.transaction():
            plan = await conn.fetchval(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + jobs.Q["claim_due_jobs"],
                now, batch, [], list(range(SHARDS)))
            oldest = await conn.fetch(
                "SELECT id FROM jobs WHERE status = 'active' AND next_run_at <= $1"
                " ORDER BY next_run_at LIMIT $2", now, batch)
            claimed = await jobs.claim_due(conn, now, batch, [], range(SHARDS))
        await conn.execute("DELETE FROM jobs WHERE tenant_id = $1", tenant_id)

    assert rows_read(plan[0]["Plan"], "jobs") <= 2 * batch + SHARDS, plan_nodes(plan[0]["Plan"])
    nodes = plan_nodes(plan[0]["Plan"])
    assert [n[0] for n in nodes].count("Sort") == 1, nodes  # only the locked batch's order
    assert not [n for n in nodes if n[0] == "Bitmap Heap Scan" and n[1] != "j"], nodes
    assert [j.id for j in claimed] == [r["id"] for r in oldest]


async def test_the_due_poll_is_planned_for_its_instant_whatever_the_plan_cache(
        pool: asyncpg.Pool) -> None:
    # The scheduler's statements are planned once and cached, like every service's (planning
    # each execution cost 0.2-2.8 ms of PostgreSQL a statement, 20 times a second). The due
    # poll alone must not be: its generic plan, made while nothing was due, reads the shards
    # through the wrong index and the candidates by a sequential scan of `jobs` (100-250 ms a
    # poll over 20,000 due jobs). Here the session caches generic plans outright, the worst
    # that plan_cache_mode auto can choose, and the poll still reads about 2 x batch rows.
    from ostinato.leases.shard import SHARDS
    from ostinato.stores import jobs

    tenant_id, _ = await new_tenant(pool)
    now = datetime.now(UTC)
    batch = 100

    async def poll(conn: asyncpg.Connection) -> tuple[asyncpg.Record, list[uuid.UUID]]:
        # the transaction's table statistics count only the poll: what came before is flushed
        await conn.execute("SELECT pg_stat_force_next_flush()")
        await conn.execute("SELECT 1")  # (flushed when the backend is next idle)
        async with conn.transaction():  # locks only, released at its end
            locked = await jobs.claim_due(conn, now, batch, [], range(SHARDS))
            read = await conn.fetchrow(
                "SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables"
                " WHERE relname = 'jobs'")
        return read, [j.id for j in locked]

    async with pool.acquire() as conn:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        try:
            await submit_at(conn, tenant_id, "due", now + timedelta(days=1))
            await poll(conn)  # the statement is prepared while none of it is due
            await copy_job(conn, tenant_id, "due", 3200, now - timedelta(minutes=1),
                           -timedelta(milliseconds=1), shards=SHARDS)
            oldest = [r["id"] for r in await conn.fetch(
                "SELECT id FROM jobs WHERE status = 'active' AND next_run_at <= $1"
                " ORDER BY next_run_at LIMIT $2", now, batch)]
            stale = await poll(conn)
            await conn.execute("ANALYZE jobs")  # statistics that know every job is due
            fresh = await poll(conn)
        finally:
            await conn.execute("RESET plan_cache_mode")
            await conn.execute("DELETE FROM jobs WHERE tenant_id = $1", tenant_id)

    for read, locked in (stale, fresh):
        # the candidates through jobs_due, then each again by primary key
        assert read["seq_scan"] == 0 and read["idx_tup_fetch"] <= 2 * (2 * batch + SHARDS), read
        assert locked == oldest


async def test_the_idle_gate_reads_the_oldest_due_entry_whatever_the_statistics(
        pool: asyncpg.Pool) -> None:
    # The gate runs 20 times a second, planned for its parameters or cached. In a burst,
    # statistics say every job is due, and `EXISTS (... next_run_at <= now)` became a sequential
    # scan stepping over every job already fired (15 ms a call over 20,000); cached with
    # statistics that saw no active job, min() became an aggregate over the whole index (0.4 ms
    # with 20,000 jobs ahead). Whatever the plan, it reads the head of jobs_next_due.
    from ostinato.stores import jobs

    tenant_id, _ = await new_tenant(pool)
    now = datetime.now(UTC)
    statement = "gate_" + uuid.uuid4().hex
    async with pool.acquire() as conn:
        # statistics of a table whose jobs have all run, as after a burst
        await submit_at(conn, tenant_id, "due", now + timedelta(days=1))
        await copy_job(conn, tenant_id, "due", 2000, now - timedelta(hours=1),
                       timedelta(milliseconds=1))
        await conn.execute("UPDATE jobs SET status = 'completed', next_run_at = NULL"
                           " WHERE tenant_id = $1 AND name <> 'due'", tenant_id)
        await conn.execute("ANALYZE jobs")
        await conn.execute(f"PREPARE {statement} (timestamptz) AS " + jobs.Q["any_due_jobs"])
        try:
            async with conn.transaction():
                await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
                await conn.fetchval(f"EXECUTE {statement} (now())")  # the plan is cached
            await copy_job(conn, tenant_id, "due", 3000, now - timedelta(minutes=1),
                           -timedelta(milliseconds=1))
            async with conn.transaction():
                await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
                cached = await conn.fetchval(
                    f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {statement} ('{now.isoformat()}')")
            await conn.execute("ANALYZE jobs")  # statistics that say every job is due
            custom = await conn.fetchval(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + jobs.Q["any_due_jobs"], now)
            assert await jobs.any_due(conn, now)
            assert not await jobs.any_due(conn, now - timedelta(days=1))
        finally:
            await conn.execute(f"DEALLOCATE {statement}")
            await conn.execute("DELETE FROM jobs WHERE tenant_id = $1", tenant_id)

    for plan in (cached, custom):
        nodes = plan_nodes(plan[0]["Plan"])
        assert [n for n in nodes if n[2] == "jobs_next_due"], nodes
        assert rows_read(plan[0]["Plan"], "jobs") == 1, nodes


def rows_read(node: dict, alias: str) -> int:
    """The rows an EXPLAIN ANALYZE (FORMAT JSON) plan's scans of the table under `alias` (or an
    alias `alias_N` of it) read, those its filters removed included, over all loops."""
    own = 0
    if node.get("Alias") == alias or (node.get("Alias") or "").startswith(alias + "_"):
        own = ((node["Actual Rows"] + node.get("Rows Removed by Filter", 0))
               * node["Actual Loops"])  # rows are per loop
    return own + sum(rows_read(child, alias) for child in node.get("Plans", []))


def plan_nodes(node: dict) -> list[tuple[str, str | None, str | None]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan: (type, alias, index)."""
    found = [(node["Node Type"], node.get("Alias"), node.get("Index Name"))]
    for child in node.get("Plans", []):
        found += plan_nodes(child)
    return found


async def test_an_idle_poll_is_one_read_and_a_due_job_still_fires(db_url: str) -> None:
    # Planning the per-shard poll costs more than running it when nothing is due (0.7 ms of
    # PostgreSQL 20 times a second): with nothing due at the clock's instant, the scheduler
    # asks whether anything is due, and neither opens a transaction nor runs the poll.
    from ostinato.clock import FakeClock
    from ostinato.db.pool import create_pool

    statements: list[str] = []

    async def log_queries(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(lambda record: statements.append(record.query))

    pool = await create_pool(db_url, max_size=1)
    try:
        async with pool.acquire() as conn:
            await log_queries(conn)
        tenant_id, _ = await new_tenant(pool)
        at = datetime(2001, 1, 1, tzinfo=UTC)  # before anything another test left due
        async with pool.acquire() as conn:
            await submit_at(conn, tenant_id, "early", at)
        statements.clear()
        assert await fire_due(pool, store(), FakeClock(at - timedelta(seconds=1))) == []
        assert len(statements) == 1, statements  # no BEGIN, no poll, no COMMIT
        assert "LIMIT 1" in statements[0] and "jobs_next_due" in statements[0]

        statements.clear()
        fired = await fire_due(pool, store(), FakeClock(at))
        assert [(r.job_id, r.scheduled_for) for r in fired] == [(fired[0].job_id, at)]
        assert any("The scheduler's poll" in s for s in statements)
    finally:
        await pool.close()


async def test_only_the_due_poll_is_planned_each_time_not_the_append_after_it(
        db_url: str) -> None:
    # The poll asks for a plan of its own each time (SET LOCAL plan_cache_mode); what the
    # transaction runs after it (the leases' check, the append of the fired runs) is cached like
    # every other statement: planned afresh, they cost 0.4 ms of PostgreSQL a poll.
    from ostinato.clock import FakeClock
    from ostinato.db.pool import create_pool

    pool = await create_pool(db_url, max_size=1)  # one session: its plan cache is read below
    try:
        tenant_id, _ = await new_tenant(pool)
        at = datetime(2001, 1, 1, tzinfo=UTC)
        for i in range(12):
            async with pool.acquire() as conn:
                await submit_at(conn, tenant_id, f"j{i}", at + timedelta(seconds=i))
            assert len(await fire_due(pool, store(), FakeClock(at + timedelta(seconds=i)))) == 1
        async with pool.acquire() as conn:
            plans = {r["statement"].split("\n")[0]: (r["generic_plans"], r["custom_plans"])
                     for r in await conn.fetch(
                         "SELECT statement, generic_plans, custom_plans"
                         " FROM pg_prepared_statements")}
            mode = await conn.fetchval("SHOW plan_cache_mode")
    finally:
        await pool.close()
    poll = [v for k, v in plans.items() if k.startswith("-- The scheduler's poll")]
    fired = [v for k, v in plans.items() if k.startswith("-- A due job's one fired slot")]
    assert poll == [(0, 12)], plans  # planned for its instant, every time
    assert fired and fired[0][0] > 0, plans  # the append: from the cache
    assert mode == "auto"


async def test_idle_duties_read_once_each_and_open_no_transaction(db_url: str) -> None:
    # The scheduler's other duties poll 20 times a second too: with nothing to do, each is one
    # read of its partial index, without BEGIN and COMMIT; with work, the transaction follows.
    from ostinato.clock import FakeClock
    from ostinato.runs import dags as dag_runs
    from ostinato.runs.children import notify_parents
    from services.scheduler.tick import release_retries, wake_suspended

    pool, statements = await pool_logging_statements(db_url)
    try:
        at = datetime(2001, 1, 1, tzinfo=UTC)
        run = await a_run_waiting_to_retry(pool, at)
        clock = FakeClock(at + timedelta(minutes=1))
        for name, idle in [
            ("retries", lambda: release_retries(pool, store(), clock)),
            ("wakeups", lambda: wake_suspended(pool, store(), clock)),
        ]:
            statements.clear()
            assert await idle() == 0, name
            assert len(statements) == 1 and "LIMIT 1" in statements[0], (name, statements)
        async with pool.acquire() as conn:
            for name, idle in [
                ("children", lambda: notify_parents(conn, store(), batch_size=10, actor="t")),
                ("dags", lambda: dag_runs.advance_due(conn, store(), now=clock.now(),
                                                      batch_size=10, actor="t",
                                                      rules=dag_runs.Rules())),
            ]:
                statements.clear()
                assert await idle() == 0, name
                await asyncio.sleep(0)  # query loggers are called soon after, not during
                assert len(statements) == 1 and "LIMIT 1" in statements[0], (name, statements)

        statements.clear()  # the retry's time comes: the transaction follows the read
        assert await release_retries(pool, store(), FakeClock(at + RETRY_AT)) == 1
        assert any(s.startswith("BEGIN") for s in statements), statements
        assert run.scheduled_for == at
    finally:
        await pool.close()


async def test_one_read_answers_the_five_polls_and_wakes_the_duties_with_work(
        db_url: str) -> None:
    # An idle scheduler asked five questions every 50 ms, one statement each. The gate asks
    # them in one, wakes the duties whose work it found, and stands for them until it is a poll
    # interval old: a duty's idle tick in between sends nothing.
    from ostinato.clock import FakeClock
    from services.scheduler.work import WorkGate

    pool, statements = await pool_logging_statements(db_url)
    try:
        at = datetime(2001, 1, 1, tzinfo=UTC)
        await a_run_waiting_to_retry(pool, at, later=at + timedelta(days=1))
        clock = FakeClock(at + timedelta(minutes=10))
        woken: list[str] = []
        gate = WorkGate(clock, max_age=0.05)
        gate.wake_with({name: (lambda name=name: woken.append(name)) for name in (
            "release_retries", "wake_suspended", "notify_parents", "advance_dags")})

        statements.clear()
        answer = await gate.read(pool)
        await asyncio.sleep(0)
        assert len(statements) == 1, statements
        assert answer == {"jobs": False, "retries": True, "wakeups": False,
                          "children": False, "dags": False}
        assert woken == ["release_retries"]

        statements.clear()  # younger than max_age: the answer stands, nothing is sent
        assert await gate.has(pool, "retries") and not await gate.has(pool, "wakeups")
        gate.done("retries")  # its duty handled less than a batch
        assert not await gate.has(pool, "retries")
        await asyncio.sleep(0)
        assert statements == []

        clock.advance(0.05)  # as old as a poll interval: the next question reads again
        clock.set(at + timedelta(days=2))
        assert await gate.has(pool, "retries")
        assert (await gate.read(pool))["jobs"]  # the later job is due by now
        await asyncio.sleep(0)
        assert len(statements) == 2, statements
    finally:
        await pool.close()


async def test_idle_scheduler_ticks_send_one_read_and_a_found_retry_is_released(
        db_url: str) -> None:
    # Through the duties themselves: an idle round of all five ticks is one statement, the due
    # poll's; a retry it finds wakes the retry duty, whose tick claims it without asking again.
    from ostinato.clock import FakeClock
    from services.scheduler import tick
    from services.scheduler.work import WorkGate

    pool, statements = await pool_logging_statements(db_url)
    try:
        at = datetime(2001, 1, 1, tzinfo=UTC)
        await a_run_waiting_to_retry(pool, at)
        clock = FakeClock(at + timedelta(minutes=1))
        gate = WorkGate(clock, max_age=0.05)
        woken: list[str] = []
        duties = {d.name: d for d in tick.duties(
            pool, store(), clock, batch_size=100, poll_seconds=0.05, on_created=lambda: None,
            gate=gate)}
        gate.wake_with({name: (lambda name=name: woken.append(name)) for name in duties})

        statements.clear()
        for name in ("fire_due", "release_retries", "wake_suspended", "notify_parents",
                     "advance_dags"):
            assert await duties[name].run_once(clock.now()) == 0, name
        await asyncio.sleep(0)
        assert len(statements) == 1 and "jobs_next_due" not in statements[0], statements
        assert "retry_scheduled" in statements[0] and "dag_runs" in statements[0]
        assert woken == []

        clock.set(at + RETRY_AT)  # the retry's time comes
        clock.advance(0.05)
        statements.clear()
        assert await duties["fire_due"].run_once(clock.now()) == 0
        assert woken == ["release_retries"]
        assert await duties["release_retries"].run_once(clock.now()) == 1
        await asyncio.sleep(0)
        assert statements[1].startswith("BEGIN"), statements  # the gate's read, then the claim
        assert sum("ORDER BY retry_at LIMIT 1" in s for s in statements) == 1, statements
        statements.clear()  # less than a batch: the next tick sends nothing
        assert await duties["release_retries"].run_once(clock.now()) == 0
        await asyncio.sleep(0)
        assert statements == []
    finally:
        await pool.close()
