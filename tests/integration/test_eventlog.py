"""The run-event log against the real PostgreSQL: append-only, optimistic concurrency, and read
models equal to a rebuild from the log."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import msgspec
import pytest

from ostinato import dispatch_controls as controls
from ostinato.db.queries import REGISTRY, all_queries, sql_files_under
from ostinato.domain import events as ev
from ostinato.domain.errors import VersionConflict
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import read_stream
from tests.helpers.integration import drive_one_run, new_job, new_tenant, store
from tests.helpers.run_stories import scheduled

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("statement", [
    "UPDATE events SET actor = 'mallory'",
    "DELETE FROM events",
    "TRUNCATE events",
])
async def test_log_refuses_update_delete_truncate(pool: asyncpg.Pool, statement: str) -> None:
    tenant_id, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        before = await read_stream(conn, tenant_id, tenant_id)
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await conn.execute(statement)
        assert await read_stream(conn, tenant_id, tenant_id) == before


async def test_concurrent_appends_at_the_same_version_one_wins(pool: asyncpg.Pool) -> None:
    tenant_id, _ = await new_tenant(pool)
    job = await new_job(pool, tenant_id)
    gate = asyncio.Barrier(2)

    async def delete_at_version(actor: str) -> str:
        async with pool.acquire() as conn, conn.transaction():
            await gate.wait()  # both have read version 1; both now append version 2
            await store().append(conn, [NewEvent(job.id, job.version + 1, tenant_id,
                                                 ev.JobDeleted(reason=actor), actor)])
            return actor

    results = await asyncio.gather(delete_at_version("a"), delete_at_version("b"),
                                   return_exceptions=True)
    winners = [r for r in results if isinstance(r, str)]
    losers = [r for r in results if isinstance(r, BaseException)]
    assert len(winners) == 1 and len(losers) == 1
    assert isinstance(losers[0], VersionConflict)
    async with pool.acquire() as conn:
        stream = await read_stream(conn, job.id, tenant_id)
    assert [r.version for r in stream] == [1, 2]
    assert stream[1].event == ev.JobDeleted(reason=winners[0])


async def test_rebuilt_read_models_equal_the_live_ones(pool: asyncpg.Pool) -> None:
    for _ in range(2):
        tenant_id, _ = await new_tenant(pool)
        for i in range(3):
            await new_job(pool, tenant_id, name=f"job-{i}", payload={"i": i},
                          at=datetime.now(UTC) + timedelta(days=i + 1))
    await drive_one_run(pool, succeed=True)
    await drive_one_run(pool, succeed=False, stale_write=True)
    async with pool.acquire() as conn:
        await controls.set_limit(conn, store(), tenant_id=tenant_id, actor="t", limit=ev.LimitSet(
            scope="tenant", name="", max_concurrency=3, rate_per_second=2.0, weight=2.5))
        await controls.set_limit(conn, store(), tenant_id=tenant_id, actor="t", limit=ev.LimitSet(
            scope="resource", name="crm", rate_per_second=1.0, burst=4.0))
        for paused in (True, False, True):
            await controls.set_paused(conn, store(), pool="default", tenant_id=None,
                                      paused=paused, reason="r", actor="admin")
        await controls.set_paused(conn, store(), pool="long", tenant_id=tenant_id, paused=True,
                                  reason=None, actor="t")
        live = await snapshot(conn)
        assert live["runs"] and live["jobs"] and live["tenants"] and live["api_keys"]
        assert len(live["limits"]) == 2 and len(live["pool_controls"]) == 2
        folded = await rebuild(conn)
        rebuilt = await snapshot(conn)
    assert folded > 0
    assert rebuilt == live


async def test_a_jobs_streak_of_failures_is_the_same_rebuilt(pool: asyncpg.Pool) -> None:
    """Runs of one job (a DAG's node runs) whose dead letter and success interleave: the
    success after the dead letter ends the streak live, and must on a rebuild too, though the
    dead letter is its run's 5th event and the success its run's 4th."""
    tenant_id, _ = await new_tenant(pool)
    job = await new_job(pool, tenant_id, at=datetime.now(UTC) + timedelta(days=1))
    later = datetime.now(UTC) + timedelta(minutes=5)

    def attempt() -> list[ev.Event]:
        return [msgspec.structs.replace(scheduled(job.id), trigger="dag"),
                ev.RunQueued(pool="default"),
                ev.RunStarted(attempt=1, fencing_token=1, worker_id="w", lease_expires_at=later)]

    failing = [*attempt(), ev.RunFailed(attempt=1, fencing_token=1, error_type="boom",
                                        message="m", retryable=False),
               ev.RunDeadLettered(reason="permanent", error_type="boom", message="m",
                                  attempts=1)]
    succeeding = [*attempt(), ev.RunSucceeded(attempt=1, fencing_token=1, output_ref=None)]
    dead, ok = StreamHead(uuid.uuid4(), tenant_id), StreamHead(uuid.uuid4(), tenant_id)
    async with pool.acquire() as conn:
        for head, events in ((dead, failing), (ok, succeeding)):  # one commit per event
            for e in events:
                async with conn.transaction():
                    await store().append(conn, [head.next(e, "test")])
        streak = "SELECT consecutive_failures FROM jobs WHERE id = $1"
        assert await conn.fetchval(streak, job.id) == 0
        live = await snapshot(conn)
        await rebuild(conn)
        assert await conn.fetchval(streak, job.id) == 0
        assert await snapshot(conn) == live


async def test_every_named_query_prepares_against_the_schema(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        queries = all_queries([*REGISTRY, *sql_files_under(ROOT, "services")])
        assert any(name.startswith("services.dispatcher/") for name in queries)
        for name, sql in queries.items():
            try:
                await conn.prepare(sql)
            except asyncpg.PostgresError as exc:  # pragma: no cover — the failure message
                pytest.fail(f"{name}: {exc}")


async def test_streams_are_tenant_scoped(pool: asyncpg.Pool) -> None:
    a, _ = await new_tenant(pool)
    b, _ = await new_tenant(pool)
    job = await new_job(pool, a)
    async with pool.acquire() as conn:
        assert [r.type for r in await read_stream(conn, job.id, a)] == ["JobCreated"]
        assert await read_stream(conn, job.id, b) == []
        assert await read_stream(conn, uuid.uuid4(), a) == []
