"""Failure handling over the real PostgreSQL, driven by a fake clock: retries with their stored
due time, permanent errors and exhausted attempts in the dead-letter queue, throttling, lease
expiry and timeouts found by the reconciler (with the late worker fenced off), queue-wait
deadlines, cancellation, and releases."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from ostinato import runs
from ostinato.clock import FakeClock, SystemClock
from ostinato.eventlog.store import read_stream
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.policy.retry import RetrySpec
from ostinato.stores.dead_letters import Q as LETTERS
from ostinato.stores.runs import Q as RUNS
from ostinato.wire import worker as p
from services.reconciler.checks.leases import expire_leases
from services.reconciler.checks.queue_waits import expire_queue_waits
from services.reconciler.checks.timeouts import expire_timeouts
from services.scheduler.tick import fire_due, release_retries
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.reports import Outcome
from tests.helpers.integration import dispatch, new_tenant, store

pytestmark = pytest.mark.integration
RETRY = RetrySpec(max_attempts=3, initial_delay="10s", multiplier=2.0, jitter="none")


class World:
    """One tenant, one job, a fake clock, and the library code of every service."""

    def __init__(self, pool: asyncpg.Pool, clock: FakeClock) -> None:
        self.pool, self.clock = pool, clock
        self.attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)

    async def setup(self, **job: Any) -> None:
        self.tenant, _ = await new_tenant(self.pool)
        async with self.pool.acquire() as conn:
            row, _ = await submit_job(conn, store(self.clock), self.clock, tenant_id=self.tenant,
                                      request=JobRequest(name="j", payload={"n": 1}, **job),
                                      pools=("default",), max_payload_bytes=4096, actor="t")
        self.job = row
        await fire_due(self.pool, store(self.clock), self.clock)
        await self.dispatch()

    async def dispatch(self) -> int:
        return await dispatch(self.pool, self.clock)

    async def claim(self) -> p.ClaimedRun:
        [run] = await self.attempts.claim(self.tenant, p.ClaimRequest(worker_id="w",
                                                                      max_runs=1))
        return run

    async def report(self, run: p.ClaimedRun, kind: str, token: int | None = None,
                     **kw: Any) -> p.BatchItemResult:
        [result] = await self.attempts.record(self.tenant, "w", [Outcome(
            uuid.UUID(run.run_id), run.run_id,
            run.fencing_token if token is None else token, kind, **kw)])
        return result

    async def run_row(self, run: p.ClaimedRun) -> asyncpg.Record:
        async with self.pool.acquire() as conn:
            return await conn.fetchrow(RUNS["run_by_id"], uuid.UUID(run.run_id), self.tenant)

    async def types(self, run: p.ClaimedRun) -> list[str]:
        async with self.pool.acquire() as conn:
            return [r.type for r in await read_stream(conn, uuid.UUID(run.run_id), self.tenant)]


def fail(kind: str = "Boom", retryable: bool = True, classified: bool = False,
         **kw: Any) -> dict[str, Any]:
    return {"error": p.ErrorInfo(type=kind, message="it broke", retryable=retryable,
                                 classified=classified, **kw)}


@pytest.fixture
async def world(pool: asyncpg.Pool) -> World:
    return World(pool, FakeClock(SystemClock().now()))


async def test_retries_wait_their_stored_delay_then_exhaust_into_the_dead_letter_queue(
        world: World) -> None:
    await world.setup(retry=RETRY)
    run = await world.claim()
    for attempt, delay in ((1, 10), (2, 20)):
        assert run.attempt == attempt
        assert not run.final_attempt  # attempts left under the job's policy (max_attempts 3)
        assert (await world.report(run, "fail", **fail())).status == 200
        row = await world.run_row(run)
        assert row["state"] == "retry_scheduled" and row["failures"] == attempt
        assert row["retry_at"] == world.clock.now() + timedelta(seconds=delay)
        world.clock.advance(delay - 1)
        assert await release_retries(world.pool, store(world.clock), world.clock) == 0
        world.clock.advance(1)
        assert await release_retries(world.pool, store(world.clock), world.clock) == 1
        assert await world.dispatch() == 1
        run = await world.claim()
    assert run.final_attempt  # the worker is told: a failure now dead-letters
    assert (await world.report(run, "fail", **fail())).status == 200
    row = await world.run_row(run)
    assert row["state"] == "dead_lettered" and row["attempt"] == 3
    assert (await world.types(run))[-2:] == ["RunFailed", "RunDeadLettered"]
    async with world.pool.acquire() as conn:
        letter = await conn.fetchrow(LETTERS["dead_letter_by_id"], row["id"], world.tenant)
    assert (letter["reason"], letter["attempts"], letter["triage_state"]) == ("exhausted", 3,
                                                                              "new")


async def test_a_claim_says_whether_the_attempt_is_the_policys_last(world: World) -> None:
    """`final_attempt` from the job's own `max_attempts` (1 here, not the default 3)."""
    await world.setup(retry=RetrySpec(max_attempts=1, initial_delay="10s"))
    assert (await world.claim()).final_attempt


async def test_a_permanent_error_goes_straight_to_the_dead_letter_queue(world: World) -> None:
    await world.setup(retry=RETRY)
    run = await world.claim()
    await world.report(run, "fail", **fail("card_declined", retryable=False, classified=True))
    assert (await world.run_row(run))["state"] == "dead_lettered"


async def test_per_job_rules_reclassify_by_type(world: World) -> None:
    await world.setup(retry=RetrySpec(unclassified="permanent"))
    run = await world.claim()
    await world.report(run, "fail", **fail("KeyError"))  # unclassified: permanent for this job
    assert (await world.run_row(run))["state"] == "dead_lettered"


async def test_throttling_reschedules_without_using_an_attempt(world: World) -> None:
    await world.setup(retry=RETRY)
    run = await world.claim()
    await world.report(run, "fail", **fail("throttled", classified=True,
                                            retry_after_seconds=45))
    row = await world.run_row(run)
    assert row["state"] == "retry_scheduled" and row["failures"] == 0
    assert row["retry_at"] == world.clock.now() + timedelta(seconds=45)


async def test_an_expired_lease_is_recovered_and_the_late_worker_is_fenced_off(
        world: World) -> None:
    await world.setup(retry=RETRY)
    run = await world.claim()
    world.clock.advance(31)  # past the 30 s lease, judged by the (pinned) database clock
    assert await expire_leases(world.pool, store(world.clock), world.clock) == 1
    row = await world.run_row(run)
    assert row["state"] == "retry_scheduled" and row["last_error"]["type"] == "lease_expired"
    late = await world.report(run, "complete", output={"late": True})
    assert late.status == 409
    assert (await world.types(run))[-3:] == ["LeaseExpired", "RetryScheduled",
                                             "StaleWriteRejected"]
    assert (await world.run_row(run))["output_ref"] is None
    assert await expire_leases(world.pool, store(world.clock), world.clock) == 0


async def test_a_timeout_the_worker_did_not_report_is_found(world: World) -> None:
    await world.setup(retry=RETRY, timeout="5s")
    run = await world.claim()
    assert run.timeout_seconds == 5
    world.clock.advance(4)
    assert await expire_timeouts(world.pool, store(world.clock), world.clock) == 0
    world.clock.advance(7)  # 5 s timeout + 5 s grace passed
    assert await expire_timeouts(world.pool, store(world.clock), world.clock) == 1
    assert (await world.types(run))[-2:] == ["AttemptTimedOut", "RetryScheduled"]
    assert (await world.report(run, "complete")).status == 409


@pytest.mark.parametrize(("policy", "state"), [("dead_letter", "dead_lettered"),
                                                ("skip", "cancelled")])
async def test_a_queue_wait_deadline_never_leaves_a_run_waiting(world: World, policy: str,
                                                                state: str) -> None:
    await world.setup(queue_wait_timeout="1m", on_queue_wait=policy)
    world.clock.advance(59)
    assert await expire_queue_waits(world.pool, store(world.clock), world.clock) == 0
    world.clock.advance(2)
    assert await expire_queue_waits(world.pool, store(world.clock), world.clock) == 1
    async with world.pool.acquire() as conn:
        [row] = await conn.fetch(RUNS["list_runs"], world.tenant, None, None, None, None, 5)
        stream = await read_stream(conn, row["id"], world.tenant)
    assert row["state"] == state and stream[-2].type == "QueueWaitExpired"
    assert stream[-2].event.deadline == row["due_at"] + timedelta(minutes=1)
    assert await world.attempts.claim(world.tenant, p.ClaimRequest(worker_id="w")) == []


async def test_cancelling_queued_and_running_runs(world: World) -> None:
    await world.setup()
    async with world.pool.acquire() as conn:
        [queued] = await conn.fetch(RUNS["list_runs"], world.tenant, None, None, None, None, 5)
        assert await runs.cancel_run(conn, store(world.clock), tenant_id=world.tenant,
                                     run_id=queued["id"], actor="t") == "cancelled"
    assert await world.attempts.claim(world.tenant, p.ClaimRequest(worker_id="w")) == []

    await world.setup()
    run = await world.claim()
    async with world.pool.acquire() as conn:
        assert await runs.cancel_run(conn, store(world.clock), tenant_id=world.tenant,
                                     run_id=uuid.UUID(run.run_id), actor="t") == "running"
    [beat] = await world.attempts.heartbeat(world.tenant, "w", [p.HeartbeatItem(
        run_id=run.run_id, fencing_token=run.fencing_token)])
    assert beat.cancel_requested
    # The handler could not stop and finished: its result is kept, and ignored.
    assert (await world.report(run, "complete", output={"done": 1})).status == 200
    row = await world.run_row(run)
    assert row["state"] == "cancelled" and row["output_ref"] is not None
    assert (await world.types(run))[-2:] == ["CancelRequested", "RunCancelled"]


async def test_a_released_lease_is_queued_again_at_once_without_using_an_attempt(
        world: World) -> None:
    await world.setup(retry=RETRY)
    run = await world.claim()
    assert (await world.report(run, "release")).status == 200
    row = await world.run_row(run)
    assert row["state"] == "retry_scheduled" and row["failures"] == 0
    assert await release_retries(world.pool, store(world.clock), world.clock) == 1
    assert await world.dispatch() == 1
    again = await world.claim()
    assert again.attempt == 2 and again.fencing_token == run.fencing_token + 1


async def test_a_pool_default_policy_applies_unless_the_job_has_its_own(pool: asyncpg.Pool) -> None:
    from ostinato.policy.retry import parse_retry

    clock = FakeClock(SystemClock().now())
    tenant, _ = await new_tenant(pool)
    defaults = {"default": parse_retry(RetrySpec(max_attempts=7))}
    async with pool.acquire() as conn:
        plain, _ = await submit_job(conn, store(clock), clock, tenant_id=tenant,
                                    request=JobRequest(name="a"), pools=("default",),
                                    max_payload_bytes=100, actor="t", pool_retry=defaults)
        own, _ = await submit_job(conn, store(clock), clock, tenant_id=tenant,
                                  request=JobRequest(name="b", retry=RETRY), pools=("default",),
                                  max_payload_bytes=100, actor="t", pool_retry=defaults)
    assert plain.retry_policy["max_attempts"] == 7
    assert own.retry_policy["max_attempts"] == 3


async def test_outputs_and_logs_expire_after_the_retention_but_payloads_stay(
        world: World) -> None:
    from services.reconciler.checks.retention import expire_outputs

    await world.setup()
    run = await world.claim()
    logs = [p.LogLine(t=0.1, level="info", message="charging")]
    await world.report(run, "complete", output={"ok": True}, logs=logs)
    row = await world.run_row(run)
    kept = [row["payload_ref"], row["output_ref"], row["logs_ref"]]
    assert None not in kept
    retention = timedelta(days=30)
    assert await expire_outputs(world.pool, world.clock, retention=retention) == 0
    world.clock.advance(retention.total_seconds() + 3600)
    assert await expire_outputs(world.pool, world.clock, retention=retention) == 2
    async with world.pool.acquire() as conn:
        left = await conn.fetch("SELECT id, kind FROM blobs WHERE id = ANY($1::uuid[])", kept)
    assert [(r["id"], r["kind"]) for r in left] == [(row["payload_ref"], "payload")]
