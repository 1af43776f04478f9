"""Several scheduler processes, some killed with kill -9 and restarted while occurrences fall
due, and one frozen with SIGSTOP: every occurrence gets exactly one run or a recorded skip, and
the reconciler notices and repairs what a frozen scheduler leaves undone.

"Exactly one" is counted in the run-event log (RunScheduled events per occurrence): the `runs`
table's unique (job_id, scheduled_for) would hide a duplicate. Waits are on what the log and
the jobs table show (a slot fired after a restart, a missed occurrence recorded); the fixed
sleeps are the scenario's own (slots falling due while an instance is down)."""

from __future__ import annotations

import asyncio
import signal
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from ostinato.bus.topics import Topics
from ostinato.clock import SystemClock
from ostinato.eventlog.store import EventStore, read_stream
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.schedules import ScheduleSpec
from ostinato.tenancy import create_tenant
from tests.helpers.lab.cluster import Cluster
from tests.helpers.lab.invariants import occurrences_scheduled_twice
from tests.helpers.schedulers import coverage, db_now, every_job_past
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


async def every_second_jobs(pool: asyncpg.Pool, count: int, start: datetime,
                            **schedule: object) -> tuple[object, list]:
    store = EventStore(SystemClock(), Topics())
    async with pool.acquire() as conn:
        tenant, _ = await create_tenant(conn, store, "faults", actor="test")
        jobs = []
        for i in range(count):
            row, _ = await submit_job(
                conn, store, SystemClock(), tenant_id=tenant, request=JobRequest(
                    name=f"tick-{i}", schedule=ScheduleSpec(every="1s", start_at=start,
                                                            **schedule)),
                pools=("default",), max_payload_bytes=1024, actor="test")
            jobs.append(row)
    return tenant, jobs


async def test_schedulers_killed_and_restarted_give_each_occurrence_exactly_one_run(
        cluster: tuple[Cluster, asyncpg.Pool]) -> None:
    c, pool = cluster
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    _, jobs = await every_second_jobs(pool, 120, start, misfire="catch_up", catch_up_max=1000)
    await asyncio.to_thread(c.start, ("scheduler",))
    await asyncio.to_thread(c.spawn, "scheduler-b", "scheduler")
    await asyncio.to_thread(c.spawn, "scheduler-c", "scheduler")
    await asyncio.sleep((start - datetime.now(UTC)).total_seconds() + 3)
    killed_b = await db_now(pool)
    c.kill("scheduler-b")  # kill -9 while slots keep falling due
    await asyncio.sleep(2)
    await asyncio.to_thread(c.spawn, "scheduler-b", "scheduler")
    c.kill("scheduler")
    await asyncio.sleep(3)
    await asyncio.to_thread(c.spawn, "scheduler", "scheduler")
    restarted = await db_now(pool)
    # The killed instances' shards were taken over and each job fired a slot due after the
    # last restart: the faults lie inside the stretch of slots checked below.
    await until(lambda: every_job_past(pool, restarted + timedelta(seconds=1)), 60,
                "every job to fire a slot due after the last restart")
    await asyncio.to_thread(c.stop)  # nothing fires while the runs are counted

    total = 0
    for job in jobs:
        expected, runs, skips = await coverage(pool, job.id, start)
        assert skips == [], "catch_up with a high bound should skip nothing"
        assert runs == expected, f"job {job.id}: runs differ from the expected slots"
        assert runs[0] < killed_b and runs[-1] > restarted, "the faults fell outside the slots"
        total += len(runs)
    assert await occurrences_scheduled_twice(pool) == [], "an occurrence was scheduled twice"
    async with pool.acquire() as conn:
        assert await conn.fetchval(
            "SELECT count(*) FROM events WHERE type = 'RunScheduled'") == total
        actors = {r["actor"] for r in await conn.fetch(
            "SELECT DISTINCT actor FROM events WHERE type = 'RunScheduled'")}
        epochs = {r["epoch"] for r in await conn.fetch(
            "SELECT DISTINCT epoch FROM events WHERE type = 'RunScheduled'")}
    assert actors == {"scheduler"}
    assert None not in epochs and max(epochs) >= 2  # killed instances' shards changed hands


async def test_a_frozen_scheduler_is_noticed_and_its_work_repaired(
        cluster: tuple[Cluster, asyncpg.Pool]) -> None:
    c, pool = cluster
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    tenant, [job] = await every_second_jobs(pool, 1, start, misfire="run_once")
    await asyncio.to_thread(c.start, ("scheduler", "reconciler"))
    await asyncio.sleep((start - datetime.now(UTC)).total_seconds() + 1.5)
    c.kill("scheduler", signal.SIGSTOP)  # frozen: holds nothing, decides nothing

    async def missed() -> list:
        async with pool.acquire() as conn:
            stream = await read_stream(conn, job.id, tenant)
        return [r for r in stream if r.type == "OccurrenceMissed"]

    found = await until(missed, 30, "the reconciler to notice the frozen scheduler")
    assert found[0].actor == "reconciler" and found[0].event.repair == "scheduler"
    async with pool.acquire() as conn:
        repaired = await conn.fetchval(
            "SELECT count(*) FROM events WHERE type = 'RunScheduled' AND actor = 'reconciler'")
    assert repaired >= 1
    woken = await db_now(pool)
    c.kill("scheduler", signal.SIGCONT)

    async def fired_since_waking() -> bool:
        """The woken scheduler fired a slot of its own and moved the job past the moment it
        woke: it has been through the slots the reconciler repaired while it was frozen (a
        duplicate would have been made by now)."""
        return bool(await pool.fetchval(
            "SELECT EXISTS (SELECT 1 FROM events WHERE type = 'RunScheduled' "
            "               AND actor = 'scheduler' AND recorded_at > $1) "
            "   AND (SELECT next_slot > $1 FROM jobs WHERE id = $2)", woken, job.id))

    await until(fired_since_waking, 30, "the woken scheduler to fire again")
    assert await occurrences_scheduled_twice(pool) == [], "an occurrence was scheduled twice"
    expected, runs, skips = await coverage(pool, job.id, start)
    covered = set(runs) | {s for s in expected for a, b in skips if a <= s <= b}
    assert covered == set(expected)
    metrics = await asyncio.to_thread(
        httpx.get, f"http://127.0.0.1:{c.ports['reconciler']}/metrics")
    assert "ostinato_occurrences_missed_total" in metrics.text
    line = next(x for x in metrics.text.splitlines()
                if x.startswith("ostinato_occurrences_missed_total "))
    assert float(line.split()[1]) >= 1
