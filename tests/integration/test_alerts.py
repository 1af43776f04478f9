"""Alerts that reach people, against the real PostgreSQL and a real HTTP receiver on 127.0.0.1
(uvicorn, a free port): a dead letter fires an alert delivered once to the sink its job's owner
routes to; its triage resolves it, delivered once; a sink down (answering 503, then not
listening at all) and then up gets the notification after it returns, not lost, not
duplicated; a completion deadline breach fires for the owner and resolves at the next success.
The sinks' API: PUT validates, GET never shows the secret, DELETE drops what waits."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from ostinato.alerts import Thresholds
from ostinato.clock import Clock, FakeClock
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.leases.shard import passed_every_shard
from ostinato.policy.retry import RetrySpec
from ostinato.schedules import ScheduleSpec
from ostinato.stores.jobs import JobRow
from ostinato.wire import worker as p
from services.reconciler.checks.alerts import deliver_alerts, evaluate_alerts
from services.reconciler.checks.deadlines import check_deadlines
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.alerts import owned_job, put_sink, run_once
from tests.helpers.api import assert_problem, auth
from tests.helpers.integration import Receiver, dispatch, new_tenant, store

pytestmark = pytest.mark.integration
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def api_clock() -> Clock:
    return FakeClock(T0)


def pending() -> float:
    return REGISTRY.get_sample_value("ostinato_alert_deliveries_pending") or 0.0


async def test_a_dead_letter_fires_once_and_its_triage_resolves_once_for_the_owners_sink(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "billing-pager", url=receiver.url, owners=["billing"],
                   secret_header="Authorization", secret="Bearer s3cret")
    await put_sink(client, key, "catch-all", url=receiver.url + "/default", default=True)
    job = await owned_job(pool, clock, tenant, "billing")
    run_id = await run_once(pool, clock, tenant, succeed=False)  # permanent: dead-lettered

    async with httpx.AsyncClient(timeout=5) as http:
        assert await evaluate_alerts(pool, clock) == 1
        assert await evaluate_alerts(pool, clock) == 0  # firing already: deduplicated
        assert await deliver_alerts(pool, clock, http) == 1
        assert await deliver_alerts(pool, clock, http) == 0
        assert receiver.alerts() == [("firing", "OstinatoDeadLetter", "billing")]
        [body] = receiver.bodies
        assert body["version"] == "4" and body["status"] == "firing"
        assert body["receiver"] == "billing-pager"
        assert body["groupKey"].startswith("{}:{alertname=\"OstinatoDeadLetter\"")
        [alert] = body["alerts"]
        assert alert["labels"]["job_id"] == str(job.id)
        assert alert["labels"]["tenant_id"] == str(tenant)
        assert alert["startsAt"] == "2026-03-02T09:00:00Z"
        assert alert["endsAt"] == "0001-01-01T00:00:00Z"
        assert receiver.headers[0]["authorization"] == "Bearer s3cret"

        listed = (await client.get("/v1/alerts", headers=auth(key))).json()["items"]
        assert [(a["rule"], a["status"]) for a in listed] == [("OstinatoDeadLetter", "firing")]

        clock.advance(60)
        r = await client.post(f"/v1/dead-letters/{run_id}/triage",
                              json={"state": "acknowledged"}, headers=auth(key))
        assert r.status_code == 200, r.text
        assert await evaluate_alerts(pool, clock) == 1
        assert await evaluate_alerts(pool, clock) == 0
        assert await deliver_alerts(pool, clock, http) == 1
        assert await deliver_alerts(pool, clock, http) == 0
    assert receiver.alerts() == [("firing", "OstinatoDeadLetter", "billing"),
                                 ("resolved", "OstinatoDeadLetter", "billing")]
    resolved = receiver.bodies[1]
    assert resolved["status"] == "resolved" and resolved["receiver"] == "billing-pager"
    assert resolved["alerts"][0]["endsAt"] == "2026-03-02T09:01:00Z"
    assert resolved["alerts"][0]["startsAt"] == "2026-03-02T09:00:00Z"


async def test_a_sink_down_then_up_gets_the_alert_after_it_returns_once(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "default", url=receiver.url, default=True)
    await owned_job(pool, clock, tenant, owner=None)  # no owner: the default sink
    await run_once(pool, clock, tenant, succeed=False)
    assert await evaluate_alerts(pool, clock) == 1

    async with httpx.AsyncClient(timeout=5) as http:
        receiver.status = 503
        assert await deliver_alerts(pool, clock, http) == 0
        assert receiver.refused == 1 and pending() >= 1
        assert await deliver_alerts(pool, clock, http) == 0  # backing off: not tried again
        assert receiver.refused == 1
        async with pool.acquire() as conn:
            row = await conn.fetchrow("SELECT attempts, last_error, next_attempt_at "
                                      "FROM alert_deliveries WHERE tenant_id = $1", tenant)
        assert (row["attempts"], row["last_error"]) == (1, "HTTP 503")
        assert row["next_attempt_at"] == T0 + timedelta(seconds=1)

        await receiver.stop()  # not listening at all
        clock.advance(2)
        assert await deliver_alerts(pool, clock, http) == 0
        async with pool.acquire() as conn:
            row = await conn.fetchrow("SELECT attempts, last_error, next_attempt_at "
                                      "FROM alert_deliveries WHERE tenant_id = $1", tenant)
        assert row["attempts"] == 2 and row["last_error"].startswith("ConnectError")
        assert row["next_attempt_at"] == clock.now() + timedelta(seconds=2)

        receiver.status = 200
        await receiver.start()  # back, on the same port
        clock.advance(2)
        assert await evaluate_alerts(pool, clock) == 0  # still firing: nothing new to send
        assert await deliver_alerts(pool, clock, http) == 1
        clock.advance(600)
        assert await deliver_alerts(pool, clock, http) == 0
    assert receiver.alerts() == [("firing", "OstinatoDeadLetter", None)]
    assert receiver.bodies[0]["receiver"] == "default"


async def test_a_completion_deadline_breach_alerts_the_owner_and_resolves_at_the_next_success(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "reports", url=receiver.url, owners=["reporting"])
    async with pool.acquire() as conn:
        await submit_job(conn, store(clock), clock, tenant_id=tenant, request=JobRequest(
            name="nightly", schedule=ScheduleSpec(every="1h", start_at=T0),
            complete_within="10m", owner="reporting"), pools=("default",),
            max_payload_bytes=1024, actor="test")
    assert len(await fire_due(pool, store(clock), clock)) == 1  # slot 0 waits: no worker
    clock.set(T0 + timedelta(minutes=11))
    assert await check_deadlines(pool, store(clock), clock, window=timedelta(days=1)) == 1
    async with httpx.AsyncClient(timeout=5) as http:
        # Also OstinatoNoWorkerForPool (waiting 11 minutes): no owner, and no default sink.
        assert await evaluate_alerts(pool, clock) == 2
        assert await deliver_alerts(pool, clock, http) == 1
        # The next slot's run succeeds: the job has completed again.
        clock.set(T0 + timedelta(minutes=60))
        assert await fire_due(pool, store(clock), clock)
        assert await dispatch(pool, clock) >= 1
        attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
        for claimed in await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=5)):
            await attempts.record(tenant, "w", [Outcome(
                uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "complete",
                output=1)])
        assert await evaluate_alerts(pool, clock) == 2  # both resolve
        assert await deliver_alerts(pool, clock, http) == 1
    assert receiver.alerts() == [("firing", "OstinatoCompletionOverdue", "reporting"),
                                 ("resolved", "OstinatoCompletionOverdue", "reporting")]
    assert receiver.bodies[0]["alerts"][0]["labels"]["kind"] == "complete_within"


# ---- The scenarios: each asserts its ledger entry, event, metric change and alert ----

async def ledger_entry(pool: asyncpg.Pool, job: JobRow, clock: Clock,
                       slot: datetime) -> tuple[str, str | None]:
    """The (outcome, state) the expected-occurrence ledger gives `slot` now."""
    from ostinato.jobs import ledger as job_ledger
    from ostinato.stores import jobs as job_store

    async with pool.acquire() as conn:
        row = await job_store.by_id(conn, job.tenant_id, job.id)
        assert row is not None
        entries = await job_ledger.job_entries(
            conn, job.tenant_id, job.id, row.schedule, overlap=row.overlap,
            calendar=row.calendar, next_slot=row.next_slot, start=slot,
            end=slot + timedelta(microseconds=1), now=clock.now(),
            grace=timedelta(seconds=30), limit=10)
    [entry] = entries
    return entry.outcome, entry.state


def counted(name: str, tenant: uuid.UUID, **labels: str) -> float:
    """The sum of the samples of `name` for `tenant` (whatever other labels they carry)."""
    return sum(sample.value for metric in REGISTRY.collect() for sample in metric.samples
               if sample.name == name and sample.labels.get("tenant") == str(tenant)
               and all(sample.labels.get(k) == v for k, v in labels.items()))


async def stream_types(pool: asyncpg.Pool, stream_id: uuid.UUID,
                       tenant: uuid.UUID) -> list[str]:
    from ostinato.eventlog.store import read_stream

    async with pool.acquire() as conn:
        return [r.type for r in await read_stream(conn, stream_id, tenant)]


async def complete_all(pool: asyncpg.Pool, clock: Clock, tenant: uuid.UUID) -> int:
    """Queue what is due and complete every run claimed; how many."""
    await dispatch(pool, clock)
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    claimed = await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=10))
    for c in claimed:
        [result] = await attempts.record(tenant, "w", [Outcome(
            uuid.UUID(c.run_id), c.run_id, c.fencing_token, "complete", output=1)])
        assert result.status == 200
    return len(claimed)


async def test_a_deleted_run_is_a_missing_slot_event_metric_and_an_omission_alert_once(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    from services.reconciler.checks.ledger import check_ledger

    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "ops", url=receiver.url, owners=["ops"])
    async with pool.acquire() as conn:
        job, _ = await submit_job(conn, store(clock), clock, tenant_id=tenant, request=JobRequest(
            name="minutely", schedule=ScheduleSpec(every="1m", start_at=T0), owner="ops"),
            pools=("default",), max_payload_bytes=1024, actor="test")
    for k in range(3):
        clock.set(T0 + timedelta(minutes=k, seconds=1))
        assert len(await fire_due(pool, store(clock), clock)) == 1
    slot = T0 + timedelta(minutes=1)
    async with pool.acquire() as conn:  # the read model loses a run (an operator's mistake)
        await conn.execute("DELETE FROM runs WHERE job_id = $1 AND scheduled_for = $2", job.id,
                           slot)
    clock.set(T0 + timedelta(minutes=2, seconds=59))
    before = counted("ostinato_ledger_slots_missing_total", tenant)
    assert await check_ledger(pool, store(clock), clock, window=timedelta(hours=1),
                              grace=timedelta(seconds=30)) == 1
    assert await ledger_entry(pool, job, clock, slot) == ("missing", None)
    assert (await stream_types(pool, job.id, tenant)).count("LedgerSlotMissing") == 1
    assert counted("ostinato_ledger_slots_missing_total", tenant) == before + 1
    async with httpx.AsyncClient(timeout=5) as http:
        assert await evaluate_alerts(pool, clock) == 1
        assert await evaluate_alerts(pool, clock) == 0
        assert await deliver_alerts(pool, clock, http) == 1
        assert receiver.alerts() == [("firing", "OstinatoOccurrenceOmitted", "ops")]
        # A later slot's run succeeds: the job does its work again, the omission resolves.
        assert await complete_all(pool, clock, tenant) == 2  # slots 0 and 2
        assert await evaluate_alerts(pool, clock) == 1
        assert await evaluate_alerts(pool, clock) == 0
        assert await deliver_alerts(pool, clock, http) == 1
        assert await deliver_alerts(pool, clock, http) == 0
    assert receiver.alerts() == [("firing", "OstinatoOccurrenceOmitted", "ops"),
                                 ("resolved", "OstinatoOccurrenceOmitted", "ops")]
    assert receiver.bodies[0]["alerts"][0]["labels"]["job_id"] == str(job.id)


async def test_a_run_retrying_past_its_deadline_is_overdue_in_every_signal_and_alerts_once(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    from services.scheduler.tick import release_retries

    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "ops", url=receiver.url, owners=["ops"])
    async with pool.acquire() as conn:
        job, _ = await submit_job(conn, store(clock), clock, tenant_id=tenant, request=JobRequest(
            name="hourly", schedule=ScheduleSpec(every="1h", start_at=T0), owner="ops",
            complete_within="5m", retry=RetrySpec(max_attempts=5, initial_delay="10m",
                                                  max_delay="10m", jitter="none")),
            pools=("default",), max_payload_bytes=1024, actor="test")
    assert len(await fire_due(pool, store(clock), clock)) == 1
    assert await dispatch(pool, clock) == 1
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=1))
    [result] = await attempts.record(tenant, "w", [Outcome(
        uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "fail",
        error=p.ErrorInfo(type="Flaky", message="try again", retryable=True))])
    assert result.status == 200
    clock.set(T0 + timedelta(minutes=6))  # past the deadline, still retrying
    before = counted("ostinato_completion_overdue_total", tenant, kind="complete_within")
    assert await check_deadlines(pool, store(clock), clock, window=timedelta(days=1)) == 1
    assert await check_deadlines(pool, store(clock), clock, window=timedelta(days=1)) == 0
    assert await ledger_entry(pool, job, clock, T0) == ("in_progress", "retry_scheduled")
    assert (await stream_types(pool, job.id, tenant)).count("CompletionOverdue") == 1
    assert counted("ostinato_completion_overdue_total", tenant,
                   kind="complete_within") == before + 1
    async with httpx.AsyncClient(timeout=5) as http:
        assert await evaluate_alerts(pool, clock) == 1
        assert await evaluate_alerts(pool, clock) == 0
        assert await deliver_alerts(pool, clock, http) == 1
        # The retry succeeds, late: the occurrence completed, the alert resolves.
        clock.set(T0 + timedelta(minutes=11))
        assert await release_retries(pool, store(clock), clock) == 1
        assert await complete_all(pool, clock, tenant) == 1
        assert await ledger_entry(pool, job, clock, T0) == ("completed", "succeeded")
        assert await evaluate_alerts(pool, clock) == 1
        assert await evaluate_alerts(pool, clock) == 0
        assert await deliver_alerts(pool, clock, http) == 1
        assert await deliver_alerts(pool, clock, http) == 0
    assert receiver.alerts() == [("firing", "OstinatoCompletionOverdue", "ops"),
                                 ("resolved", "OstinatoCompletionOverdue", "ops")]


async def test_a_dead_letter_of_a_recurring_job_is_failed_in_the_ledger_counted_and_alerted(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "ops", url=receiver.url, owners=["ops"])
    async with pool.acquire() as conn:
        job, _ = await submit_job(conn, store(clock), clock, tenant_id=tenant, request=JobRequest(
            name="hourly", schedule=ScheduleSpec(every="1h", start_at=T0), owner="ops",
            retry=RetrySpec(max_attempts=1)), pools=("default",), max_payload_bytes=1024,
            actor="test")
    before = counted("ostinato_dead_letters_total", tenant)
    run_id = await run_once(pool, clock, tenant, succeed=False)  # permanent: dead-lettered
    assert await ledger_entry(pool, job, clock, T0) == ("failed", "dead_lettered")
    assert (await stream_types(pool, run_id, tenant)).count("RunDeadLettered") == 1
    assert counted("ostinato_dead_letters_total", tenant) == before + 1
    async with httpx.AsyncClient(timeout=5) as http:
        assert await evaluate_alerts(pool, clock) == 1
        assert await evaluate_alerts(pool, clock) == 0
        assert await deliver_alerts(pool, clock, http) == 1
        clock.advance(60)
        r = await client.post(f"/v1/dead-letters/{run_id}/triage",
                              json={"state": "acknowledged"}, headers=auth(key))
        assert r.status_code == 200, r.text
        assert await evaluate_alerts(pool, clock) == 1
        assert await evaluate_alerts(pool, clock) == 0
        assert await deliver_alerts(pool, clock, http) == 1
        assert await deliver_alerts(pool, clock, http) == 0
    assert receiver.alerts() == [("firing", "OstinatoDeadLetter", "ops"),
                                 ("resolved", "OstinatoDeadLetter", "ops")]
    assert counted("ostinato_dead_letters_total", tenant) == before + 1  # triage adds none


async def test_a_dag_job_overdue_with_a_failed_node_alerts_though_another_node_succeeded(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    """A DAG job's occurrence is its DAG run: a node run that succeeded (it shares the job and
    slot) neither meets the deadline nor resolves the alert; the next DAG run's success does."""
    from ostinato.dags.targets import task_for
    from ostinato.runs import dags as dag_runs

    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "etl", url=receiver.url, owners=["etl"])
    steps = [{"key": k, "task": "dag.step", "payload": {}, "retry": {"max_attempts": 1}}
             for k in ("a", "b")]
    async with pool.acquire() as conn:
        dag, _ = await dag_runs.define(
            conn, store(clock), tenant_id=tenant, name="pair",
            document={"nodes": steps, "edges": []}, rules=dag_runs.Rules(), actor="test")
        await submit_job(conn, store(clock), clock, tenant_id=tenant, request=JobRequest(
            name="pair-etl", task=task_for(dag.id), complete_within="10m", owner="etl",
            schedule=ScheduleSpec(every="1h", start_at=T0)), pools=("default",),
            max_payload_bytes=1024, actor="test")
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)

    async def occurrence(fail: set[str]) -> None:
        assert await fire_due(pool, store(clock), clock) == []  # a DAG run, not a run
        async with pool.acquire() as conn:
            await dag_runs.advance_due(conn, store(clock), now=clock.now(), batch_size=100,
                                       actor="scheduler", rules=dag_runs.Rules())
        assert await dispatch(pool, clock) == 2
        for c in await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=2)):
            async with pool.acquire() as conn:
                node_key = await conn.fetchval(
                    "SELECT key FROM dag_run_nodes WHERE run_id = $1", uuid.UUID(c.run_id))
            fails = node_key in fail
            [result] = await attempts.record(tenant, "w", [Outcome(
                uuid.UUID(c.run_id), c.run_id, c.fencing_token, "fail" if fails else "complete",
                output=None if fails else 1,
                error=p.ErrorInfo(type="Boom", message="b", retryable=False) if fails
                else None)])
            assert result.status == 200
        async with pool.acquire() as conn:
            await dag_runs.advance_due(conn, store(clock), now=clock.now(), batch_size=100,
                                       actor="scheduler", rules=dag_runs.Rules())

    await occurrence(fail={"b"})  # node a succeeded, node b failed: the DAG run failed
    clock.set(T0 + timedelta(minutes=11))
    assert await check_deadlines(pool, store(clock), clock, window=timedelta(days=1)) == 1
    async with httpx.AsyncClient(timeout=5) as http:
        # Overdue (node a's success does not count) and node b's dead letter.
        assert await evaluate_alerts(pool, clock) == 2
        assert await deliver_alerts(pool, clock, http) == 2
        assert sorted(receiver.alerts()) == [("firing", "OstinatoCompletionOverdue", "etl"),
                                             ("firing", "OstinatoDeadLetter", "etl")]
        clock.set(T0 + timedelta(hours=1, seconds=1))
        await occurrence(fail=set())  # the next DAG run succeeds
        assert await evaluate_alerts(pool, clock) == 1
        assert await deliver_alerts(pool, clock, http) == 1
    assert receiver.alerts()[2:] == [("resolved", "OstinatoCompletionOverdue", "etl")]


async def test_the_sinks_api(client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    _, key = await new_tenant(pool)
    assert_problem(await client.put("/v1/alert-sinks/x", json={"url": "ftp://nowhere",
                                                                "default": True},
                                    headers=auth(key)), 422, "url")
    assert_problem(await client.put("/v1/alert-sinks/x", json={"url": "https://a.example"},
                                    headers=auth(key)), 422, "owners")
    assert_problem(await client.put("/v1/alert-sinks/x", json={
        "url": "https://a.example", "default": True, "secret": "s"}, headers=auth(key)),
        422, "secret")
    made = await put_sink(client, key, "chat", url="https://chat.example/hook",
                          owners=["b", "a", "a"], secret_header="X-Token", secret="t0p")
    assert made["owners"] == ["a", "b"] and "secret" not in made
    again = await put_sink(client, key, "chat", url="https://chat.example/v2", default=True)
    assert again["created_at"] == made["created_at"] and again["default"]
    [listed] = (await client.get("/v1/alert-sinks", headers=auth(key))).json()["items"]
    assert listed["url"] == "https://chat.example/v2" and "secret" not in listed
    _, other_key = await new_tenant(pool)
    assert (await client.get("/v1/alert-sinks", headers=auth(other_key))).json() == {"items": []}
    assert_problem(await client.delete("/v1/alert-sinks/chat", headers=auth(other_key)), 404)
    assert (await client.delete("/v1/alert-sinks/chat", headers=auth(key))).status_code == 204
    assert_problem(await client.delete("/v1/alert-sinks/chat", headers=auth(key)), 404)


async def test_an_omitted_slot_and_an_auto_paused_job_alert_and_resolve_once(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    """A scheduler that passed a slot without deciding it leaves it with no run: the ledger's
    `LedgerSlotMissing` fires `OstinatoOccurrenceOmitted` until a later run succeeds. A job
    paused by the scheduler after failed runs fires `OstinatoJobAutoPaused` until it is
    resumed."""
    from services.reconciler.checks.ledger import check_ledger

    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "team", url=receiver.url, owners=["etl"])
    async with pool.acquire() as conn:
        job, _ = await submit_job(conn, store(clock), clock, tenant_id=tenant, request=JobRequest(
            name="every-minute", schedule=ScheduleSpec(every="1m", start_at=T0,
                                                       auto_pause_after=1),
            owner="etl", retry=RetrySpec(max_attempts=1)), pools=("default",),
            max_payload_bytes=1024, actor="test")
    clock.set(T0 + timedelta(minutes=1, seconds=1))
    async with pool.acquire() as conn:  # a pass recorded, no run: slot 0 is missing
        await passed_every_shard(conn, clock.now())
    assert await check_ledger(pool, store(clock), clock, window=timedelta(hours=1),
                              grace=timedelta(seconds=30)) == 1
    async with httpx.AsyncClient(timeout=5) as http:
        assert await evaluate_alerts(pool, clock) == 1
        assert await deliver_alerts(pool, clock, http) == 1
        # The scheduler is back: the late slot 0 is skipped or run by its misfire policy, and
        # slot 1's run succeeds; the omission resolves.
        created = await fire_due(pool, store(clock), clock)
        assert created
        assert await dispatch(pool, clock) >= 1
        attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
        for claimed in await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=5)):
            await attempts.record(tenant, "w", [Outcome(
                uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "complete",
                output=1)])
        assert await evaluate_alerts(pool, clock) == 1
        assert await deliver_alerts(pool, clock, http) == 1
        # The next slot fails: auto-paused after one failed run.
        clock.set(T0 + timedelta(minutes=2, seconds=1))
        assert await fire_due(pool, store(clock), clock)
        assert await dispatch(pool, clock) == 1
        [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=5))
        await attempts.record(tenant, "w", [Outcome(
            uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "fail",
            error=p.ErrorInfo(type="Boom", message="b", retryable=False))])
        clock.set(T0 + timedelta(minutes=3, seconds=1))
        await fire_due(pool, store(clock), clock)  # decides the pause
        assert (await client.get(f"/v1/jobs/{job.id}", headers=auth(key))).json()["status"] == \
            "paused"
        assert await evaluate_alerts(pool, clock) == 2  # auto-paused, and its dead letter
        assert await deliver_alerts(pool, clock, http) == 2
        r = await client.post(f"/v1/jobs/{job.id}/resume", json={}, headers=auth(key))
        assert r.status_code == 200, r.text
        assert await evaluate_alerts(pool, clock) == 1
        assert await deliver_alerts(pool, clock, http) == 1
    assert sorted(receiver.alerts()) == sorted([
        ("firing", "OstinatoOccurrenceOmitted", "etl"),
        ("resolved", "OstinatoOccurrenceOmitted", "etl"),
        ("firing", "OstinatoJobAutoPaused", "etl"), ("firing", "OstinatoDeadLetter", "etl"),
        ("resolved", "OstinatoJobAutoPaused", "etl")])
    assert [b["alerts"][0]["status"] for b in receiver.bodies
            if b["alerts"][0]["labels"]["alertname"] == "OstinatoOccurrenceOmitted"] == \
        ["firing", "resolved"]


async def test_a_lease_expired_and_not_taken_over_alerts_the_owner_until_reclaimed(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    """A claimed attempt's lease expires and the lease check does not run: past the threshold
    `OstinatoLeaseStuck` fires once for the owner; the lease check reclaims it (a retry) and
    the alert resolves once."""
    from services.reconciler.checks.leases import expire_leases

    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "payments", url=receiver.url, owners=["payments"])
    async with pool.acquire() as conn:
        job, _ = await submit_job(conn, store(clock), clock, tenant_id=tenant, request=JobRequest(
            name="charge", schedule=ScheduleSpec(at=T0), owner="payments",
            retry=RetrySpec(max_attempts=3)), pools=("default",), max_payload_bytes=1024,
            actor="test")
    assert len(await fire_due(pool, store(clock), clock)) == 1
    assert await dispatch(pool, clock) == 1
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w1", max_runs=1))
    limits = Thresholds(lease_stuck_after=timedelta(seconds=60))
    async with httpx.AsyncClient(timeout=5) as http:
        clock.set(T0 + timedelta(seconds=30 + 59))  # expired, not for a minute yet
        assert await evaluate_alerts(pool, clock, thresholds=limits) == 0
        clock.set(T0 + timedelta(seconds=30 + 61))
        assert await evaluate_alerts(pool, clock, thresholds=limits) == 1
        assert await evaluate_alerts(pool, clock, thresholds=limits) == 0
        assert await deliver_alerts(pool, clock, http) == 1
        assert await expire_leases(pool, store(clock), clock) == 1  # taken over: a retry
        assert await evaluate_alerts(pool, clock, thresholds=limits) == 1
        assert await deliver_alerts(pool, clock, http) == 1
    assert receiver.alerts() == [("firing", "OstinatoLeaseStuck", "payments"),
                                 ("resolved", "OstinatoLeaseStuck", "payments")]
    alert = receiver.bodies[0]["alerts"][0]
    assert alert["labels"]["job_id"] == str(job.id)
    assert alert["annotations"]["stuck_leases"] == "1"
    assert claimed.run_id  # the attempt that held it


async def test_pool_rules_no_worker_outbox_backlog_and_lag_slo_fire_and_resolve_once(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    """Runs wait in a pool no worker serves: `OstinatoNoWorkerForPool`; the tenant's messages
    wait in the outbox: `OstinatoOutboxBacklog`; the first run starts six minutes late:
    `OstinatoLagSLOBreach`. Each fires once for the tenant's default sink (no job, no owner)
    and resolves once when its cause is gone."""
    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "ops", url=receiver.url, default=True)
    await owned_job(pool, clock, tenant, owner="billing")  # the pool rules have no owner
    limits = Thresholds(no_worker_after=timedelta(minutes=5), outbox_after=timedelta(minutes=2),
                        lag_slo=timedelta(seconds=60), lag_window=timedelta(minutes=15),
                        lag_min_samples=1)
    assert len(await fire_due(pool, store(clock), clock)) == 1

    async def evaluate() -> int:
        return await evaluate_alerts(pool, clock, thresholds=limits)

    async with httpx.AsyncClient(timeout=5) as http:
        clock.set(T0 + timedelta(minutes=4))
        assert await evaluate() == 0  # waiting, but not for five minutes yet
        clock.set(T0 + timedelta(minutes=6))
        assert await evaluate() == 1
        assert await evaluate() == 0
        assert await deliver_alerts(pool, clock, http) == 1
        # The outbox backs up (its rows dated back): the tenant's messages wait.
        async with pool.acquire() as conn:
            assert await conn.execute("UPDATE outbox SET created_at = $1", T0) != "UPDATE 0"
        assert await evaluate() == 1
        async with pool.acquire() as conn:
            await conn.execute("DELETE FROM outbox")  # published at last
        assert await evaluate() == 1
        assert await deliver_alerts(pool, clock, http) == 2
        # A worker comes: the run starts six minutes after its due time.
        assert await dispatch(pool, clock) == 1
        attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
        [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=1))
        assert await evaluate() == 2  # lag over its SLO fires, no worker resolves
        await attempts.record(tenant, "w", [Outcome(
            uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "complete",
            output=1)])
        assert await evaluate() == 0
        assert await deliver_alerts(pool, clock, http) == 2
        clock.set(T0 + timedelta(minutes=22))  # the late start has left the window
        assert await evaluate() == 1
        assert await deliver_alerts(pool, clock, http) == 1
    assert receiver.alerts() == [
        ("firing", "OstinatoNoWorkerForPool", None),
        ("firing", "OstinatoOutboxBacklog", None), ("resolved", "OstinatoOutboxBacklog", None),
        ("firing", "OstinatoLagSLOBreach", None), ("resolved", "OstinatoNoWorkerForPool", None),
        ("resolved", "OstinatoLagSLOBreach", None)]
    assert {b["receiver"] for b in receiver.bodies} == {"ops"}
    no_worker = receiver.bodies[0]["alerts"][0]
    assert no_worker["labels"]["pool"] == "default" and "job_id" not in no_worker["labels"]
    assert no_worker["annotations"]["waiting_runs"] == "1"
    lag = next(a for b in receiver.bodies for a in b["alerts"]
               if a["labels"]["alertname"] == "OstinatoLagSLOBreach")
    assert lag["annotations"]["lag_p99_seconds"] == "360.000"


async def test_a_ledger_disagreement_alerts_the_owner_and_resolves_after_its_window(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    """A `LedgerDisagreement` on a job's stream (the two cron implementations disagree on a
    slot) fires `OstinatoLedgerDisagreement` once for the job's owner; it resolves once the
    disagreement is older than the window."""
    from ostinato.domain import events as ev
    from ostinato.eventlog.records import NewEvent

    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "etl", url=receiver.url, owners=["etl"])
    job = await owned_job(pool, clock, tenant, "etl")
    async with pool.acquire() as conn, conn.transaction():
        await store(clock).append(conn, [NewEvent(job.id, job.version + 1, tenant,
                                                  ev.LedgerDisagreement(scheduled_for=T0,
                                                                        expected_by="ledger"),
                                                  "ledger")])
    limits = Thresholds(disagreement_window=timedelta(hours=1))
    async with httpx.AsyncClient(timeout=5) as http:
        assert await evaluate_alerts(pool, clock, thresholds=limits) == 1
        assert await evaluate_alerts(pool, clock, thresholds=limits) == 0
        clock.set(T0 + timedelta(minutes=59))
        assert await evaluate_alerts(pool, clock, thresholds=limits) == 0
        assert await deliver_alerts(pool, clock, http) == 1
        clock.set(T0 + timedelta(minutes=61))
        assert await evaluate_alerts(pool, clock, thresholds=limits) == 1
        assert await deliver_alerts(pool, clock, http) == 1
    assert receiver.alerts() == [("firing", "OstinatoLedgerDisagreement", "etl"),
                                 ("resolved", "OstinatoLedgerDisagreement", "etl")]
    assert receiver.bodies[0]["alerts"][0]["labels"]["job_id"] == str(job.id)
