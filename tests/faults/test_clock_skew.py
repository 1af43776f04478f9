"""Schedulers whose host clock is five minutes ahead and five minutes behind (libfaketime, real
processes), beside a correct one, while one-off jobs and per-second jobs fall due: what is due
is judged by the database's clock, so nothing is created before its due time by that clock, no
slot is recorded as a misfire skip (or left undone: the one behind would not fire for five
minutes), and every event's `occurred_at` is before its
`recorded_at` and close to it. (The skewed processes say how far off they are, so the fault is
known to have been in place.)"""

from __future__ import annotations

import asyncio
import glob
import json
from datetime import timedelta

import asyncpg
import pytest

from ostinato.bus.topics import Topics
from ostinato.clock import SystemClock
from ostinato.eventlog.store import EventStore
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.schedules import ScheduleSpec
from ostinato.tenancy import create_tenant
from tests.helpers.lab.cluster import Cluster
from tests.helpers.lab.processes import scheduler_owner
from tests.helpers.schedulers import coverage, db_now, every_job_past
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
SKEW = timedelta(minutes=5)


def faketime(offset: str) -> dict[str, str]:
    """The environment that runs a process with its wall clock moved by `offset`."""
    found = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    if not found:
        pytest.fail("libfaketime is missing: `make test` installs it (infra/tools.sh)")
    return {"LD_PRELOAD": found[0], "FAKETIME": offset}


async def test_schedulers_with_skewed_clocks_fire_nothing_early_and_skip_nothing(
        cluster: tuple[Cluster, asyncpg.Pool]) -> None:
    c, pool = cluster
    now = await db_now(pool)
    start = now.replace(microsecond=0) + timedelta(seconds=15)
    store = EventStore(SystemClock(), Topics())
    async with pool.acquire() as conn:
        tenant, _ = await create_tenant(conn, store, "skew", actor="test")
        one_offs = [start + timedelta(seconds=i) for i in range(12)]
        for i, due in enumerate(one_offs):
            await submit_job(conn, store, SystemClock(), tenant_id=tenant,
                             request=JobRequest(name=f"once-{i}", schedule=ScheduleSpec(at=due)),
                             pools=("default",), max_payload_bytes=1024, actor="test")
        ticking = []
        for i in range(12):  # the default misfire policy: lateness past 60 s skips slots
            row, _ = await submit_job(
                conn, store, SystemClock(), tenant_id=tenant, request=JobRequest(
                    name=f"tick-{i}", schedule=ScheduleSpec(every="1s", start_at=start)),
                pools=("default",), max_payload_bytes=1024, actor="test")
            ticking.append(row)

    await asyncio.to_thread(c.start, ("scheduler",))
    await asyncio.to_thread(c.spawn, "scheduler-ahead", "scheduler", faketime("+300s"))
    await asyncio.to_thread(c.spawn, "scheduler-behind", "scheduler", faketime("-300s"))
    last_due = one_offs[-1] + timedelta(seconds=4)
    await until(lambda: every_job_past(pool, last_due), 120,
                "every job past the last one-off's due time")
    async with pool.acquire() as conn:
        owners = {r["owner"] for r in await conn.fetch("SELECT owner FROM shard_leases")}
    await asyncio.to_thread(c.stop)

    # the fault was in place: the skewed processes saw their clocks off by five minutes, and
    # held shards (so they decided some of the jobs)
    for alias, sign in (("scheduler-ahead", 1), ("scheduler-behind", -1)):
        skews = [r["skew_seconds"] for r in _records(c, alias) if "skew_seconds" in r]
        assert skews and sign * skews[0] > SKEW.total_seconds() / 2, alias  # ahead / behind
    assert {scheduler_owner(c, a) for a in ("scheduler-ahead", "scheduler-behind")} <= owners

    async with pool.acquire() as conn:
        early = await conn.fetch(
            "SELECT stream_id, data->>'scheduled_for' AS due, recorded_at FROM events "
            "WHERE type = 'RunScheduled' AND recorded_at < (data->>'scheduled_for')::timestamptz")
        skips = await conn.fetchval("SELECT count(*) FROM events WHERE type = 'OccurrencesSkipped'")
        times = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE occurred_at > recorded_at) AS after, "
            "max(recorded_at - occurred_at) AS widest, count(*) AS n FROM events")
        once = await conn.fetchval(
            "SELECT count(*) FROM runs WHERE trigger = 'schedule' AND job_id IN "
            "(SELECT id FROM jobs WHERE name LIKE 'once-%')")
    assert [dict(r) for r in early] == [], "runs created before their due time"
    assert skips == 0, "a slot recorded as a misfire skip although none was late"
    assert times["after"] == 0, "an event occurred after it was recorded"
    assert times["widest"] < SKEW / 2, "an event's time follows a skewed host clock"
    assert once == len(one_offs)
    for job in ticking:
        expected, runs, skipped = await coverage(pool, job.id, start)
        assert skipped == [] and runs == expected, f"job {job.id}: slots missing or skipped"


def _records(c: Cluster, alias: str) -> list[dict[str, object]]:
    found = []
    for line in (c.log_dir / f"{alias}.log").read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append(record)
    return found
