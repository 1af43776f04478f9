"""The expected-occurrence ledger over the real PostgreSQL, with a fake clock: the reconciler's
ledger check (services/reconciler/checks/ledger.py) turns a frozen scheduler's slots and a
deleted run's slot into exactly one `LedgerSlotMissing` each (event, metric, alert line), even
when run again or by two reconcilers at once; completed runs and recorded skips are accounted
for; a schedule the two cron implementations read differently is a `LedgerDisagreement`; and
`GET /v1/jobs/{id}/ledger` lists each slot with its outcome."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from ostinato import jobs
from ostinato.clock import Clock, FakeClock
from ostinato.dags.targets import dag_run_id_for, task_for
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.eventlog.store import read_stream
from ostinato.jobs import ledger as job_ledger
from ostinato.jobs.request import JobRequest
from ostinato.leases.shard import passed_every_shard
from ostinato.runs import dags as dag_runs
from ostinato.schedules import ScheduleSpec, cronexpr
from ostinato.stores import jobs as job_store
from ostinato.stores.jobs import JobRow
from ostinato.wire import worker as p
from services.reconciler.checks.deadlines import check_deadlines
from services.reconciler.checks.ledger import check_ledger
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.api import assert_problem, auth
from tests.helpers.integration import TOPICS, dispatch, new_tenant, store
from tests.helpers.outbox import drain_outbox

pytestmark = pytest.mark.integration
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
GRACE = timedelta(seconds=30)
WINDOW = timedelta(hours=1)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


async def recurring(pool: asyncpg.Pool, clock: Clock, tenant: uuid.UUID,
                    **schedule: object) -> JobRow:
    async with pool.acquire() as conn:
        row, _ = await jobs.submit_job(
            conn, store(clock), clock, tenant_id=tenant,
            request=JobRequest(name="r", schedule=ScheduleSpec(**schedule)),  # type: ignore[arg-type]
            pools=("default",), max_payload_bytes=1024, actor="test")
    return row


async def ledger_of(pool: asyncpg.Pool, job: JobRow, clock: Clock) -> dict[datetime, tuple]:
    async with pool.acquire() as conn:
        row = await job_store.by_id(conn, job.tenant_id, job.id)
        assert row is not None
        entries = await job_ledger.job_entries(
            conn, job.tenant_id, job.id, row.schedule, overlap=row.overlap,
            calendar=row.calendar, next_slot=row.next_slot, start=clock.now() - WINDOW,
            end=clock.now(), now=clock.now(), grace=GRACE, limit=1000)
    return {e.slot: (e.outcome, e.expected_by, e.skip_reason) for e in entries}


async def findings(pool: asyncpg.Pool, job: JobRow) -> list[tuple[str, datetime, str]]:
    async with pool.acquire() as conn:
        stream = await read_stream(conn, job.id, job.tenant_id)
    return [(r.type, r.event.scheduled_for, r.actor) for r in stream  # type: ignore[attr-defined]
            if r.type.startswith("Ledger")]


def counted(name: str, tenant: uuid.UUID) -> float:
    return REGISTRY.get_sample_value(name, {"tenant": str(tenant)}) or 0.0


def alerts(logs: list[dict], name: str) -> list[dict]:
    return [line for line in logs if line.get("alert") == name]


async def reconcile(pool: asyncpg.Pool, clock: Clock) -> int:
    return await check_ledger(pool, store(clock), clock, window=WINDOW, grace=GRACE)


async def passed_without_deciding(pool: asyncpg.Pool, through: datetime) -> None:
    """A faulty scheduler: it records a completed pass over every shard through `through`
    without having decided the jobs due by then (the only way, short of losing a run, that
    a slot the scheduler had its chance at ends up with neither a run nor a skip)."""
    async with pool.acquire() as conn:
        await passed_every_shard(conn, through)


async def test_slots_a_scheduler_passed_without_deciding_are_each_reported_exactly_once(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=T0)
    clock.set(at(1) + timedelta(seconds=1))  # slot 0 a minute late, 1 just due
    await passed_without_deciding(pool, clock.now())
    assert await ledger_of(pool, job, clock) == {at(0): ("missing", "both", None),
                                                 at(1): ("pending", "both", None)}
    before = counted("ostinato_ledger_slots_missing_total", tenant)
    with capture_logs() as logs:
        assert await reconcile(pool, clock) == 1
    assert await findings(pool, job) == [("LedgerSlotMissing", at(0), "reconciler")]
    assert counted("ostinato_ledger_slots_missing_total", tenant) == before + 1
    [line] = alerts(logs, "ostinato_ledger_slot_missing")
    assert line["job_id"] == str(job.id) and line["scheduled_for"] == at(0).isoformat()
    assert line["log_level"] == "error"

    # The same reconciler again, and a restarted one: nothing new.
    with capture_logs() as logs:
        assert await reconcile(pool, clock) == 0
        assert await reconcile(pool, FakeClock(clock.now())) == 0
    assert alerts(logs, "ostinato_ledger_slot_missing") == []
    # Two reconcilers at once on the next missing slot: one event between them.
    clock.set(at(1.75))
    with capture_logs() as logs:
        results = await asyncio.gather(reconcile(pool, clock), reconcile(pool, clock))
    assert sorted(results) == [0, 1]
    assert await findings(pool, job) == [("LedgerSlotMissing", at(0), "reconciler"),
                                         ("LedgerSlotMissing", at(1), "reconciler")]
    assert len(alerts(logs, "ostinato_ledger_slot_missing")) == 1
    assert counted("ostinato_ledger_slots_missing_total", tenant) == before + 2


async def test_a_deleted_runs_slot_becomes_missing(pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=T0)
    for k in range(3):
        clock.set(at(k) + timedelta(seconds=1))
        assert len(await fire_due(pool, store(clock), clock)) == 1
    clock.set(at(3) - timedelta(seconds=1))
    assert await reconcile(pool, clock) == 0  # every slot has its run
    async with pool.acquire() as conn:  # the read model loses a run (an operator's mistake)
        await conn.execute("DELETE FROM runs WHERE job_id = $1 AND scheduled_for = $2", job.id,
                           at(1))
    assert await ledger_of(pool, job, clock) == {
        at(0): ("in_progress", "both", None), at(1): ("missing", "both", None),
        at(2): ("in_progress", "both", None)}
    before = counted("ostinato_ledger_slots_missing_total", tenant)
    with capture_logs() as logs:
        assert await reconcile(pool, clock) == 1
    assert await findings(pool, job) == [("LedgerSlotMissing", at(1), "reconciler")]
    assert counted("ostinato_ledger_slots_missing_total", tenant) == before + 1
    assert len(alerts(logs, "ostinato_ledger_slot_missing")) == 1


async def test_a_succeeded_run_is_completed_and_a_recorded_skip_shows_its_reason(
        pool: asyncpg.Pool) -> None:
    now = datetime.now(UTC).replace(microsecond=0)  # attempt leases are judged by the database
    clock = FakeClock(now)
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=now, misfire="run_once")
    clock.set(now + timedelta(seconds=1))
    assert len(await fire_due(pool, store(clock), clock)) == 1
    await drain_outbox(pool, TOPICS.due)
    await dispatch(pool, clock)
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=1))
    await attempts.record(tenant, "w", [Outcome(uuid.UUID(claimed.run_id), claimed.run_id,
                                                claimed.fencing_token, "complete", output=1)])
    # The scheduler is down for slots 1..4; back at 4:20 it runs slot 4 and records the rest.
    clock.set(now + timedelta(minutes=4, seconds=20))
    assert len(await fire_due(pool, store(clock), clock)) == 1
    got = await ledger_of(pool, job, clock)
    assert got == {now: ("completed", "both", None),
                   **{now + timedelta(minutes=k): ("skipped", "both", "misfire_run_once")
                      for k in (1, 2, 3)},
                   now + timedelta(minutes=4): ("in_progress", "both", None)}
    assert await reconcile(pool, clock) == 0
    assert await findings(pool, job) == []


async def test_a_schedule_the_two_implementations_read_differently_is_a_disagreement(
        pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    # The scheduler as it was before cronexpr rewrote wrapped ranges with a step: croniter 7
    # alone wraps minutes modulo 59 (45, 55, 6); the documented wrap is 45, 55, 5, 15.
    monkeypatch.setattr(cronexpr, "_wrapped_step", lambda part, cycle: part)
    cronexpr._compile.cache_clear()
    monkeypatch.setattr(cronexpr, "_compile", cronexpr._compile.__wrapped__)
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, cron="45-15/10 * * * *", start_at=T0)
    clock.set(at(6) + timedelta(seconds=1))
    assert len(await fire_due(pool, store(clock), clock)) == 1  # the scheduler's slot 09:06
    clock.set(at(16))
    await passed_without_deciding(pool, clock.now())  # nothing due until 09:45 by croniter
    before = counted("ostinato_ledger_disagreements_total", tenant)
    with capture_logs() as logs:
        assert await reconcile(pool, clock) == 5
    assert sorted(await findings(pool, job)) == [
        ("LedgerDisagreement", at(5), "reconciler"), ("LedgerDisagreement", at(6), "reconciler"),
        ("LedgerDisagreement", at(15), "reconciler"),
        ("LedgerSlotMissing", at(5), "reconciler"), ("LedgerSlotMissing", at(15), "reconciler")]
    async with pool.acquire() as conn:
        stream = await read_stream(conn, job.id, tenant)
    assert {r.event.scheduled_for: r.event.expected_by for r in stream  # type: ignore[attr-defined]
            if r.type == "LedgerDisagreement"} == {at(5): "ledger", at(6): "scheduler",
                                                   at(15): "ledger"}
    assert counted("ostinato_ledger_disagreements_total", tenant) == before + 3
    assert len(alerts(logs, "ostinato_ledger_disagreement")) == 3
    assert await reconcile(pool, clock) == 0


async def test_a_schedule_the_ledger_cannot_read_is_an_event_a_metric_and_an_alert_once(
        pool: asyncpg.Pool) -> None:
    """Its slots would go unaudited: one `LedgerScheduleUnreadable` per (job, document), not a
    log line at every sweep; the jobs beside it are still checked."""
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=T0)
    beside = await recurring(pool, clock, tenant, every="1m", start_at=T0)
    async with pool.acquire() as conn:  # a document from a later version, say
        await conn.execute("UPDATE jobs SET schedule = (schedule::jsonb || '{\"version\": 9}')"
                           "::json WHERE id = $1", job.id)
    clock.set(at(1) + timedelta(seconds=1))
    await passed_without_deciding(pool, clock.now())
    before = counted("ostinato_ledger_schedules_unreadable_total", tenant)
    with capture_logs() as logs:
        assert await reconcile(pool, clock) == 2  # the unreadable one, and beside's slot 0
    async with pool.acquire() as conn:
        stream = await read_stream(conn, job.id, tenant)
    [event] = [r for r in stream if r.type == "LedgerScheduleUnreadable"]
    assert "version 9" in event.event.error and event.actor == "reconciler"  # type: ignore[attr-defined]
    assert counted("ostinato_ledger_schedules_unreadable_total", tenant) == before + 1
    [line] = alerts(logs, "ostinato_ledger_schedule_unreadable")
    assert line["job_id"] == str(job.id) and line["log_level"] == "error"
    assert await findings(pool, beside) == [("LedgerSlotMissing", at(0), "reconciler")]
    with capture_logs() as logs:
        assert await reconcile(pool, clock) == 0  # the same document: reported already
    assert alerts(logs, "ostinato_ledger_schedule_unreadable") == []
    async with pool.acquire() as conn:
        await conn.execute("UPDATE jobs SET schedule = (schedule::jsonb || '{\"version\": 10}')"
                           "::json WHERE id = $1", job.id)
    assert await reconcile(pool, clock) == 1  # another document, still unreadable
    assert counted("ostinato_ledger_schedules_unreadable_total", tenant) == before + 2


async def test_a_dag_jobs_slot_is_its_dag_runs_outcome_in_the_ledger_and_the_deadline_check(
        pool: asyncpg.Pool) -> None:
    """A DAG job's occurrence is its DAG run, whose node runs share the job and slot: a DAG run
    with one node succeeded and the other failed is `failed` (not `completed` by the node that
    succeeded) and breaches `complete_within`; one fully succeeded in time is `completed` and no
    breach; one still running past its deadline is `in_progress` and a breach."""
    now = datetime.now(UTC).replace(microsecond=0)  # attempt leases are judged by the database
    clock = FakeClock(now)
    tenant, _ = await new_tenant(pool)
    steps = [{"key": k, "task": "dag.step", "payload": {}, "retry": {"max_attempts": 1}}
             for k in ("a", "b")]
    async with pool.acquire() as conn:
        dag, _ = await dag_runs.define(
            conn, store(clock), tenant_id=tenant, name="pair",
            document={"nodes": steps, "edges": []}, rules=dag_runs.Rules(), actor="test")
        job, _ = await jobs.submit_job(
            conn, store(clock), clock, tenant_id=tenant, request=JobRequest(
                name="pair-etl", task=task_for(dag.id), complete_within="10m",
                schedule=ScheduleSpec(every="20m", start_at=now)),
            pools=("default",), max_payload_bytes=1024, actor="test")
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)

    async def occurrence(fail: set[str]) -> None:
        """Fire the due slot, start its nodes, and report them (those in `fail` fail)."""
        assert await fire_due(pool, store(clock), clock) == []  # a DAG run: no run yet
        async with pool.acquire() as conn:
            await dag_runs.advance_due(conn, store(clock), now=clock.now(), batch_size=100,
                                       actor="scheduler", rules=dag_runs.Rules())
        assert await dispatch(pool, clock) == 2
        claimed = await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=2))
        assert len(claimed) == 2
        for c in claimed:
            async with pool.acquire() as conn:
                row = await conn.fetchval("SELECT key FROM dag_run_nodes WHERE run_id = $1",
                                          uuid.UUID(c.run_id))
            fails = row in fail
            [result] = await attempts.record(tenant, "w", [Outcome(
                uuid.UUID(c.run_id), c.run_id, c.fencing_token, "fail" if fails else "complete",
                output=None if fails else 1,
                error=p.ErrorInfo(type="Boom", message="b", retryable=False) if fails
                else None)])
            assert result.status == 200
        async with pool.acquire() as conn:
            await dag_runs.advance_due(conn, store(clock), now=clock.now(), batch_size=100,
                                       actor="scheduler", rules=dag_runs.Rules())

    clock.set(now + timedelta(seconds=1))
    await occurrence(fail={"b"})  # slot 0: a succeeded, b failed
    clock.set(now + timedelta(minutes=20, seconds=1))
    await occurrence(fail=set())  # slot 1: both succeeded
    clock.set(now + timedelta(minutes=40, seconds=1))
    assert await fire_due(pool, store(clock), clock) == []  # slot 2: its DAG run, no worker
    clock.set(now + timedelta(minutes=50, seconds=2))  # slot 2's deadline has passed

    slots = [now + timedelta(minutes=m) for m in (0, 20, 40)]
    got = await ledger_of(pool, job, clock)
    assert got == {slots[0]: ("failed", "both", None), slots[1]: ("completed", "both", None),
                   slots[2]: ("in_progress", "both", None)}
    async with pool.acquire() as conn:
        row = await job_store.by_id(conn, tenant, job.id)
        assert row is not None
        entries = await job_ledger.job_entries(
            conn, tenant, job.id, row.schedule, overlap=row.overlap, calendar=None,
            next_slot=row.next_slot, start=now, end=clock.now(), now=clock.now(), grace=GRACE,
            limit=10)
    made = {dag_run_id_for(job.id, s) for s in slots}
    assert {e.dag_run_id for e in entries} == made and {e.run_id for e in entries} == {None}
    assert [e.state for e in entries] == ["failed", "succeeded", "pending"]

    assert await check_deadlines(pool, store(clock), clock, window=timedelta(days=1)) == 2
    async with pool.acquire() as conn:
        stream = await read_stream(conn, job.id, tenant)
    assert [(r.event.scheduled_for, r.event.state, r.event.dag_run_id, r.event.run_id)  # type: ignore[attr-defined]
            for r in stream if r.type == "CompletionOverdue"] == [
        (slots[0], "failed", dag_run_id_for(job.id, slots[0]), None),
        (slots[2], "pending", dag_run_id_for(job.id, slots[2]), None)]
    assert await check_deadlines(pool, store(clock), clock, window=timedelta(days=1)) == 0
    async with pool.acquire() as conn:  # the breached DAG runs are marked, as a rebuild does
        assert await conn.fetchval("SELECT count(*) FROM dag_runs WHERE job_id = $1 "
                                   "AND completion_overdue", job.id) == 2
        live = await snapshot(conn)
        await rebuild(conn)
        again = await snapshot(conn)
    assert again["dag_runs"] == live["dag_runs"]
    assert [j["last_overdue_slot"] for j in again["jobs"]] == [slots[2]]


# ---- GET /v1/jobs/{id}/ledger ----------------------------------------------------------------

API_NOW = at(10) + timedelta(seconds=10)


@pytest.fixture
def api_clock() -> Clock:
    return FakeClock(API_NOW)


async def test_the_api_lists_each_slot_with_its_outcome(pool: asyncpg.Pool,
                                                        client: httpx.AsyncClient) -> None:
    clock = FakeClock(T0)
    tenant, key = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=T0, misfire="skip")
    for k in (0, 1):
        clock.set(at(k) + timedelta(seconds=1))
        await fire_due(pool, store(clock), clock)
    async with pool.acquire() as conn:
        await jobs.pause_job(conn, store(clock), tenant_id=tenant, job_id=job.id, actor="t")
    clock.set(at(4) + timedelta(seconds=1))
    async with pool.acquire() as conn:
        await jobs.resume_job(conn, store(clock), tenant_id=tenant, job_id=job.id, actor="t")
    await fire_due(pool, store(clock), clock)  # slots 2..4: skipped (misfire_skip) but 4 runs
    # then the scheduler goes wrong: 5..7 it passed without deciding them (missing); 8..10 it
    # has not passed at all (pending, however late: it has not had its chance yet)
    await passed_without_deciding(pool, at(7))

    r = await client.get(f"/v1/jobs/{job.id}/ledger", params={
        "from": T0.isoformat(), "to": at(11).isoformat()}, headers=auth(key))
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["from"], body["to"], body["next_after"]) == (
        "2026-03-02T09:00:00Z", "2026-03-02T09:11:00Z", None)
    outcomes = [(e["slot"][11:16], e["outcome"], e["skip_reason"]) for e in body["items"]]
    assert outcomes == [
        ("09:00", "in_progress", None), ("09:01", "in_progress", None),
        ("09:02", "skipped", "misfire_skip"), ("09:03", "skipped", "misfire_skip"),
        ("09:04", "in_progress", None),
        *[(f"09:0{k}", "missing", None) for k in range(5, 8)],
        *[(f"09:{k:02}", "pending", None) for k in range(8, 11)]]
    first = body["items"][0]
    assert first["run_id"] and first["state"] == "scheduled" and first["expected_by"] == "both"
    # paused from 09:01:01 to 09:04:01: slots 2..4 fell inside (the resume decided them)
    assert [e["paused"] for e in body["items"][:6]] == [False, False, True, True, True, False]

    page = await client.get(f"/v1/jobs/{job.id}/ledger", params={
        "from": "2026-03-02T09:00:00Z", "to": "2026-03-02T09:11:00Z", "limit": 4},
        headers=auth(key))
    assert [e["slot"][11:16] for e in page.json()["items"]] == ["09:00", "09:01", "09:02",
                                                                 "09:03"]
    after = page.json()["next_after"]
    assert after == "2026-03-02T09:03:00Z"
    rest = await client.get(f"/v1/jobs/{job.id}/ledger", params={
        "from": "2026-03-02T09:00:00Z", "to": "2026-03-02T09:11:00Z", "after": after},
        headers=auth(key))
    assert [e["slot"][11:16] for e in rest.json()["items"]] == [
        "09:04", "09:05", "09:06", "09:07", "09:08", "09:09", "09:10"]
    default = await client.get(f"/v1/jobs/{job.id}/ledger", headers=auth(key))  # the last day
    assert len(default.json()["items"]) == 11 and default.json()["to"] == "2026-03-02T09:10:10Z"


async def test_the_api_refuses_bad_windows_and_other_tenants(pool: asyncpg.Pool,
                                                             client: httpx.AsyncClient) -> None:
    clock = FakeClock(T0)
    tenant, key = await new_tenant(pool)
    _, other_key = await new_tenant(pool)
    job = await recurring(pool, clock, tenant, every="1m", start_at=T0)
    url = f"/v1/jobs/{job.id}/ledger"
    for params, says in [
        ({"from": "2026-03-02T10:00:00Z", "to": "2026-03-02T09:00:00Z"}, "is after"),
        ({"from": "2026-01-01T00:00:00Z", "to": "2026-03-02T09:00:00Z"}, "longer than 31 days"),
        ({"from": "yesterday"}, "not an RFC 3339 instant"),
        ({"to": "2026-03-02T09:00:00"}, "has no offset"),
    ]:
        body = assert_problem(await client.get(url, params=params, headers=auth(key)), 400)
        assert says in body["detail"], body
    assert_problem(await client.get(url, params={"limit": 0}, headers=auth(key)), 422, "limit")
    assert_problem(await client.get(url, headers=auth(other_key)), 404)
    assert_problem(await client.get(url), 401)


async def test_the_sweep_goes_through_every_job_a_few_per_tick(pool: asyncpg.Pool) -> None:
    from services.reconciler.checks.ledger import LedgerSweep

    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    made = [await recurring(pool, clock, tenant, every="1m", start_at=T0) for _ in range(5)]
    clock.set(at(1) + timedelta(seconds=1))
    await passed_without_deciding(pool, clock.now())
    sweep = LedgerSweep(pool, store(clock), clock, window=WINDOW, grace=GRACE, jobs_per_tick=2)
    looked = [await sweep.tick() for _ in range(3)]
    assert looked == [2, 2, 1]  # full ticks go again at once; the short one ends the sweep
    for job in made:
        assert await findings(pool, job) == [("LedgerSlotMissing", at(0), "reconciler")]
    assert await sweep.tick() == 2 and sweep.recorded == 0  # a new sweep: nothing new
