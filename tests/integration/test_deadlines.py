"""Completion deadlines over the real PostgreSQL with a fake clock (services/reconciler/checks/
deadlines.py): a run not succeeded by slot + `complete_within` — still waiting for a worker, or
retrying — and a recurring job whose last success got older than `max_staleness` each become
exactly one `CompletionOverdue` (event, metric, alert line), even checked again or by two
reconcilers at once; a run that succeeded in time, or was cancelled, is no breach."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from ostinato import jobs
from ostinato.clock import FakeClock
from ostinato.domain.errors import InvalidInput
from ostinato.eventlog.store import read_stream
from ostinato.jobs.request import JobRequest
from ostinato.policy.retry import RetrySpec
from ostinato.schedules import ScheduleSpec
from ostinato.stores import jobs as job_store
from ostinato.stores.jobs import JobRow
from ostinato.wire import worker as p
from services.reconciler.checks.deadlines import check_deadlines
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.integration import dispatch, new_tenant, store

pytestmark = pytest.mark.integration
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WINDOW = timedelta(hours=24)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


async def submit(pool: asyncpg.Pool, clock: FakeClock, tenant: uuid.UUID,
                 **fields: object) -> JobRow:
    async with pool.acquire() as conn:
        row, _ = await jobs.submit_job(
            conn, store(clock), clock, tenant_id=tenant,
            request=JobRequest(name="j", **fields),  # type: ignore[arg-type]
            pools=("default",), max_payload_bytes=1024, actor="test")
    return row


async def overdue(pool: asyncpg.Pool, job: JobRow) -> list[tuple]:
    async with pool.acquire() as conn:
        stream = await read_stream(conn, job.id, job.tenant_id)
    return [(r.event.kind, r.event.scheduled_for, r.event.state, r.event.deadline)  # type: ignore[attr-defined]
            for r in stream if r.type == "CompletionOverdue"]


def counted(tenant: uuid.UUID, kind: str) -> float:
    return REGISTRY.get_sample_value("ostinato_completion_overdue_total",
                                     {"tenant": str(tenant), "kind": kind}) or 0.0


def alert_lines(logs: list[dict]) -> list[dict]:
    return [line for line in logs if line.get("alert") == "ostinato_completion_overdue"]


async def check(pool: asyncpg.Pool, clock: FakeClock) -> int:
    return await check_deadlines(pool, store(clock), clock, window=WINDOW)


async def test_a_run_still_waiting_past_its_deadline_is_one_breach(pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await submit(pool, clock, tenant, schedule=ScheduleSpec(at=T0),
                       complete_within="10m", owner="billing")
    assert (job.complete_within_seconds, job.owner) == (600.0, "billing")
    assert len(await fire_due(pool, store(clock), clock)) == 1  # scheduled, no worker ever
    clock.set(at(9))
    assert await check(pool, clock) == 0  # not yet
    clock.set(at(10) + timedelta(seconds=1))
    before = counted(tenant, "complete_within")
    with capture_logs() as logs:
        assert await check(pool, clock) == 1
    assert await overdue(pool, job) == [("complete_within", T0, "scheduled", at(10))]
    assert counted(tenant, "complete_within") == before + 1
    [line] = alert_lines(logs)
    assert line["job_id"] == str(job.id) and line["log_level"] == "error"
    # Again, a restarted reconciler, and two at once: nothing new.
    assert await check(pool, clock) == 0
    assert await check(pool, FakeClock(clock.now())) == 0
    assert sorted(await asyncio.gather(check(pool, clock), check(pool, clock))) == [0, 0]
    assert len(await overdue(pool, job)) == 1
    assert counted(tenant, "complete_within") == before + 1


async def test_a_run_retrying_past_its_deadline_is_a_breach_and_two_reconcilers_record_it_once(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await submit(pool, clock, tenant, schedule=ScheduleSpec(at=T0),
                       complete_within="5m", retry=RetrySpec(
                           max_attempts=5, initial_delay="1h", max_delay="1h", jitter="none"))
    assert len(await fire_due(pool, store(clock), clock)) == 1
    assert await dispatch(pool, clock) == 1
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w1", max_runs=1))
    [result] = await attempts.record(tenant, "w1", [Outcome(
        uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "fail",
        error=p.ErrorInfo(type="Boom", message="boom", retryable=True))])
    assert result.status == 200
    clock.set(at(6))
    results = await asyncio.gather(check(pool, clock), check(pool, clock))
    assert sorted(results) == [0, 1]
    assert await overdue(pool, job) == [("complete_within", T0, "retry_scheduled", at(5))]


async def test_a_complete_within_longer_than_the_window_breaches_at_its_deadline(
        pool: asyncpg.Pool) -> None:
    """The check chooses runs by deadline, not by slot: a run due two days ago with a two-day
    `complete_within` breaches although its slot lies outside the one-day window."""
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await submit(pool, clock, tenant, schedule=ScheduleSpec(at=T0), complete_within="2d")
    assert len(await fire_due(pool, store(clock), clock)) == 1  # no worker ever takes it
    clock.set(T0 + timedelta(days=2) - timedelta(seconds=1))
    assert await check(pool, clock) == 0  # not yet
    clock.set(T0 + timedelta(days=2, seconds=1))
    assert clock.now() - T0 > WINDOW  # the slot is out of the window, the deadline in it
    assert await check(pool, clock) == 1
    assert await overdue(pool, job) == [
        ("complete_within", T0, "scheduled", T0 + timedelta(days=2))]
    assert await check(pool, clock) == 0


async def test_success_in_time_and_cancelled_runs_are_no_breach(pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await submit(pool, clock, tenant, schedule=ScheduleSpec(at=T0), complete_within="5m")
    assert len(await fire_due(pool, store(clock), clock)) == 1
    assert await dispatch(pool, clock) == 1
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w1", max_runs=1))
    clock.set(at(1))
    [result] = await attempts.record(tenant, "w1", [Outcome(
        uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "complete",
        output=1)])
    assert result.status == 200
    clock.set(at(60))
    assert await check(pool, clock) == 0
    assert await overdue(pool, job) == []


async def test_a_recurring_job_without_success_gets_stale_once_per_episode(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await submit(pool, clock, tenant, schedule=ScheduleSpec(every="1h", start_at=T0),
                       max_staleness="2h")
    clock.set(at(119))
    assert await check(pool, clock) == 0
    clock.set(at(121))
    before = counted(tenant, "max_staleness")
    assert await check(pool, clock) == 1
    assert await check(pool, clock) == 0
    assert await overdue(pool, job) == [("max_staleness", None, None, at(120))]
    assert counted(tenant, "max_staleness") == before + 1


async def test_max_staleness_needs_a_recurring_job_and_durations_are_checked(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    with pytest.raises(InvalidInput) as caught:
        await submit(pool, clock, tenant, schedule=ScheduleSpec(at=T0), max_staleness="1h",
                     complete_within="soon")
    assert {e["field"] for e in caught.value.errors} == {"max_staleness", "complete_within"}
    async with pool.acquire() as conn:
        assert await job_store.page(conn, tenant, status=None, after=(None, None),
                                    limit=10) == []
