"""`ostinato.client` against the public API served over real HTTP (the `api_url` fixture, on
the real PostgreSQL): every resource's calls decode into the API's own models, lists follow
the cursors, and every failure is one `ApiError` carrying the RFC 9457 problem. The sync
client runs in a thread, since the API serves from this test's event loop."""

from __future__ import annotations

import asyncio
import socket
import uuid
from datetime import UTC, date, datetime
from itertools import islice

import asyncpg
import httpx
import pytest

from ostinato.client import ApiError, ApiUnreachable, AsyncClient, Client
from ostinato.schedules import ScheduleSpec
from ostinato.wire.api import JobRequest, JobView, LimitRequest, RunView
from tests.helpers.api import ADMIN
from tests.helpers.integration import dead_letters

pytestmark = pytest.mark.integration


async def new_key(api_url: str, name: str | None = None) -> str:
    async with AsyncClient(api_url, ADMIN) as admin:
        created = await admin.tenants.create(name or f"t-{uuid.uuid4().hex[:8]}")
    assert created.api_key.startswith("ost_")
    return created.api_key


async def test_a_job_through_its_life_with_the_async_client(api_url: str) -> None:
    key = await new_key(api_url)
    async with AsyncClient(api_url, key) as client:
        job = await client.jobs.create(
            name="nightly-report", payload={"report": "sales"},
            schedule={"cron": "30 2 * * *", "timezone": "Europe/Berlin"})
        assert isinstance(job, JobView) and job.status == "active"
        assert job.next_run_at is not None and job.schedule["timezone"] == "Europe/Berlin"
        assert (await client.jobs.get(job.id)).payload == {"report": "sales"}
        assert [j.id async for j in client.jobs.list()] == [job.id]

        upcoming = await client.jobs.upcoming(job.id, count=3)
        assert upcoming.timezone == "Europe/Berlin" and len(upcoming.items) == 3
        assert all(i.local.endswith(("+01:00", "+02:00")) for i in upcoming.items)

        assert (await client.jobs.pause(job.id, reason="maintenance")).status == "paused"
        assert (await client.jobs.get(job.id)).status == "paused"
        assert (await client.jobs.resume(job.id, misfire="skip")).status == "active"
        types = [e.type async for e in client.jobs.events(job.id)]
        assert types[0] == "JobCreated" and "JobPaused" in types and "JobResumed" in types

        triggered = await client.jobs.trigger(job.id)
        assert triggered.trigger == "manual"
        runs = [r async for r in client.runs.list(job_id=job.id)]
        assert [r.id for r in runs] == [triggered.run_id]
        run = await client.runs.get(triggered.run_id)
        assert isinstance(run, RunView) and run.payload == {"report": "sales"}
        assert run.links == {"events": f"/v1/runs/{run.id}/events",
                             "logs": f"/v1/runs/{run.id}/logs"}
        assert (await anext(client.runs.events(run.id))).type == "RunScheduled"
        assert (await client.runs.logs(run.id)).items == []
        assert [s async for s in client.runs.steps(run.id)] == []

        cancelled = await client.runs.cancel(run.id)
        assert (cancelled.state, cancelled.cancel) == ("cancelled", "done")
        rerun = await client.runs.retry(run.id, request_key="again")
        assert rerun.replay_of == run.id and rerun.created
        assert (await client.runs.retry(run.id, request_key="again")).run_id == rerun.run_id

        await client.jobs.delete(job.id)
        assert (await client.jobs.get(job.id)).status == "deleted"


async def test_lists_follow_the_cursor_lazily(api_url: str) -> None:
    key = await new_key(api_url)
    async with AsyncClient(api_url, key) as client:
        batch = await client.jobs.create_many(
            [JobRequest(name=f"job-{i}", schedule=ScheduleSpec(every="1h")) for i in range(5)])
        assert len(batch.items) == 5 and all(i.created for i in batch.items)
        listed = [j.id async for j in client.jobs.list(page_size=2)]  # three pages
        assert sorted(map(str, listed)) == sorted(str(i.id) for i in batch.items)
        assert len(set(listed)) == 5


async def test_every_failure_is_an_api_error_carrying_the_problem(api_url: str) -> None:
    key = await new_key(api_url)
    async with AsyncClient(api_url, key) as client:
        with pytest.raises(ApiError) as bad:
            await client.jobs.create(name="x", schedule={"cron": "61 * * * *"})
        assert bad.value.status == 422
        assert bad.value.type == "https://ostinato.dev/problems/invalid-input"
        assert bad.value.title and bad.value.detail
        assert "schedule.cron" in [e["field"] for e in bad.value.errors]
        assert [j async for j in client.jobs.list()] == []  # nothing was written

        with pytest.raises(ApiError) as missing:
            await client.runs.get(uuid.uuid4())
        assert (missing.value.status, missing.value.type) == (
            404, "https://ostinato.dev/problems/not-found")

    async with AsyncClient(api_url, "ost_not-a-key") as stranger:
        with pytest.raises(ApiError) as denied:
            await stranger.jobs.get(uuid.uuid4())
        assert denied.value.status == 401

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    async with AsyncClient(f"http://127.0.0.1:{closed}", key) as nowhere:
        with pytest.raises(ApiUnreachable) as unreachable:
            await nowhere.jobs.get(uuid.uuid4())
    assert isinstance(unreachable.value, ApiError) and unreachable.value.status == 0


async def test_the_sync_client_reads_its_url_and_key_from_the_environment(
        api_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    key = await new_key(api_url)
    monkeypatch.setenv("OSTINATO_API_URL", api_url)
    monkeypatch.setenv("OSTINATO_API_KEY", key)

    def work() -> tuple[JobView, list[JobView], list[str]]:
        with Client() as client:
            job = client.jobs.create({"name": "send-invoice", "payload": {"invoice": 7}},
                                     schedule={"at": "2030-12-01T09:00:00Z"})
            listed = list(islice(client.jobs.list(), 10))
            preview = client.schedules.preview(
                {"cron": "30 2 * * *", "timezone": "Europe/Berlin", "dst_gap": "skip"}, 3)
            return job, listed, [i.local for i in preview.items]

    job, listed, local = await asyncio.to_thread(work)
    assert job.next_run_at == datetime(2030, 12, 1, 9, tzinfo=UTC)
    assert [j.id for j in listed] == [job.id]
    assert len(local) == 3 and all("T02:30:00" in t for t in local)


async def test_dead_letters_and_capacity_decode_into_typed_answers(
        api_url: str, pool: asyncpg.Pool) -> None:
    key = await new_key(api_url)
    async with httpx.AsyncClient(base_url=api_url) as raw:
        ids = await dead_letters(raw, pool, key, ["bad_input", "bad_input", "rejected"])
    async with AsyncClient(api_url, key) as client:
        letters = [d async for d in client.dead_letters.list(page_size=2)]
        assert sorted(str(d.run_id) for d in letters) == sorted(ids)
        counts = await client.dead_letters.counts(error_type="bad_input")
        assert (counts.total, counts.by_error_type) == (2, {"bad_input": 2})
        one = await client.dead_letters.get(ids[0])
        assert one.history is not None and one.history[0].outcome == "RunFailed"
        assert (await client.dead_letters.triage(ids[0], "acknowledged",
                                                 comment="seen")).triage_state == "acknowledged"
        replayed = await client.dead_letters.replay(ids[0], payload={"n": 99},
                                                    request_key="fix-1")
        assert replayed.created and (await client.runs.get(replayed.run_id)).payload == {"n": 99}
        bulk = await client.dead_letters.replay_matching("bulk-1", error_type="rejected")
        assert (bulk.matched, bulk.replayed) == (1, 1)

        [default] = await client.pools.list()
        assert default.name == "default" and "default" in default.classes
        paused = await client.pools.pause("default", reason="drain")
        assert (paused.status, paused.scope, paused.changed) == (
            "paused", "this tenant's queue", True)
        assert (await client.pools.resume("default")).status == "active"
        assert await client.workers.list() == []
        # the two replays wait for a worker
        assert {(t.task, t.version, t.waiting) for t in await client.tasks.list()} == {
            ("j0", None, 1), ("j2", None, 1)}
        assert (await client.limits.set("task", "report", LimitRequest(max_concurrency=2))
                ).status == "set"
        [limit] = await client.limits.list()
        assert (limit.scope, limit.name, limit.max_concurrency) == ("task", "report", 2)

        day = date(2031, 1, 1)
        assert (await client.calendars.put("holidays", [day])).dates == [day]
        assert [c.name for c in await client.calendars.list()] == ["holidays"]


async def test_the_admin_lists_tenants_and_acts_for_one_with_tenant(api_url: str) -> None:
    async with AsyncClient(api_url, ADMIN) as admin:
        made = [await admin.tenants.create(f"t-{uuid.uuid4().hex[:8]}") for _ in range(3)]
        listed = [t async for t in admin.tenants.list(page_size=2)]  # two pages at least
        ours = [t for t in listed if t.id in {m.id for m in made}]
        assert [(t.id, t.name) for t in ours] == [(m.id, m.name) for m in reversed(made)]
        assert all(t.weight == 1 and t.created_at.tzinfo for t in ours)
        with pytest.raises(ApiError) as unnamed:  # a tenant route needs the tenant named
            await admin.jobs.create(name="x")
        assert unnamed.value.status == 403

    target = made[0]
    async with AsyncClient(api_url, ADMIN, tenant=target.id) as acting:
        job = await acting.jobs.create(name="for-a-tenant")
        events = [e async for e in acting.jobs.events(job.id)]
        audit = [a async for a in acting.audit.list(action="job.create")]
    assert [(e.type, e.actor) for e in events] == [("JobCreated", "admin")]
    assert [(a.target_id, a.tenant_id, a.outcome) for a in audit] == [
        (str(job.id), target.id, "done")]
    async with AsyncClient(api_url, target.api_key) as own, \
            AsyncClient(api_url, made[1].api_key) as other:
        assert [j.id async for j in own.jobs.list()] == [job.id]
        assert [j.id async for j in other.jobs.list()] == []
        with pytest.raises(ApiError) as denied:  # a tenant's key lists no tenants
            [t async for t in own.tenants.list()]
        assert denied.value.status == 403
    async with AsyncClient(api_url, ADMIN, tenant="not-a-uuid") as bad:
        with pytest.raises(ApiError) as invalid:
            await bad.jobs.create(name="y")
        assert invalid.value.status == 422


async def test_a_backfill_dry_run_decodes_its_slots_and_changes_nothing(api_url: str) -> None:
    key = await new_key(api_url)
    start, end = datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 27, tzinfo=UTC)
    async with AsyncClient(api_url, key) as client:
        job = await client.jobs.create(name="nightly", schedule={
            "cron": "30 2 * * *", "timezone": "Europe/Berlin"})  # falls back 2026-10-25
        plan = await client.jobs.backfill(job.id, start, end, dry_run=True)
        assert plan.dry_run and plan.timezone == "Europe/Berlin"
        assert [(s.slot, s.local, s.action) for s in plan.slots] == [
            (datetime(2026, 10, 25, 0, 30, tzinfo=UTC), "2026-10-25T02:30:00+02:00", "create"),
            (datetime(2026, 10, 26, 1, 30, tzinfo=UTC), "2026-10-26T02:30:00+01:00", "create")]
        assert [r async for r in client.runs.list(job_id=job.id)] == []
        done = await client.jobs.backfill(job.id, start, end)
        assert not done.dry_run and done.slots == plan.slots and done.runs_created == 2
        assert sorted([r.scheduled_for async for r in client.runs.list(job_id=job.id)]) == [
            s.slot for s in plan.slots]
