"""The health metrics of docs/ALERTS.md, each driven by the library code that sets it against the
real PostgreSQL (and Kafka for the outbox relay and the api's ingest consumer), asserting the
change its cause produces: oldest due age and missed occurrences (the reconciler's overdue
check), retries and lease expirations (the gateway's attempts, the reconciler's lease check),
the outbox backlog (the reconciler's pipeline check and the relay), stuck runs, duplicate claims
(0 under a normal cycle; moved by a run leased twice), firing alerts and alert deliveries (the
reconciler's alert rules and sinks), and the ingest consumer's lag.

Each test has its own database, so gauges read from it hold exactly this test's rows; counters
without a tenant label are compared before/after within the test (one process runs one test at
a time); the ones with a tenant label are read under the test's own tenant.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from ostinato.bus.kafka import ensure_topics, make_producer
from ostinato.bus.topics import Topics
from ostinato.clock import Clock, FakeClock
from ostinato.eventlog.outbox import OutboxRelay
from ostinato.eventlog.store import EventStore
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.leases import attempts as attempt_leases
from ostinato.policy.retry import RetrySpec
from ostinato.schedules import ScheduleSpec
from ostinato.wire import worker as p
from services.api.ingest import SUBMIT_TOPICS, SubmitIngest
from services.reconciler.checks.alerts import deliver_alerts, evaluate_alerts
from services.reconciler.checks.leases import expire_leases
from services.reconciler.checks.overdue import check_overdue
from services.reconciler.checks.pipeline import check_once
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.alerts import owned_job, put_sink, run_once
from tests.helpers.api import auth
from tests.helpers.env import KAFKA_BOOTSTRAP
from tests.helpers.integration import Receiver, dispatch, new_tenant, store
from tests.helpers.integration import kafka_settings as settings

pytestmark = pytest.mark.integration
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def total(name: str) -> float:
    """The sum of every sample of `name`, whatever its labels."""
    return sum(s.value for m in REGISTRY.collect() for s in m.samples if s.name == name)


@pytest.fixture
def api_clock() -> Clock:
    return FakeClock(T0)


async def every_minute(pool: asyncpg.Pool, clock: Clock, tenant: uuid.UUID,
                       retry: RetrySpec | None = None, at: datetime | None = None) -> None:
    schedule = ScheduleSpec(at=at) if at else ScheduleSpec(every="1m", start_at=T0)
    async with pool.acquire() as conn:
        await submit_job(conn, store(clock), clock, tenant_id=tenant, request=JobRequest(
            name="job", schedule=schedule, retry=retry or RetrySpec(max_attempts=3)),
            pools=("default",), max_payload_bytes=1024, actor="test")


async def claim_one(pool: asyncpg.Pool, clock: Clock, tenant: uuid.UUID,
                    attempts: Attempts) -> p.ClaimedRun:
    assert len(await fire_due(pool, store(clock), clock)) == 1
    assert await dispatch(pool, clock) == 1
    [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w1", max_runs=5))
    return claimed


async def test_oldest_due_age_is_the_age_of_the_oldest_slot_no_scheduler_looked_at(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    await every_minute(pool, clock, tenant)
    grace = timedelta(minutes=5)
    clock.set(T0 + timedelta(seconds=90))  # no scheduler ran: slot T0 is 90 s old
    assert await check_overdue(pool, store(clock), clock, grace=grace) == 0
    assert sample("ostinato_oldest_due_age_seconds") == 90.0
    clock.set(T0 + timedelta(seconds=150))
    assert await check_overdue(pool, store(clock), clock, grace=grace) == 0
    assert sample("ostinato_oldest_due_age_seconds") == 150.0
    # The scheduler catches up: nothing due is left without its run.
    assert await fire_due(pool, store(clock), clock)
    assert await check_overdue(pool, store(clock), clock, grace=grace) == 0
    assert sample("ostinato_oldest_due_age_seconds") == 0.0


async def test_occurrences_missed_counts_each_overdue_slot_the_reconciler_repairs(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    await every_minute(pool, clock, tenant)
    grace = timedelta(minutes=5)
    before = sample("ostinato_occurrences_missed_total")
    clock.set(T0 + timedelta(minutes=4))  # late, within the grace: not missed yet
    assert await check_overdue(pool, store(clock), clock, grace=grace) == 0
    assert sample("ostinato_occurrences_missed_total") == before
    clock.set(T0 + timedelta(minutes=10))  # the scheduler is down past the grace
    assert await check_overdue(pool, store(clock), clock, grace=grace) == 1
    assert sample("ostinato_occurrences_missed_total") == before + 1
    assert sample("ostinato_oldest_due_age_seconds") == 600.0
    # Repaired: the same check again finds nothing new.
    assert await check_overdue(pool, store(clock), clock, grace=grace) == 0
    assert sample("ostinato_occurrences_missed_total") == before + 1


async def test_retries_count_a_retryable_failure_and_not_a_success(pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    await every_minute(pool, clock, tenant, retry=RetrySpec(max_attempts=3))
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    name = "ostinato_retries_scheduled_total"
    before, retryable = total(name), sample(name, reason="retryable")
    claimed = await claim_one(pool, clock, tenant, attempts)
    [result] = await attempts.record(tenant, "w1", [Outcome(
        uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "fail",
        error=p.ErrorInfo(type="Boom", message="boom", retryable=True))])
    assert result.status == 200
    assert sample(name, reason="retryable") == retryable + 1
    assert total(name) == before + 1
    # A success schedules no retry; neither does a permanent failure (a dead letter).
    clock.set(T0 + timedelta(minutes=1))
    claimed = await claim_one(pool, clock, tenant, attempts)
    [result] = await attempts.record(tenant, "w1", [Outcome(
        uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "complete",
        output=1)])
    assert result.status == 200
    assert total(name) == before + 1


async def test_lease_expirations_count_a_lease_past_its_ttl_once(pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    await every_minute(pool, clock, tenant, at=T0)
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    before = sample("ostinato_lease_expirations_total")
    retries = sample("ostinato_retries_scheduled_total", reason="lease_expired")
    await claim_one(pool, clock, tenant, attempts)
    clock.advance(29)  # the worker is silent, its lease still current
    assert await expire_leases(pool, store(clock), clock) == 0
    assert sample("ostinato_lease_expirations_total") == before
    clock.advance(2)
    assert await expire_leases(pool, store(clock), clock) == 1
    assert sample("ostinato_lease_expirations_total") == before + 1
    assert sample("ostinato_retries_scheduled_total", reason="lease_expired") == retries + 1
    assert await expire_leases(pool, store(clock), clock) == 0  # taken over: counted once
    assert sample("ostinato_lease_expirations_total") == before + 1


async def test_stuck_runs_count_runs_waiting_in_a_state_past_the_threshold(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    await every_minute(pool, clock, tenant, at=T0)
    stuck_after = timedelta(minutes=5)
    assert len(await fire_due(pool, store(clock), clock)) == 1  # scheduled at T0, no dispatcher

    async def stuck() -> tuple[float, float]:
        await check_once(pool, clock, stuck_after=stuck_after)
        return (sample("ostinato_stuck_runs", state="scheduled"),
                sample("ostinato_stuck_runs", state="queued"))

    clock.set(T0 + timedelta(minutes=4))
    assert await stuck() == (0, 0)
    clock.set(T0 + timedelta(minutes=6))
    assert await stuck() == (1, 0)
    assert await dispatch(pool, clock) == 1  # queued at T0+6m, no worker claims it
    assert await stuck() == (0, 0)
    clock.set(T0 + timedelta(minutes=12))
    assert await stuck() == (0, 1)


async def test_duplicate_claims_stay_0_in_a_normal_cycle_and_count_a_run_leased_twice(
        pool: asyncpg.Pool) -> None:
    clock = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    await every_minute(pool, clock, tenant)
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)
    before = sample("ostinato_duplicate_claims_total")
    claimed = await claim_one(pool, clock, tenant, attempts)
    [result] = await attempts.record(tenant, "w1", [Outcome(
        uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "complete",
        output=1)])
    assert result.status == 200
    assert sample("ostinato_duplicate_claims_total") == before

    # What the counter is for: a queued run that already holds a live lease (granted by
    # another claimer whose run state never followed) is claimed again.
    clock.set(T0 + timedelta(minutes=1))
    assert len(await fire_due(pool, store(clock), clock)) == 1
    assert await dispatch(pool, clock) == 1
    async with pool.acquire() as conn:
        run = await conn.fetchrow("SELECT id, fencing_token FROM runs WHERE tenant_id = $1 "
                                  "AND state = 'queued'", tenant)
        await attempt_leases.grant_leases(conn, [run["id"]], [tenant],
                                          [run["fencing_token"] + 1], "other-gateway",
                                          clock.db_now(), timedelta(seconds=30))
    [again] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w2", max_runs=5))
    assert again.run_id == str(run["id"])
    assert sample("ostinato_duplicate_claims_total") == before + 1


async def test_outbox_backlog_grows_with_appends_and_drains_when_the_relay_publishes(
        pool: asyncpg.Pool, topic_prefix: str) -> None:
    topics = Topics(prefix=topic_prefix, partitions=1)
    await ensure_topics(KAFKA_BOOTSTRAP, topics.all(), topics.partitions)
    real = FakeClock(T0)
    tenant, _ = await new_tenant(pool)
    await every_minute(pool, real, tenant, at=T0)
    async with pool.acquire() as conn:  # what the tenant and job appends queued, if anything
        waiting = await conn.fetchval("SELECT coalesce(sum(cardinality(topics)), 0) FROM outbox")
    assert len(await fire_due(pool, EventStore(real, topics), real)) == 1  # + runs.due
    async with pool.acquire() as conn:
        oldest = await conn.fetchval("SELECT min(created_at) FROM outbox")
    clock = FakeClock(oldest + timedelta(seconds=75))  # the reconciler looks 75 s later
    await check_once(pool, clock, stuck_after=timedelta(minutes=5))
    assert sample("ostinato_outbox_unpublished") == waiting + 1
    assert sample("ostinato_outbox_oldest_unpublished_age_seconds") == 75.0

    producer = make_producer(KAFKA_BOOTSTRAP, "test")
    await producer.start()
    try:
        relay = OutboxRelay(pool, producer, topics)
        while await relay.publish_once():
            pass
    finally:
        await producer.stop()
    await check_once(pool, clock, stuck_after=timedelta(minutes=5))
    assert sample("ostinato_outbox_unpublished") == 0
    assert sample("ostinato_outbox_oldest_unpublished_age_seconds") == 0


async def test_alerts_firing_and_deliveries_follow_a_dead_letter_and_its_sink(
        client: httpx.AsyncClient, pool: asyncpg.Pool, receiver: Receiver,
        api_clock: FakeClock) -> None:
    clock = api_clock
    tenant, key = await new_tenant(pool)
    await put_sink(client, key, "pager", url=receiver.url, default=True)
    await owned_job(pool, clock, tenant, "billing")
    firing = {"tenant": str(tenant), "rule": "OstinatoDeadLetter"}
    delivered = sample("ostinato_alert_deliveries_total", outcome="delivered")
    failed = sample("ostinato_alert_deliveries_total", outcome="failed")
    run_id = await run_once(pool, clock, tenant, succeed=False)  # permanent: dead-lettered
    assert sample("ostinato_alerts_firing", **firing) == 0
    async with httpx.AsyncClient(timeout=5) as http:
        assert await evaluate_alerts(pool, clock) == 1
        assert sample("ostinato_alerts_firing", **firing) == 1
        assert await evaluate_alerts(pool, clock) == 0  # deduplicated: still one
        assert sample("ostinato_alerts_firing", **firing) == 1

        receiver.status = 503  # the sink is down: one failed delivery, nothing delivered
        assert await deliver_alerts(pool, clock, http) == 0
        assert sample("ostinato_alert_deliveries_total", outcome="failed") == failed + 1
        assert sample("ostinato_alert_deliveries_total", outcome="delivered") == delivered
        receiver.status = 200
        clock.advance(2)  # past the first back-off
        assert await deliver_alerts(pool, clock, http) == 1
        assert sample("ostinato_alert_deliveries_total", outcome="delivered") == delivered + 1
        assert sample("ostinato_alert_deliveries_total", outcome="failed") == failed + 1

        clock.advance(60)
        r = await client.post(f"/v1/dead-letters/{run_id}/triage",
                              json={"state": "acknowledged"}, headers=auth(key))
        assert r.status_code == 200, r.text
        assert await evaluate_alerts(pool, clock) == 1  # resolved
        assert sample("ostinato_alerts_firing", **firing) == 0
        assert await deliver_alerts(pool, clock, http) == 1
        assert sample("ostinato_alert_deliveries_total", outcome="delivered") == delivered + 2
    assert receiver.alerts() == [("firing", "OstinatoDeadLetter", "billing"),
                                 ("resolved", "OstinatoDeadLetter", "billing")]


async def test_the_api_ingest_consumer_exports_its_lag_over_the_submit_topics(
        pool: asyncpg.Pool, db_url: str, topic_prefix: str) -> None:
    """The api's Kafka ingest reports `ostinato_consumer_lag_messages` as the batch consumers
    do, every tenant's submit topic under one label (no tenant id in a label)."""
    s = settings(db_url, topic_prefix)
    tenant_id, _ = await new_tenant(pool)
    submit = s.topics.submit(tenant_id)
    await ensure_topics(KAFKA_BOOTSTRAP, [submit], 1)
    producer = make_producer(KAFKA_BOOTSTRAP, "test")
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(submit, value=b"x%d" % i)
    finally:
        await producer.stop()
    ingest = SubmitIngest(pool, store(), FakeClock(T0), s)
    await ingest.start()
    await ingest.follow_tenants()  # the tenant's topic exists: it is read
    labels = {"consumer": f"{topic_prefix}ostinato.ingest", "topic": SUBMIT_TOPICS}
    try:
        got = 0
        async with asyncio.timeout(60):  # a safety net for a broken consumer, not a bound
            while not got:  # one message taken, four still on the broker
                got = sum(len(r) for r in (await ingest.consumer.getmany(
                    timeout_ms=200, max_records=1)).values())
        assert await ingest.report_lag() == {SUBMIT_TOPICS: 4}
        assert REGISTRY.get_sample_value("ostinato_consumer_lag_messages", labels) == 4
        async with asyncio.timeout(60):
            while got < 5:
                got += sum(len(r) for r in (await ingest.consumer.getmany(
                    timeout_ms=200, max_records=5)).values())
        assert await ingest.report_lag() == {SUBMIT_TOPICS: 0}
        assert REGISTRY.get_sample_value("ostinato_consumer_lag_messages", labels) == 0
    finally:
        ingest.stop()
        await ingest.close()
