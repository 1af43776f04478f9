"""A one-off DAG job's runs and retention (issue 38 items 1 and 2, docs/RETENTION.md): on the real
PostgreSQL and the real S3 server, the archiver archives and removes the node runs of a finished
one-off DAG job once their retention has passed, while the node runs of a DAG run still going
on stay hot (`dag_run_not_final`), whatever their own age. (What stays of the finished one: its
one-off job, its DAG run, nodes and their streams: a DAG run is not archived yet.)"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import asyncpg
import pytest

from ostinato import jobs
from ostinato.archive import decode_run, run_key
from ostinato.clock import FakeClock, SystemClock
from ostinato.dags.targets import task_for
from ostinato.db.pool import create_pool
from ostinato.jobs.request import JobRequest
from ostinato.objects import ObjectStore
from ostinato.runs import dags as dag_runs
from ostinato.wire import worker as p
from services.reconciler.checks.archive import ArchiveConfig, Archiver
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.dags import node
from tests.helpers.env import app_url_for
from tests.helpers.expired_runs import days_ago
from tests.helpers.integration import dispatch, new_tenant, store
from tests.helpers.privileges import database

pytestmark = pytest.mark.integration


@pytest.fixture
async def app_pool(db_url: str) -> AsyncIterator[asyncpg.Pool]:
    p_ = await create_pool(app_url_for(database(db_url)), max_size=4)
    yield p_
    await p_.close()


async def one_off_dag(pool: asyncpg.Pool, tenant_id: uuid.UUID, *, ended: datetime,
                      nodes_run: int) -> tuple[uuid.UUID, list[uuid.UUID]]:
    """A one-off job (no schedule) of a two-node DAG (extract → load), fired, its first
    `nodes_run` nodes run and succeeded at about `ended` (2: the DAG run succeeded); (job id,
    node run ids)."""
    clock = FakeClock(ended - timedelta(minutes=1))
    async with pool.acquire() as conn:
        dag, _ = await dag_runs.define(
            conn, store(clock), tenant_id=tenant_id, name=f"etl-{uuid.uuid4().hex[:8]}",
            document={"nodes": [node("extract"), node("load")],
                      "edges": [{"from": "extract", "to": "load"}]},
            rules=dag_runs.Rules(), actor="test")
        job, _ = await jobs.submit_job(
            conn, store(clock), clock, tenant_id=tenant_id,
            request=JobRequest(name="etl-once", task=task_for(dag.id)),
            pools=("default",), max_payload_bytes=1024, actor="test")
    assert job.kind == "at"
    assert await fire_due(pool, store(clock), clock) == []  # a DAG run, no plain run
    attempts = Attempts(pool, store(clock), clock, lease_ttl_seconds=30)

    async def advance() -> None:
        async with pool.acquire() as conn:
            await dag_runs.advance_due(conn, store(clock), now=clock.now(), batch_size=100,
                                       actor="scheduler", rules=dag_runs.Rules())

    ran: list[uuid.UUID] = []
    for _ in range(nodes_run):
        clock.advance(1)
        await advance()
        clock.advance(1)
        assert await dispatch(pool, clock) == 1
        [claimed] = await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w1", max_runs=5))
        clock.advance(1)
        [result] = await attempts.record(tenant_id, "w1", [Outcome(
            uuid.UUID(claimed.run_id), claimed.run_id, claimed.fencing_token, "complete",
            output={"ok": True})])
        assert result.status == 200
        ran.append(uuid.UUID(claimed.run_id))
    clock.advance(1)
    await advance()
    return job.id, ran


async def kept(pool: asyncpg.Pool, run_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[str]]:
    """Each run still hot with the reasons the rules keep it (ostinato_run_kept)."""
    return {r["id"]: list(r["kept"]) for r in await pool.fetch(
        "SELECT id, ostinato_run_kept(id, now(), interval '24 hours') AS kept FROM runs"
        " WHERE id = ANY($1)", run_ids)}


async def test_a_finished_one_off_dag_s_runs_are_archived_and_an_unfinished_one_s_kept(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, object_store: ObjectStore) -> None:
    tenant_id, _ = await new_tenant(pool)
    done_job, done = await one_off_dag(pool, tenant_id, ended=days_ago(40), nodes_run=2)
    _, going = await one_off_dag(pool, tenant_id, ended=days_ago(40), nodes_run=1)
    assert await pool.fetchval("SELECT state FROM dag_runs WHERE job_id = $1",
                               done_job) == "succeeded"
    before = await kept(pool, [*done, *going])
    assert before == {**{r: [] for r in done}, going[0]: ["dag_run_not_final"]}

    archiver = Archiver(app_pool, object_store, SystemClock(), ArchiveConfig(batch=50))
    await archiver.tick()
    still = await kept(pool, [*done, *going])
    assert set(still) == set(going)  # the finished DAG's node runs left, the other's stayed
    assert still[going[0]] == ["dag_run_not_final"]
    for run_id in done:
        key = run_key(tenant_id, run_id)
        assert decode_run(await object_store.get(key), key=key).run_id == run_id
