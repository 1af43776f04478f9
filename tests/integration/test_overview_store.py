"""The overview page's reads (ostinato.stores.overview) against the real PostgreSQL, runs made
through the event log as writers make them: live runs per pool and state and the oldest due,
runs ended per hour with dead letters and failures, start lag p50/p99 of the hour from the
histogram the RunStarted projection keeps (known lags), firing alerts; another tenant's runs
and alerts never counted; each read's plan uses the index that bounds it by the tenant."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

from ostinato.clock import FakeClock
from ostinato.domain import events as ev
from ostinato.eventlog.records import StreamHead
from ostinato.policy.overview import summarize
from ostinato.stores import alerts as alert_store
from ostinato.stores import overview
from tests.helpers.integration import new_tenant, store
from tests.helpers.run_stories import scheduled

pytestmark = pytest.mark.integration
NOW = datetime(2026, 3, 2, 14, 30, 20, tzinfo=UTC)
Step = Callable[[int], ev.Event]


def _scheduled(due: datetime, pool: str) -> ev.RunScheduled:
    return msgspec.structs.replace(scheduled(pool=pool), scheduled_for=due, due_at=due)


def _started(n: int) -> ev.RunStarted:
    return ev.RunStarted(attempt=n, fencing_token=n, worker_id="w",
                         lease_expires_at=NOW + timedelta(hours=1))


def _failed(n: int) -> ev.RunFailed:
    return ev.RunFailed(attempt=n, fencing_token=n, error_type="boom", message="m",
                        retryable=True)


async def runs(pool: asyncpg.Pool, tenant: uuid.UUID, n: int, steps: list[tuple[datetime, Step]],
               *, due: datetime, pool_name: str = "default") -> None:
    """`n` runs of `tenant` due at `due`, each step appended for all of them at its instant."""
    heads = [StreamHead(uuid.uuid4(), tenant) for _ in range(n)]
    plan: list[tuple[datetime, Step]] = [(due, lambda _: _scheduled(due, pool_name)), *steps]
    async with pool.acquire() as conn:
        for at, step in plan:
            async with conn.transaction():
                await store(FakeClock(at)).append(conn, [h.next(step(i), "test")
                                                         for i, h in enumerate(heads)])


def queued(pool_name: str = "default") -> Step:
    return lambda _: ev.RunQueued(pool=pool_name)


def succeed(_: int) -> ev.Event:
    return ev.RunSucceeded(attempt=1, fencing_token=1, output_ref=None)


async def world(pool: asyncpg.Pool, tenant: uuid.UUID, pool_name: str = "default") -> None:
    """A tenant's runs: 3 waiting (the oldest 90 s past due), 2 running, 4 succeeded this hour
    (one after a retry), 2 dead-lettered two hours ago, 1 cancelled."""
    ago = lambda **kw: NOW - timedelta(**kw)  # noqa: E731
    q = queued(pool_name)
    await runs(pool, tenant, 2, [], due=ago(seconds=90), pool_name=pool_name)
    await runs(pool, tenant, 1, [(ago(seconds=20), q)], due=ago(seconds=30),
               pool_name=pool_name)
    await runs(pool, tenant, 2, [(ago(seconds=5), q), (ago(seconds=5), lambda _: _started(1))],
               due=ago(seconds=10), pool_name=pool_name)
    await runs(pool, tenant, 3, [(ago(minutes=2), q), (ago(minutes=2), lambda _: _started(1)),
                                 (ago(minutes=1), succeed)],
               due=ago(minutes=3), pool_name=pool_name)
    await runs(pool, tenant, 1, [
        (ago(minutes=9), q), (ago(minutes=9), lambda _: _started(1)),
        (ago(minutes=8), lambda _: _failed(1)),
        (ago(minutes=8), lambda _: ev.RetryScheduled(retry_at=ago(minutes=7), reason="retryable",
                                                     counts=True, failures=1)),
        (ago(minutes=7), lambda _: ev.RetryDue(pool=pool_name)),
        (ago(minutes=7), q), (ago(minutes=7), lambda _: _started(2)),
        (ago(minutes=6), lambda _: ev.RunSucceeded(attempt=2, fencing_token=2, output_ref=None)),
    ], due=ago(minutes=10), pool_name=pool_name)
    await runs(pool, tenant, 2, [
        (ago(hours=2), q), (ago(hours=2), lambda _: _started(1)),
        (ago(hours=2), lambda _: ev.RunFailed(attempt=1, fencing_token=1, error_type="bad",
                                              message="m", retryable=False)),
        (ago(hours=2), lambda _: ev.RunDeadLettered(reason="permanent", error_type="bad",
                                                    message="m", attempts=1)),
    ], due=ago(hours=2), pool_name=pool_name)
    await runs(pool, tenant, 1, [(ago(minutes=30), lambda _: ev.RunCancelled(
        by="test", reason="requested"))], due=ago(minutes=31), pool_name=pool_name)


async def test_live_runs_ended_hours_and_isolation(pool: asyncpg.Pool) -> None:
    mine, _ = await new_tenant(pool)
    theirs, _ = await new_tenant(pool)
    await world(pool, mine)
    await world(pool, theirs)  # the same runs again, for another tenant: never counted
    await runs(pool, theirs, 5, [], due=NOW - timedelta(hours=5))  # older waiting runs, theirs
    async with pool.acquire() as conn:
        rows = await overview.read(conn, mine, NOW)
    o = summarize(["default"], rows.live, rows.ended, rows.lags, rows.alerts, now=NOW,
                  slo_seconds=60)
    [p] = o.pools
    assert p.states == {"scheduled": 2, "queued": 1, "running": 2, "suspended": 0,
                        "retry_scheduled": 0, "failed": 0}
    assert p.oldest_due_seconds == 90.0  # theirs, 5 h past due, not counted
    assert sum(p.ended_by_hour) == 7 and p.ended_by_hour[-1] == 5  # 4 succeeded, 1 cancelled
    assert p.dead_letters_by_hour[-3] == 2 and p.dead_letters == 2
    assert p.failed_by_hour[-1] == 1 and p.failed == 3  # the retried run and the dead letters


async def test_start_lag_of_the_hour_from_known_runs(pool: asyncpg.Pool) -> None:
    mine, _ = await new_tenant(pool)
    theirs, _ = await new_tenant(pool)
    start = NOW - timedelta(minutes=4)
    # 97 first attempts 1 s late, 2 at 30 s, 1 at 600 s (buckets far apart: exact figures)
    for n, lag in ((97, 1.0), (2, 30.0), (1, 600.0)):
        await runs(pool, mine, n, [(start, queued()), (start, lambda _: _started(1))],
                   due=start - timedelta(seconds=lag))
    # theirs: all very late, in the same pool and minute
    await runs(pool, theirs, 50, [(start, queued()), (start, lambda _: _started(1))],
               due=start - timedelta(seconds=3000))
    # a retry's start (attempt 2) is not a first start: not counted
    async with pool.acquire() as conn:
        rows = await overview.read(conn, mine, NOW)
    o = summarize(["default"], rows.live, rows.ended, rows.lags, rows.alerts, now=NOW,
                  slo_seconds=60)
    [p] = o.pools
    assert p.lag_starts == 100
    assert p.lag_p50 == pytest.approx(1.0)
    assert p.lag_p99 == pytest.approx(30.0)  # rank 99 of 100
    assert p.lag_p99_by_minute[-5] == pytest.approx(30.0)
    assert p.breach_minutes == 0  # 30 s < the 60 s SLO
    o = summarize(["default"], rows.live, rows.ended, rows.lags, rows.alerts, now=NOW,
                  slo_seconds=10)
    assert o.pools[0].breach_minutes == 1


async def test_firing_alerts_of_the_tenant_only(pool: asyncpg.Pool) -> None:
    mine, _ = await new_tenant(pool)
    theirs, _ = await new_tenant(pool)

    async def fire(tenant: uuid.UUID, key: str, labels: dict[str, Any], at: datetime) -> None:
        async with pool.acquire() as conn:
            await alert_store.fire(conn, tenant, key, labels["alertname"], f"g-{key}", None,
                                   labels, {"summary": f"about {key}"}, at)

    await fire(mine, "lag-default", {"alertname": "OstinatoLagSLOBreach", "pool": "default",
                                     "severity": "warning"}, NOW - timedelta(minutes=3))
    await fire(mine, "dl", {"alertname": "OstinatoDeadLetter", "severity": "critical"},
               NOW - timedelta(hours=30))
    await fire(theirs, "theirs", {"alertname": "OstinatoDeadLetter", "severity": "critical"},
               NOW - timedelta(minutes=1))
    async with pool.acquire() as conn:
        rows = await overview.read(conn, mine, NOW)
    o = summarize(["default"], rows.live, rows.ended, rows.lags, rows.alerts, now=NOW,
                  slo_seconds=60)
    assert [(a.alert_key, a.pool, a.severity, a.summary) for a in o.firing] == [
        ("lag-default", "default", "warning", "about lag-default"),
        ("dl", None, "critical", "about dl")]
    assert [a.alert_key for a in o.pools[0].firing] == ["lag-default"]
    assert [a.alert_key for a in o.tenant_firing] == ["dl"]
    assert sum(o.alerts_by_hour) == 1  # the day's episodes: the one started 30 h ago is not


@pytest.mark.parametrize(("name", "index"), [
    ("overview_live_runs", "runs_task_versions"),
    ("overview_ended_hours", "runs_ended"),
])
async def test_the_reads_of_runs_are_bounded_by_an_index(pool: asyncpg.Pool, name: str,
                                                         index: str) -> None:
    """The plan on a database with many runs of another tenant and a few of this one names the
    index that bounds the read by the tenant, and no sequential scan of runs. (The histogram
    and the alert states are small tables, read by their primary keys' ranges.)"""
    mine, _ = await new_tenant(pool)
    theirs, _ = await new_tenant(pool)
    await world(pool, mine)
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref,"
            " scheduled_for, state, attempt, fencing_token, updated_at, version, trigger,"
            " finished_at, failures, started_at)"
            " SELECT gen_random_uuid(), $1, gen_random_uuid(), 't', 'default', 'default',"
            " gen_random_uuid(), at, 'succeeded', 1, 1, $2, 3, 'schedule', at, 0, at"
            " FROM (SELECT $2::timestamptz - make_interval(secs => i * 120) AS at"
            "       FROM generate_series(1, 20000) i) s", theirs, NOW)  # over 28 days
        # and this tenant's runs of earlier days: the day's range, not the tenant, bounds it
        await conn.execute(
            "INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref,"
            " scheduled_for, state, attempt, fencing_token, updated_at, version, trigger,"
            " finished_at, failures, started_at)"
            " SELECT gen_random_uuid(), $1, gen_random_uuid(), 't', 'default', 'default',"
            " gen_random_uuid(), at, 'succeeded', 1, 1, at, 3, 'schedule', at, 0, at"
            " FROM (SELECT $2::timestamptz - interval '3 days' - make_interval(secs => i) AS at"
            "       FROM generate_series(1, 5000) i) s", mine, NOW)
        await conn.execute("ANALYZE runs")
        args: dict[str, tuple[Any, ...]] = {
            "overview_live_runs": (mine,),
            "overview_ended_hours": (mine, NOW - timedelta(hours=23)),
        }
        plan = await conn.fetch("EXPLAIN " + overview.Q[name], *args[name])
    text = "\n".join(r[0] for r in plan)
    assert index in text, text
    assert "Seq Scan" not in text, text
