"""The ledger never cries wolf after an outage (issue 42): over the real PostgreSQL, with the
scheduler's own tick (`fire_due` under shard leases) and a fake clock (the database clock's
stand-in: leases and due times are judged by it).

Jobs due every second; the database "returns" 90 s later and the scheduler has not polled yet.
Every slot of the outage is late by the clock, but the scheduler has not passed it: the ledger
check records no `LedgerSlotMissing`, no OstinatoOccurrenceOmitted signal, and the overdue check
does not race the scheduler either; once the scheduler has caught up (and its lease renewal
recorded the pass) the check finds every slot accounted for. A slot recorded missing that later
gets its run is corrected by `LedgerSlotResolved`, which the alert state honours."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from ostinato import jobs
from ostinato.clock import Clock, FakeClock
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.eventlog.store import read_stream
from ostinato.jobs import ledger as job_ledger
from ostinato.jobs.request import JobRequest
from ostinato.leases.shard import ShardLeases, passed_every_shard, shard_passes
from ostinato.schedules import ScheduleSpec
from ostinato.stores import health
from ostinato.stores import jobs as job_store
from ostinato.stores.jobs import JobRow
from services.reconciler.checks.alerts import read_signals
from services.reconciler.checks.ledger import check_ledger
from services.reconciler.checks.overdue import check_overdue
from services.scheduler.tick import fire_due
from tests.helpers.integration import new_tenant, store

pytestmark = pytest.mark.integration
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
GRACE = timedelta(seconds=30)
WINDOW = timedelta(hours=1)
TTL = timedelta(seconds=10)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def every_second(pool: asyncpg.Pool, clock: Clock, tenant: uuid.UUID,
                       name: str) -> JobRow:
    async with pool.acquire() as conn:
        row, _ = await jobs.submit_job(
            conn, store(clock), clock, tenant_id=tenant,
            request=JobRequest(name=name, schedule=ScheduleSpec(every="1s", start_at=T0)),
            pools=("default",), max_payload_bytes=1024, actor="test")
    return row


async def outcomes(pool: asyncpg.Pool, job: JobRow, clock: Clock) -> dict[datetime, str]:
    async with pool.acquire() as conn:
        row = await job_store.by_id(conn, job.tenant_id, job.id)
        assert row is not None
        entries = await job_ledger.job_entries(
            conn, job.tenant_id, job.id, row.schedule, overlap=row.overlap,
            calendar=row.calendar, next_slot=row.next_slot, start=T0, end=clock.now(),
            now=clock.now(), grace=GRACE, limit=1000)
    return {e.slot: e.outcome for e in entries}


async def ledger_events(pool: asyncpg.Pool, job: JobRow) -> list[tuple[str, datetime]]:
    async with pool.acquire() as conn:
        stream = await read_stream(conn, job.id, job.tenant_id)
    return [(r.type, r.event.scheduled_for) for r in stream  # type: ignore[attr-defined]
            if r.type.startswith("LedgerSlot")]


async def ledger_missing(pool: asyncpg.Pool, job: JobRow, clock: Clock) -> int:
    """`ledger_missing` of GET /v1/jobs/{id}/health over the test's whole span."""
    async with pool.acquire() as conn:
        found = await health.findings_between(conn, job.tenant_id, job.id, T0 - WINDOW,
                                              clock.now() + WINDOW)
    return found.ledger_missing


async def omitted(pool: asyncpg.Pool, clock: Clock) -> list[str]:
    """The jobs OstinatoOccurrenceOmitted fires for now."""
    async with pool.acquire() as conn:
        signals, _ = await read_signals(conn, clock.now(), db_now=clock.db_now())
    return sorted(s.labels["job_id"] for s in signals if s.rule == "OstinatoOccurrenceOmitted")


async def reconcile(pool: asyncpg.Pool, clock: Clock) -> int:
    return await check_ledger(pool, store(clock), clock, window=WINDOW, grace=GRACE)


def counted(name: str, tenant: uuid.UUID) -> float:
    return REGISTRY.get_sample_value(name, {"tenant": str(tenant)}) or 0.0


async def test_after_an_outage_no_slot_is_judged_until_the_scheduler_has_passed_it(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    made = [await every_second(pool, clock, tenant, f"tick-{k}") for k in range(5)]
    leases = ShardLeases(pool, clock, "scheduler-1", ttl=TTL)
    await leases.refresh()
    assert len(leases.ownership.shards()) == 16

    async def poll() -> int:
        return len(await fire_due(pool, store(clock), clock, batch_size=2,
                                  ownership=leases.ownership))

    # Running normally: each second decided, and the pass recorded by the lease renewal.
    for k in range(1, 4):
        clock.set(at(k))
        while await poll() == 2:
            pass
        await leases.refresh()
    async with pool.acquire() as conn:
        assert {p.decided_through for p in (await shard_passes(conn, None)).values()} == {at(3)}

    # The database is away for 90 s; it returns and the ledger and overdue checks run before
    # the scheduler's first poll. Slots 4..60 are late by the clock past the grace.
    clock.set(at(93))
    with capture_logs() as logs:
        assert await reconcile(pool, clock) == 0
    assert [line for line in logs if line.get("alert") == "ostinato_ledger_slot_missing"] == []
    # Nobody holds the shards yet (the leases lapsed): that is said as such, not as omissions.
    assert {line["alert"] for line in logs if "alert" in line} == {"ostinato_scheduler_frozen"}
    for job in made:
        assert await ledger_events(pool, job) == []
        got = await outcomes(pool, job, clock)
        assert {got[at(k)] for k in range(4, 93)} == {"pending"}
    assert await omitted(pool, clock) == []

    # The scheduler is back: its renewal takes the shards again, its poll has not caught up.
    await leases.refresh()
    assert await poll() == 2  # a full batch: the pass is not complete
    await leases.refresh()
    with capture_logs() as logs:
        assert await reconcile(pool, clock) == 0
        assert await check_overdue(pool, store(clock), clock, grace=GRACE) == 0
    assert [line for line in logs if "alert" in line] == []  # held and catching up: quiet
    for job in made:
        assert await ledger_events(pool, job) == []

    # It catches up; the renewal records the pass; every slot has its run or recorded skip.
    while await poll() == 2:
        pass
    await leases.refresh()
    clock.set(at(95))
    assert await reconcile(pool, clock) == 0
    for job in made:
        got = await outcomes(pool, job, clock)
        assert "missing" not in got.values()
        assert {got[at(k)] for k in range(0, 93)} <= {"in_progress", "skipped"}
        assert await ledger_events(pool, job) == []
    assert await omitted(pool, clock) == []


async def test_a_slot_recorded_missing_that_later_gets_its_run_is_corrected(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await every_second(pool, clock, tenant, "late")
    clock.set(at(40))
    # A pass recorded that had not decided the job (what the check judged by before: the
    # clock alone): slots 0..9 are judged missing.
    async with pool.acquire() as conn:
        await passed_every_shard(conn, at(40))
    assert await reconcile(pool, clock) == 10
    assert await ledger_events(pool, job) == [("LedgerSlotMissing", at(k)) for k in range(10)]
    assert await omitted(pool, clock) == [str(job.id)]
    assert await ledger_missing(pool, job, clock) == 10

    # The scheduler then decides them after all (run_once: the latest runs, the rest skipped).
    before = counted("ostinato_ledger_slots_resolved_total", tenant)
    assert len(await fire_due(pool, store(clock), clock)) == 1
    with capture_logs() as logs:
        assert await reconcile(pool, clock) == 10
    assert await ledger_events(pool, job) == [
        *[("LedgerSlotMissing", at(k)) for k in range(10)],
        *[("LedgerSlotResolved", at(k)) for k in range(10)]]
    assert counted("ostinato_ledger_slots_resolved_total", tenant) == before + 10
    assert len([line for line in logs if line.get("resolves")]) == 10
    async with pool.acquire() as conn:
        stream = await read_stream(conn, job.id, tenant)
        row = await job_store.by_id(conn, tenant, job.id)
    assert {r.event.outcome for r in stream  # type: ignore[attr-defined]
            if r.type == "LedgerSlotResolved"} <= {"skipped", "in_progress"}
    assert row is not None and row.last_missing_slot is None
    assert await omitted(pool, clock) == []  # the alert state honours the correction
    assert await ledger_missing(pool, job, clock) == 0  # and the job's health counts none
    assert await reconcile(pool, clock) == 0  # once per slot

    async with pool.acquire() as conn:  # the read model is the fold of the log
        live = await snapshot(conn)
        await rebuild(conn)
        again = await snapshot(conn)
    assert again["jobs"] == live["jobs"]
