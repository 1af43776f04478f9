"""Per-job health and tenant usage against the real PostgreSQL with a fake clock: three slots of
a job — one started 2 s late and succeeded, one started 4 s late and dead-lettered, one never
started — give `GET /v1/jobs/{id}/health` its lag p50/p99/max from the log, last success,
outcomes and overdue count; `GET /v1/usage` its runs, attempts, worker-seconds and bytes; the
claim and outcome metrics (`ostinato_schedule_lag_seconds{tenant,pool}`,
`ostinato_run_duration_seconds{tenant,pool,outcome}`, `ostinato_runs_completed_total{tenant,
outcome}`) move by exactly these runs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from ostinato.clock import Clock, FakeClock
from ostinato.eventlog.store import expire_blobs
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.policy.retry import RetrySpec
from ostinato.schedules import ScheduleSpec
from ostinato.wire import worker as p
from services.reconciler.checks.deadlines import check_deadlines
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.api import assert_problem, auth
from tests.helpers.integration import dispatch, new_tenant, store

pytestmark = pytest.mark.integration
# Near the real time: blobs are dated by the database's own now() (payload and output bytes).
T0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)


@pytest.fixture
def api_clock() -> Clock:
    return FakeClock(T0)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def three_slots_health(client: httpx.AsyncClient, job_id: uuid.UUID, key: str,
                             succeeded_at: datetime) -> dict[str, Any]:
    """GET the job's health after its three slots (started 2 s and 4 s late, the third never):
    one success, one failure, one in progress; returns the body for further checks."""
    r = await client.get(f"/v1/jobs/{job_id}/health?window=1h", headers=auth(key))
    assert r.status_code == 200, r.text
    h = r.json()
    assert (h["runs"], h["succeeded"], h["failed"], h["in_progress"], h["started"]) == \
        (3, 1, 1, 1, 2)
    assert h["lag_p50_seconds"] == pytest.approx(3.0)
    assert h["lag_p99_seconds"] == pytest.approx(2 + 2 * 0.99)
    assert h["lag_max_seconds"] == pytest.approx(4.0)
    assert datetime.fromisoformat(h["last_success_at"]) == succeeded_at
    return h

async def test_health_usage_and_metrics_of_three_slots(
        client: httpx.AsyncClient, pool: asyncpg.Pool, api_clock: FakeClock) -> None:
    clock = api_clock
    tenant, key = await new_tenant(pool)
    t = str(tenant)
    async with pool.acquire() as conn:
        job, _ = await submit_job(conn, store(clock), clock, tenant_id=tenant, request=JobRequest(
            name="every-minute", schedule=ScheduleSpec(every="1m", start_at=T0),
            payload={"n": 1}, complete_within="30s", retry=RetrySpec(max_attempts=1)),
            pools=("default",), max_payload_bytes=1024, actor="test")
    lag_before = sample("ostinato_schedule_lag_seconds_count", tenant=t, pool="default")
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=300)
    outcomes = {0: ("complete", 1.5), 1: ("fail", 0.5)}
    for k in range(3):
        clock.set(T0 + timedelta(minutes=k))
        assert len(await fire_due(pool, store(clock), clock)) == 1
        if k not in outcomes:
            continue  # the third slot never starts
        assert await dispatch(pool, clock) == 1
        clock.advance(2 * (k + 1))  # started 2 s, then 4 s after its due time
        [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=1))
        kind, took = outcomes[k]
        clock.advance(took)
        error = p.ErrorInfo(type="Boom", message="b", retryable=False) if kind == "fail" else None
        [r] = await attempts.record(tenant, "w", [Outcome(
            uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, kind,
            output={"ok": True}, error=error)])
        assert r.status == 200
        if k == 0:
            succeeded_at = clock.now()
    clock.set(T0 + timedelta(minutes=3))
    assert await check_deadlines(pool, store(clock), clock, window=timedelta(days=1)) == 2

    # Metrics: two first attempts started, one success and one failure with their durations.
    lag = "ostinato_schedule_lag_seconds"
    assert sample(f"{lag}_count", tenant=t, pool="default") == lag_before + 2
    assert sample(f"{lag}_sum", tenant=t, pool="default") == pytest.approx(6.0)
    assert sample("ostinato_run_duration_seconds_sum", tenant=t, pool="default",
                  outcome="succeeded") == pytest.approx(1.5)
    assert sample("ostinato_run_duration_seconds_sum", tenant=t, pool="default",
                  outcome="failed") == pytest.approx(0.5)
    assert sample("ostinato_runs_completed_total", tenant=t, outcome="succeeded") == 1
    assert sample("ostinato_runs_completed_total", tenant=t, outcome="failed") == 1
    assert sample("ostinato_completion_overdue_total", tenant=t, kind="complete_within") == 2

    h = await three_slots_health(client, job.id, key, succeeded_at)
    assert (h["overdue"], h["missed"], h["ledger_missing"]) == (2, 0, 0)
    assert h["complete_within_seconds"] == 30.0
    assert_problem(await client.get(f"/v1/jobs/{job.id}/health?window=forever",
                                    headers=auth(key)), 400)
    assert_problem(await client.get(f"/v1/jobs/{uuid.uuid4()}/health", headers=auth(key)), 404)
    _, other = await new_tenant(pool)
    assert_problem(await client.get(f"/v1/jobs/{job.id}/health", headers=auth(other)), 404)

    window = {"from": (T0 - timedelta(days=1)).isoformat(),
              "to": (T0 + timedelta(days=1)).isoformat(), "granularity": "day"}
    r = await client.get("/v1/usage", params=window, headers=auth(key))
    assert r.status_code == 200, r.text
    total = r.json()["total"]
    assert (total["runs"], total["attempts"], total["workflow_steps"]) == (3, 2, 0)
    assert total["worker_seconds"] == pytest.approx(2.0)
    assert total["payload_bytes"] == len(b'{"n":1}')
    assert total["output_bytes"] == len(b'{"ok":true}')
    assert sum(i["runs"] for i in r.json()["items"]) == 3
    # Retention expires the outputs: usage still counts their bytes (sized on the events).
    async with pool.acquire() as conn:
        assert await expire_blobs(conn, T0 + timedelta(days=1)) >= 1
        assert await conn.fetchval("SELECT count(*) FROM blobs WHERE tenant_id = $1 "
                                   "AND kind = 'output'", tenant) == 0
    kept = (await client.get("/v1/usage", params=window, headers=auth(key))).json()["total"]
    assert (kept["output_bytes"], kept["payload_bytes"]) == (len(b'{"ok":true}'),
                                                             len(b'{"n":1}'))
    hourly = await client.get("/v1/usage", params={**window, "granularity": "hour"},
                              headers=auth(key))
    assert sum(i["attempts"] for i in hourly.json()["items"]) == 2
    assert (await client.get("/v1/usage", params=window, headers=auth(other))).json()[
        "total"]["runs"] == 0
    assert_problem(await client.get("/v1/usage", params={
        "from": T0.isoformat(), "to": (T0 + timedelta(days=40)).isoformat()},
        headers=auth(key)), 400)


async def test_a_dag_jobs_health_counts_its_dag_runs_not_its_nodes_runs(
        client: httpx.AsyncClient, pool: asyncpg.Pool, api_clock: FakeClock) -> None:
    """Three slots of a DAG job (two nodes each): the first DAG run starts 2 s late and
    succeeds, the second 4 s late and fails at its root, the third never starts. The health
    counts the three DAG runs as its occurrences (not the nodes' runs), their lag from the DAG
    run's start, and the first DAG run's end as the last success."""
    from ostinato.dags.targets import task_for
    from ostinato.runs import dags as dag_runs

    clock = api_clock
    tenant, key = await new_tenant(pool)
    async with pool.acquire() as conn:
        dag, _ = await dag_runs.define(
            conn, store(clock), tenant_id=tenant, name="pair", rules=dag_runs.Rules(),
            document={"nodes": [{"key": "a", "task": "dag.step", "retry": {"max_attempts": 1}},
                                {"key": "b", "task": "dag.step"}],
                      "edges": [{"from": "a", "to": "b"}]}, actor="test")
        job, _ = await submit_job(conn, store(clock), clock, tenant_id=tenant, request=JobRequest(
            name="every-minute-dag", task=task_for(dag.id),
            schedule=ScheduleSpec(every="1m", start_at=T0)),
            pools=("default",), max_payload_bytes=1024, actor="test")
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=300)

    async def advance() -> None:
        async with pool.acquire() as conn:
            while await dag_runs.advance_due(conn, store(clock), now=clock.now(), batch_size=10,
                                             actor="scheduler", rules=dag_runs.Rules()):
                pass

    async def finish(kind: str) -> None:
        assert await dispatch(pool, clock) == 1
        [claimed] = await attempts.claim(tenant, p.ClaimRequest(worker_id="w", max_runs=1))
        clock.advance(1)
        error = p.ErrorInfo(type="Boom", message="b", retryable=False) if kind == "fail" else None
        [r] = await attempts.record(tenant, "w", [Outcome(
            uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, kind,
            output={"ok": True}, error=error)])
        assert r.status == 200
        await advance()

    for k in range(3):
        clock.set(T0 + timedelta(minutes=k))
        assert await fire_due(pool, store(clock), clock) == []  # a DAG run, no plain run
        if k == 2:
            continue  # the third DAG run never starts
        clock.advance(2 * (k + 1))  # its roots start 2 s, then 4 s after its due time
        await advance()
        if k == 0:
            await finish("complete")  # a
            await finish("complete")  # b: the DAG run succeeded
            succeeded_at = clock.now()
        else:
            await finish("fail")  # a fails for good: b is upstream_failed, the DAG run failed
    clock.set(T0 + timedelta(minutes=3))

    await three_slots_health(client, job.id, key, succeeded_at)
