"""Recurring schedules through the scheduler's and reconciler's library code over the real
PostgreSQL, driven by a fake clock (no test waits for wall time): materialisation, misfire
policies after downtime, pause/resume, calendars, overlap, auto-pause, trigger, backfill, and
the reconciler's proof that nothing was silently skipped."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta

import asyncpg
import pytest

from ostinato import calendars, jobs
from ostinato.clock import FakeClock
from ostinato.domain.errors import InvalidState
from ostinato.eventlog.store import read_stream
from ostinato.jobs.request import JobRequest
from ostinato.schedules import ScheduleSpec
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store
from ostinato.stores.jobs import JobRow
from services.reconciler.checks.gaps import check_gaps
from services.reconciler.checks.overdue import check_overdue
from services.scheduler.tick import fire_due
from tests.helpers.integration import TOPICS, dispatch, new_tenant, store
from tests.helpers.outbox import drain_outbox

pytestmark = pytest.mark.integration
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday


async def recurring(pool: asyncpg.Pool, clock: FakeClock, tenant: uuid.UUID,
                    **schedule: object) -> JobRow:
    spec = ScheduleSpec(**schedule)  # type: ignore[arg-type]
    async with pool.acquire() as conn:
        row, _ = await jobs.submit_job(conn, store(clock), clock, tenant_id=tenant,
                                       request=JobRequest(name="r", schedule=spec),
                                       pools=("default",), max_payload_bytes=1024, actor="test")
    return row


async def job_types(pool: asyncpg.Pool, job: JobRow) -> list[str]:
    async with pool.acquire() as conn:
        return [r.type for r in await read_stream(conn, job.id, job.tenant_id)]


async def runs_of(pool: asyncpg.Pool, job: JobRow) -> list[datetime]:
    async with pool.acquire() as conn:
        rows = await run_store.page(conn, job.tenant_id, job_id=job.id, state=None,
                                    after=(None, None), limit=500)
    return sorted(r.scheduled_for for r in rows)


async def skips_of(pool: asyncpg.Pool, job: JobRow) -> list[tuple]:
    async with pool.acquire() as conn:
        rows = await job_store.skips_between(conn, job.id, T0 - timedelta(days=400),
                                             T0 + timedelta(days=400))
    return sorted((r.first_slot, r.last_slot, r.slots, r.reason) for r in rows)


async def get_job(pool: asyncpg.Pool, job: JobRow) -> JobRow:
    async with pool.acquire() as conn:
        found = await job_store.by_id(conn, job.tenant_id, job.id)
    assert found is not None
    return found


def minutes(*ks: int) -> list[datetime]:
    return [T0 + timedelta(minutes=k) for k in ks]


async def test_each_slot_becomes_one_run_and_the_next_slot_is_stored_with_it(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=T0)
    assert (await get_job(pool, job)).next_slot == T0
    for k in range(3):
        clock.set(T0 + timedelta(minutes=k, seconds=5))
        created = await fire_due(pool, store(clock), clock)
        assert [r.scheduled_for for r in created] == minutes(k)
        assert (await get_job(pool, job)).next_slot == T0 + timedelta(minutes=k + 1)
        assert await fire_due(pool, store(clock), clock) == []  # nothing twice
    assert await runs_of(pool, job) == minutes(0, 1, 2)
    assert await job_types(pool, job) == ["JobCreated"] + ["OccurrenceFired"] * 3


@pytest.mark.parametrize(("policy", "fired", "skipped"), [
    ("run_once", [5], [(0, 4, 5, "misfire_run_once")]),
    ("catch_up", [0, 1, 2], [(3, 5, 3, "catch_up_limit")]),
    ("skip", [5], [(0, 4, 5, "misfire_skip")]),  # the latest is within the grace: it runs
])
async def test_misfire_policies_after_the_scheduler_was_down(
        pool: asyncpg.Pool, policy: str, fired: list[int],
        skipped: list[tuple[int, int, int, str]]) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=T0, misfire=policy,
                          catch_up_max=3)
    clock.set(T0 + timedelta(minutes=5, seconds=30))  # down for slots 0..5; 5 is 30 s late
    await fire_due(pool, store(clock), clock)
    assert await runs_of(pool, job) == minutes(*fired)
    assert await skips_of(pool, job) == [
        (T0 + timedelta(minutes=a), T0 + timedelta(minutes=b), n, reason)
        for a, b, n, reason in skipped]
    assert (await get_job(pool, job)).next_slot == T0 + timedelta(minutes=6)


async def test_pause_creates_nothing_and_resume_applies_the_chosen_policy(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=T0, misfire="skip")
    async with pool.acquire() as conn:
        await jobs.pause_job(conn, store(clock), tenant_id=tenant, job_id=job.id, actor="t")
    clock.set(T0 + timedelta(minutes=3, seconds=10))
    assert await fire_due(pool, store(clock), clock) == []
    async with pool.acquire() as conn:
        await jobs.resume_job(conn, store(clock), tenant_id=tenant, job_id=job.id, actor="t",
                              misfire="catch_up")
    created = await fire_due(pool, store(clock), clock)
    assert [r.scheduled_for for r in created] == minutes(0, 1, 2, 3)
    types = await job_types(pool, job)
    assert types[:3] == ["JobCreated", "JobPaused", "JobResumed"]
    async with pool.acquire() as conn:
        stream = await read_stream(conn, job.id, tenant)
    assert stream[2].event.misfire == "catch_up"  # the decision is recorded
    assert (await get_job(pool, job)).resume_policy is None  # and used once


async def test_calendar_dates_are_skipped_and_recorded(pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        await calendars.define_calendar(conn, store(clock), tenant_id=tenant, name="holidays",
                                        dates=[date(2026, 3, 3)], actor="t")
    job = await recurring(pool, clock, tenant, cron="0 9 * * *", timezone="UTC",
                          start_at=T0, calendar="holidays")
    for day in range(3):
        clock.set(T0 + timedelta(days=day, seconds=1))
        await fire_due(pool, store(clock), clock)
    assert await runs_of(pool, job) == [T0, T0 + timedelta(days=2)]
    assert await skips_of(pool, job) == [(T0 + timedelta(days=1), T0 + timedelta(days=1), 1,
                                          "calendar")]


async def test_overlap_skip_and_queue(pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    skipper = await recurring(pool, clock, tenant, every="1m", start_at=T0, overlap="skip")
    queuer = await recurring(pool, clock, tenant, every="1m", start_at=T0, overlap="queue")
    clock.set(T0 + timedelta(seconds=1))
    await fire_due(pool, store(clock), clock)  # slot 0 of each: nothing active yet
    clock.set(T0 + timedelta(minutes=1, seconds=1))  # slot 1 while slot 0's runs are active
    await fire_due(pool, store(clock), clock)
    assert await runs_of(pool, skipper) == minutes(0)
    assert await skips_of(pool, skipper) == [(minutes(1)[0], minutes(1)[0], 1, "overlap")]
    assert await runs_of(pool, queuer) == minutes(0)
    assert await skips_of(pool, queuer) == []
    assert (await get_job(pool, queuer)).next_slot == minutes(1)[0]  # waiting its turn


async def test_auto_pause_after_consecutive_failures(pool: asyncpg.Pool) -> None:
    from ostinato.clock import SystemClock
    from ostinato.wire import worker as p
    from services.worker_gateway.attempts import Attempts, Outcome

    now = SystemClock().now()
    clock = FakeClock(now)
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=now, auto_pause_after=2)
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    for k in range(2):
        clock.set(now + timedelta(minutes=k, seconds=1))
        assert len(await fire_due(pool, store(clock), clock)) == 1
        await drain_outbox(pool, TOPICS.due)
        await dispatch(pool, clock)
        [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=1))
        await attempts.record(tenant, "w", [Outcome(
            uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "fail",
            error=p.ErrorInfo(type="Boom", message="x", retryable=False, classified=True))])
    assert (await get_job(pool, job)).consecutive_failures == 2
    clock.set(now + timedelta(minutes=2, seconds=1))
    assert await fire_due(pool, store(clock), clock) == []
    row = await get_job(pool, job)
    assert row.status == "paused"
    async with pool.acquire() as conn:
        stream = await read_stream(conn, job.id, tenant)
    assert stream[-1].type == "JobPaused" and stream[-1].event.auto


async def test_trigger_now_and_idempotent_backfill(pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0 + timedelta(hours=2, seconds=7))  # manual runs between slots
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, cron="*/15 * * * *", start_at=T0)
    async with pool.acquire() as conn:
        run_id = (await jobs.trigger_now(conn, store(clock), clock, tenant_id=tenant,
                                         job_id=job.id, actor="t")).run_id
        first = await jobs.backfill(conn, store(clock), tenant_id=tenant, job_id=job.id,
                                    start=T0 - timedelta(hours=1), end=T0, actor="t")
        again = await jobs.backfill(conn, store(clock), tenant_id=tenant, job_id=job.id,
                                    start=T0 - timedelta(hours=1), end=T0, actor="t")
        # the slots from the job's next slot on are the scheduler's: left alone, none created
        ahead = await jobs.backfill(conn, store(clock), tenant_id=tenant, job_id=job.id,
                                    start=T0, end=T0 + timedelta(minutes=30), actor="t")
        manual = await run_store.by_id(conn, tenant, run_id)
        with pytest.raises(InvalidState):  # a manual run is dated by its instant: one per
            await jobs.trigger_now(conn, store(clock), clock, tenant_id=tenant,  # instant
                                   job_id=job.id, actor="t", request_key="same-instant")
        clock.advance(1)
        keyed = [await jobs.trigger_now(conn, store(clock), clock, tenant_id=tenant,
                                        job_id=job.id, actor="t", request_key="once")
                 for _ in range(2)]
        clock.advance(1)
        later = await jobs.trigger_now(conn, store(clock), clock, tenant_id=tenant,
                                       job_id=job.id, actor="t", request_key="once")
        backfilled = await run_store.page(conn, tenant, job_id=job.id, state=None,
                                          after=(None, None), limit=100)
    assert manual is not None and manual.trigger == "manual"
    assert [k.created for k in keyed] == [True, False] and keyed[0].dag_run_id is None
    assert keyed[0].run_id == keyed[1].run_id == later.run_id != run_id  # the key, not the time
    assert (first.runs_created, first.slots_with_runs) == (4, 0)
    assert (again.runs_created, again.slots_with_runs) == (0, 4)
    assert sum(r.trigger == "manual" for r in backfilled) == 2
    assert sorted(r.scheduled_for for r in backfilled if r.trigger == "backfill") == \
        minutes(-60, -45, -30, -15)
    assert [(s.slot, s.action) for s in ahead.slots] == [
        (T0, "upcoming"), (T0 + timedelta(minutes=15), "upcoming")]
    assert ahead.runs_created == 0
    fired = await fire_due(pool, store(clock), clock)  # the scheduler's slots clash with none
    assert fired and all(r.scheduled_for >= T0 for r in fired)


async def test_the_reconciler_repairs_an_overdue_job_by_its_misfire_policy(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=T0, misfire="run_once")
    clock.set(T0 + timedelta(minutes=2, seconds=40))  # no scheduler ran: slots 0..2 overdue
    assert await check_overdue(pool, store(clock), clock, grace=timedelta(seconds=30)) == 1
    assert await runs_of(pool, job) == minutes(2)
    assert await skips_of(pool, job) == [(T0, minutes(1)[0], 2, "misfire_run_once")]
    types = await job_types(pool, job)
    assert types[1] == "OccurrenceMissed"
    assert await check_overdue(pool, store(clock), clock, grace=timedelta(seconds=30)) == 0


async def test_the_reconciler_finds_a_silent_gap_and_repairs_it(pool: asyncpg.Pool) -> None:
    from ostinato.domain import events as ev
    from ostinato.eventlog.records import NewEvent

    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=T0, misfire="catch_up")
    clock.set(T0 + timedelta(seconds=5))
    await fire_due(pool, store(clock), clock)  # slot 0 runs
    # A faulty writer moves the job past slots 1 and 2 without a run or a recorded skip.
    async with pool.acquire() as conn, conn.transaction():
        row = await get_job(pool, job)
        await store(clock).append(conn, [NewEvent(job.id, row.version + 1, tenant,
                                                  ev.JobResumed(), "faulty")])
        await conn.execute("UPDATE jobs SET next_slot = $2, next_run_at = $2 WHERE id = $1",
                           job.id, T0 + timedelta(minutes=3))
    clock.set(T0 + timedelta(minutes=2, seconds=50))
    missed = await check_gaps(pool, store(clock), clock, window=timedelta(hours=1),
                              grace=timedelta(seconds=30))
    assert missed == 2
    assert await runs_of(pool, job) == minutes(0, 1, 2)
    async with pool.acquire() as conn:
        repaired = await run_store.page(conn, tenant, job_id=job.id, state=None,
                                        after=(None, None), limit=10)
    assert {r.trigger for r in repaired if r.scheduled_for > T0} == {"repair"}
    assert (await job_types(pool, job)).count("OccurrenceMissed") == 2
    assert await check_gaps(pool, store(clock), clock, window=timedelta(hours=1),
                            grace=timedelta(seconds=30)) == 0


async def test_a_stored_schedule_that_can_no_longer_be_evaluated_pauses_only_its_job(
        pool: asyncpg.Pool) -> None:
    """A cron form refused since it was stored (here `L5` beside a restricted day of month,
    refused because croniter misreads it) pauses its job with the reason; the job beside it in
    the same tick still gets its run."""
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    good = await recurring(pool, clock, tenant, every="1m", start_at=T0)
    stale = await recurring(pool, clock, tenant, cron="* * * * *", start_at=T0)
    async with pool.acquire() as conn:
        await conn.execute("UPDATE jobs SET schedule = $1 WHERE id = $2",
                           {**stale.schedule, "cron": "0 0 28-3 * L5"}, stale.id)
    clock.set(T0 + timedelta(minutes=1, seconds=1))
    fired = await fire_due(pool, store(clock), clock)
    assert [r.job_id for r in fired] == [good.id]
    row = await get_job(pool, stale)
    assert row.status == "paused"
    async with pool.acquire() as conn:
        stream = await read_stream(conn, stale.id, tenant)
    assert stream[-1].type == "JobPaused" and stream[-1].event.auto
    assert "L" in stream[-1].event.reason and "resume" in stream[-1].event.reason
