"""A DAG run's retention (issue 38 items 1 and 2, docs/RETENTION.md "DAG runs", migration 0052):
on the real PostgreSQL and the real S3 server, the archiver archives and removes the node runs
of a finished one-off DAG job once their retention has passed, then the DAG run itself: its
`dag_runs` row, its nodes, its stream and the one-off `dag:` job, after its object is confirmed
in the store; it reads back through GET /v1/dag-runs/{id} marked archived (another tenant's: a
404). A DAG run still going on keeps everything (`dag_run_not_final`, `not_final`), one not yet
expired or with a held node run stays, and two archivers, or two removals, remove it once. The
SQL rules and the pure ones (`dag_run_removable`) agree on random cases."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from ostinato import jobs
from ostinato.archive import dag_run_key, decode_dag_run, decode_run, run_key
from ostinato.client import AsyncClient, Client
from ostinato.clock import FakeClock, SystemClock
from ostinato.dags.targets import task_for
from ostinato.db.pool import create_pool
from ostinato.domain.retention import DagRunFacts, RetentionPolicy, dag_run_removable
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.jobs.request import JobRequest
from ostinato.objects import ObjectStore
from ostinato.runs import dags as dag_runs
from ostinato.runs import retention as retention_commands
from ostinato.schedules import ScheduleSpec
from ostinato.wire import worker as p
from services.reconciler.checks.archive import ArchiveConfig, Archiver
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.api import auth
from tests.helpers.archives import api, served
from tests.helpers.cli import cli
from tests.helpers.dags import node
from tests.helpers.env import app_url_for
from tests.helpers.expired_runs import days_ago
from tests.helpers.integration import dispatch, login, new_tenant, store
from tests.helpers.privileges import APP_ROLE, database

pytestmark = pytest.mark.integration


@pytest.fixture
async def app_pool(db_url: str) -> AsyncIterator[asyncpg.Pool]:
    p_ = await create_pool(app_url_for(database(db_url)), max_size=4)
    yield p_
    await p_.close()


async def two_node_dag(pool: asyncpg.Pool, clock: FakeClock, tenant_id: uuid.UUID,
                       schedule: ScheduleSpec | None = None) -> uuid.UUID:
    """A two-node DAG (extract → load) and a job running it (one-off without `schedule`);
    the job's id."""
    async with pool.acquire() as conn:
        dag, _ = await dag_runs.define(
            conn, store(clock), tenant_id=tenant_id, name=f"etl-{uuid.uuid4().hex[:8]}",
            document={"nodes": [node("extract"), node("load")],
                      "edges": [{"from": "extract", "to": "load"}]},
            rules=dag_runs.Rules(), actor="test")
        job, _ = await jobs.submit_job(
            conn, store(clock), clock, tenant_id=tenant_id,
            request=JobRequest(name="etl", task=task_for(dag.id), schedule=schedule),
            pools=("default",), max_payload_bytes=1024, actor="test")
    assert job.kind == ("at" if schedule is None else "every")
    return job.id


async def run_nodes(pool: asyncpg.Pool, clock: FakeClock, tenant_id: uuid.UUID,
                    nodes_run: int) -> list[uuid.UUID]:
    """The fired DAG run's first `nodes_run` nodes run to success, a second apart (2: the DAG
    run succeeded); their run ids."""
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
    return ran


async def one_off_dag(pool: asyncpg.Pool, tenant_id: uuid.UUID, *, ended: datetime,
                      nodes_run: int) -> tuple[uuid.UUID, list[uuid.UUID]]:
    """A one-off job (no schedule) of a two-node DAG, fired, its first `nodes_run` nodes run
    and succeeded at about `ended` (2: the DAG run succeeded); (job id, node run ids)."""
    clock = FakeClock(ended - timedelta(minutes=1))
    job_id = await two_node_dag(pool, clock, tenant_id)
    assert await fire_due(pool, store(clock), clock) == []  # a DAG run, no plain run
    return job_id, await run_nodes(pool, clock, tenant_id, nodes_run)


async def kept(pool: asyncpg.Pool, run_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[str]]:
    """Each run still hot with the reasons the rules keep it (ostinato_run_kept)."""
    return {r["id"]: list(r["kept"]) for r in await pool.fetch(
        "SELECT id, ostinato_run_kept(id, now(), interval '24 hours') AS kept FROM runs"
        " WHERE id = ANY($1)", run_ids)}


async def dag_kept(pool: asyncpg.Pool, dag_run_id: uuid.UUID) -> list[str] | None:
    """The reasons the rules keep the DAG run (ostinato_dag_run_kept); None: not hot."""
    found = await pool.fetchval("SELECT ostinato_dag_run_kept($1, now(), interval '24 hours')",
                                dag_run_id)
    return None if found is None else list(found)


async def dag_run_of(pool: asyncpg.Pool, job_id: uuid.UUID) -> uuid.UUID:
    return await pool.fetchval("SELECT id FROM dag_runs WHERE job_id = $1", job_id)


async def rows_left(pool: asyncpg.Pool, job_id: uuid.UUID, dag_run_id: uuid.UUID,
                    node_runs: list[uuid.UUID]) -> dict[str, int]:
    """What a one-off DAG job left in the hot tables, table by table."""
    counts = {}
    for name, sql, arg in (
        ("jobs", "SELECT count(*) FROM jobs WHERE id = $1", job_id),
        ("job events", "SELECT count(*) FROM events WHERE stream_id = $1", job_id),
        ("dag_runs", "SELECT count(*) FROM dag_runs WHERE id = $1", dag_run_id),
        ("dag_run_nodes", "SELECT count(*) FROM dag_run_nodes WHERE dag_run_id = $1",
         dag_run_id),
        ("dag_run events", "SELECT count(*) FROM events WHERE stream_id = $1", dag_run_id),
        ("runs", "SELECT count(*) FROM runs WHERE id = ANY($1)", node_runs),
        ("run events", "SELECT count(*) FROM events WHERE stream_id = ANY($1)", node_runs),
    ):
        counts[name] = await pool.fetchval(sql, arg)
    return counts


GONE = {"jobs": 0, "job events": 0, "dag_runs": 0, "dag_run_nodes": 0, "dag_run events": 0,
        "runs": 0, "run events": 0}


def archiver(app_pool: asyncpg.Pool, object_store: ObjectStore) -> Archiver:
    return Archiver(app_pool, object_store, SystemClock(), ArchiveConfig(batch=50))


async def test_a_finished_one_off_dag_leaves_whole_and_an_unfinished_one_stays(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, object_store: ObjectStore) -> None:
    """Flipped by migration 0052: the finished DAG run, its nodes, its stream and its one-off
    job left with its node runs (they stayed for ever before: 12 rows for two nodes)."""
    tenant_id, _ = await new_tenant(pool)
    done_job, done = await one_off_dag(pool, tenant_id, ended=days_ago(40), nodes_run=2)
    going_job, going = await one_off_dag(pool, tenant_id, ended=days_ago(40), nodes_run=1)
    done_dag, going_dag = await dag_run_of(pool, done_job), await dag_run_of(pool, going_job)
    assert await pool.fetchval("SELECT state FROM dag_runs WHERE id = $1",
                               done_dag) == "succeeded"
    assert await pool.fetchval("SELECT status FROM jobs WHERE id = $1", done_job) == "completed"
    before = await kept(pool, [*done, *going])
    assert before == {**{r: [] for r in done}, going[0]: ["dag_run_not_final"]}
    assert await dag_kept(pool, done_dag) == ["node_run_in_hot_tables"]
    assert await dag_kept(pool, going_dag) == ["not_final", "node_run_in_hot_tables"]
    left_before = await rows_left(pool, done_job, done_dag, done)
    assert left_before == {"jobs": 1, "job events": 2, "dag_runs": 1, "dag_run_nodes": 2,
                           "dag_run events": 6, "runs": 2, "run events": 8}
    going_before = await rows_left(pool, going_job, going_dag, going)

    assert await archiver(app_pool, object_store).tick() == 3  # 2 node runs, 1 DAG run
    assert await rows_left(pool, done_job, done_dag, done) == GONE
    assert await rows_left(pool, going_job, going_dag, going) == going_before
    still = await kept(pool, [*done, *going])
    assert still == {going[0]: ["dag_run_not_final"]}
    for run_id in done:
        key = run_key(tenant_id, run_id)
        assert decode_run(await object_store.get(key), key=key).run_id == run_id
    key = dag_run_key(tenant_id, done_dag)
    doc = decode_dag_run(await object_store.get(key), key=key)
    assert doc.dag_run["state"] == "succeeded" and str(doc.dag_run["job_id"]) == str(done_job)
    assert sorted(n["key"] for n in doc.nodes) == ["extract", "load"]
    types = [e.type for e in doc.events]
    assert types[0] == "DagRunStarted" and types[-1] == "DagRunFinished" and len(types) == 6
    assert doc.job is not None and str(doc.job["id"]) == str(done_job)
    assert len(doc.job_events) == 2
    # the definition stays with its DAG
    assert await pool.fetchval("SELECT count(*) FROM dag_versions WHERE dag_id = $1",
                               doc.dag_run["dag_id"]) == 1
    assert not await object_store.exists(dag_run_key(tenant_id, going_dag))
    assert await archiver(app_pool, object_store).tick() == 0  # nothing more to do

    # a rebuild of the projections from the hot log gives the live rows (issue 38 item 6)
    async with pool.acquire() as conn:
        old_minutes = "DELETE FROM start_lag_minutes WHERE minute < now() - interval '2 days'"
        await conn.execute(old_minutes)
        live = await snapshot(conn)
        assert await rebuild(conn) > 0
        await conn.execute(old_minutes)
        assert await snapshot(conn) == live
    assert [r["id"] for r in live["dag_runs"]] == [going_dag]


async def test_an_archived_dag_run_reads_back_marked_archived_and_only_for_its_tenant(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, db_url: str, object_store: ObjectStore,
        tmp_path: Path) -> None:
    tenant_id, key = await new_tenant(pool)
    _, other_key = await new_tenant(pool)
    job_id, node_runs = await one_off_dag(pool, tenant_id, ended=days_ago(40), nodes_run=2)
    dag_run_id = await dag_run_of(pool, job_id)
    async with api(pool, db_url, object_store) as client:
        hot = (await client.get(f"/v1/dag-runs/{dag_run_id}", headers=auth(key))).json()
        hot_events = (await client.get(f"/v1/dag-runs/{dag_run_id}/events",
                                       headers=auth(key))).json()
        assert hot["archived"] is False and hot_events["archived"] is False
        assert await archiver(app_pool, object_store).tick() == 3
        assert await dag_run_of(pool, job_id) is None

        r = await client.get(f"/v1/dag-runs/{dag_run_id}", headers=auth(key))
        assert r.status_code == 200, r.text
        cold = r.json()
        assert cold["archived"] is True and cold["archived_at"]
        # the same view, its nodes' runs read from their own archive objects
        assert {k: v for k, v in cold.items() if k not in ("archived", "archived_at")} == \
            {k: v for k, v in hot.items() if k not in ("archived", "archived_at")}
        assert [n["run_state"] for n in cold["nodes"]] == ["succeeded", "succeeded"]
        assert {n["run_id"] for n in cold["nodes"]} == {str(r_) for r_ in node_runs}

        events = (await client.get(f"/v1/dag-runs/{dag_run_id}/events",
                                   headers=auth(key))).json()
        assert events["archived"] is True and events["items"] == hot_events["items"]
        page = (await client.get(f"/v1/dag-runs/{dag_run_id}/events",
                                 params={"after": 2, "limit": 2}, headers=auth(key))).json()
        assert [e["version"] for e in page["items"]] == [3, 4] and page["next_after"] == 4

        for path in (f"/v1/dag-runs/{dag_run_id}", f"/v1/dag-runs/{dag_run_id}/events"):
            assert (await client.get(path, headers=auth(other_key))).status_code == 404
        assert (await client.get(f"/v1/dag-runs/{uuid.uuid4()}",
                                 headers=auth(key))).status_code == 404
        cancel = await client.post(f"/v1/dag-runs/{dag_run_id}/cancel", headers=auth(key),
                                   json={})
        assert cancel.status_code == 409 and "archived" in cancel.json()["detail"], cancel.text
        retry = await client.post(f"/v1/dag-runs/{dag_run_id}/nodes/load/retry",
                                  headers=auth(key), json={})
        assert retry.status_code == 409, retry.text
        other = await client.post(f"/v1/dag-runs/{dag_run_id}/cancel",
                                  headers=auth(other_key), json={})
        assert other.status_code == 404

    # the UI's DAG run page: under the archived banner, its nodes, no action; 404 elsewhere
    async with api(pool, db_url, object_store) as client:
        await login(client, key)
        page = await client.get(f"/ui/dag-runs/{dag_run_id}")
        assert page.status_code == 200, page.text
        assert 'class="archived-banner" role="status">archived' in page.text
        assert "extract" in page.text and "load" in page.text and str(node_runs[0]) in page.text
        assert f'action="/ui/dag-runs/{dag_run_id}/' not in page.text  # no form acts on it
    async with api(pool, db_url, object_store) as other_ui:
        await login(other_ui, other_key)
        assert (await other_ui.get(f"/ui/dag-runs/{dag_run_id}")).status_code == 404

    # the client and the CLI say so too (docs/RETENTION.md's worked example)
    async with served(pool, db_url, object_store) as url:
        env = {"OSTINATO_API_URL": url, "OSTINATO_API_KEY": key}
        code, out, err = await cli(tmp_path, "dag-runs", "get", str(dag_run_id), "-o", "json",
                                   env=env)
        assert code == 0, err
        got = json.loads(out)
        assert got["archived"] is True and got["state"] == "succeeded" and got["archived_at"]
        code, out, err = await cli(tmp_path, "dag-runs", "get", str(dag_run_id), env=env)
        assert code == 0 and out.splitlines()[0].startswith("archived "), (out, err)
        async with AsyncClient(url, key) as aio:
            assert (await aio.dag_runs.get(dag_run_id)).archived is True

        def sync_side() -> None:
            with Client(url, key) as sync:
                assert sync.dag_runs.get(dag_run_id).archived is True

        await asyncio.to_thread(sync_side)


async def test_a_dag_run_inside_its_retention_or_with_a_held_node_run_stays(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, object_store: ObjectStore) -> None:
    tenant_id, _ = await new_tenant(pool)
    young_job, young = await one_off_dag(pool, tenant_id, ended=days_ago(10), nodes_run=2)
    held_job, held = await one_off_dag(pool, tenant_id, ended=days_ago(40), nodes_run=2)
    young_dag, held_dag = await dag_run_of(pool, young_job), await dag_run_of(pool, held_job)
    async with pool.acquire() as conn:
        await retention_commands.hold_run(conn, store(), tenant_id=tenant_id, run_id=held[1],
                                          actor="op", reason="legal hold, ticket 4711")
    young_before = await rows_left(pool, young_job, young_dag, young)

    assert await archiver(app_pool, object_store).tick() == 1  # the held DAG's free node run
    assert await rows_left(pool, young_job, young_dag, young) == young_before
    assert await kept(pool, held) == {held[1]: ["held"]}
    assert await dag_kept(pool, held_dag) == ["node_run_in_hot_tables"]
    assert (await rows_left(pool, held_job, held_dag, held))["dag_runs"] == 1
    assert not await object_store.exists(dag_run_key(tenant_id, held_dag))
    assert await pool.fetchval("SELECT count(*) FROM dag_run_nodes WHERE dag_run_id = $1",
                               young_dag) == 2

    async with pool.acquire() as conn:
        await retention_commands.release_run(conn, store(), tenant_id=tenant_id,
                                             run_id=held[1], actor="op")
    assert await archiver(app_pool, object_store).tick() == 2  # the node run, then its DAG run
    assert await rows_left(pool, held_job, held_dag, held) == GONE
    assert await rows_left(pool, young_job, young_dag, young) == young_before
    assert await dag_kept(pool, young_dag) == ["node_run_in_hot_tables", "inside_retention"]


async def test_two_archivers_or_two_removals_remove_a_dag_run_once(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, object_store: ObjectStore) -> None:
    tenant_id, _ = await new_tenant(pool)
    job_id, node_runs = await one_off_dag(pool, tenant_id, ended=days_ago(40), nodes_run=2)
    dag_run_id = await dag_run_of(pool, job_id)
    other_job, other_nodes = await one_off_dag(pool, tenant_id, ended=days_ago(40),
                                               nodes_run=2)
    other_dag = await dag_run_of(pool, other_job)
    nodes = [*node_runs, *other_nodes]
    versions = [await pool.fetchval("SELECT max(version) FROM events WHERE stream_id = $1", r)
                for r in nodes]
    removed = await app_pool.fetch("SELECT * FROM ostinato_remove_runs($1::uuid[], $2::int[])",
                                   nodes, versions)  # the node runs first (no archive needed)
    assert all(r["removed"] for r in removed)
    version = await pool.fetchval("SELECT max(version) FROM events WHERE stream_id = $1",
                                  dag_run_id)
    call = "SELECT * FROM ostinato_remove_dag_runs($1::uuid[], $2::int[])"

    async with app_pool.acquire() as first, app_pool.acquire() as second:
        tx = first.transaction()
        await tx.start()
        [mine] = await first.fetch(call, [dag_run_id], [version])
        assert mine["removed"] is True
        [theirs] = await second.fetch(call, [dag_run_id], [version])
        assert (theirs["removed"], theirs["kept_because"]) == (False, "busy")
        await tx.commit()
        [late] = await second.fetch(call, [dag_run_id], [version])
        assert (late["removed"], late["kept_because"]) == (False, "not_found")
        [moved] = await second.fetch(call, [other_dag], [version - 1])
        assert (moved["removed"], moved["kept_because"]) == (False, "changed")
    assert await rows_left(pool, job_id, dag_run_id, node_runs) == GONE

    # two archivers at once: the advisory lock lets one pass do it, the other finds it gone
    handled = await asyncio.gather(archiver(app_pool, object_store).tick(),
                                   archiver(app_pool, object_store).tick())
    assert sorted(handled) == [0, 1]
    assert await rows_left(pool, other_job, other_dag, other_nodes) == GONE
    key = dag_run_key(tenant_id, other_dag)
    assert decode_dag_run(await object_store.get(key), key=key).dag_run_id == other_dag


async def test_a_recurring_dag_jobs_runs_leave_but_its_latest_success_and_its_ledger_stays(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool, object_store: ObjectStore) -> None:
    """A DAG job's occurrence is its DAG run: the latest success stays (staleness reads it),
    the older ones leave and their slots are carried into the ledger's history as a run's."""
    tenant_id, _ = await new_tenant(pool)
    first_slot = days_ago(40).replace(second=0, microsecond=0)
    clock = FakeClock(first_slot)
    job_id = await two_node_dag(pool, clock, tenant_id,
                                ScheduleSpec(every="1m", start_at=first_slot))
    node_runs: list[uuid.UUID] = []
    for k in range(3):
        clock.set(first_slot + timedelta(minutes=k, seconds=1))
        assert await fire_due(pool, store(clock), clock) == []
        node_runs += await run_nodes(pool, clock, tenant_id, 2)
    dags_ = [r["id"] for r in await pool.fetch(
        "SELECT id FROM dag_runs WHERE job_id = $1 ORDER BY scheduled_for", job_id)]
    assert len(dags_) == 3

    assert await archiver(app_pool, object_store).tick() == 6 + 2
    assert [r["id"] for r in await pool.fetch(
        "SELECT id FROM dag_runs WHERE job_id = $1", job_id)] == [dags_[2]]
    assert await dag_kept(pool, dags_[2]) == ["latest_success_of_job"]
    assert await pool.fetchval("SELECT count(*) FROM runs WHERE id = ANY($1)", node_runs) == 0
    assert [dict(r) for r in await pool.fetch(
        "SELECT first_slot, last_slot, state, runs FROM ledger_carried WHERE job_id = $1",
        job_id)] == [{"first_slot": first_slot, "last_slot": first_slot + timedelta(minutes=1),
                      "state": "succeeded", "runs": 2}]
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE id = $1", job_id) == 1
    for dag_run_id in dags_[:2]:
        key = dag_run_key(tenant_id, dag_run_id)
        assert decode_dag_run(await object_store.get(key), key=key).job is None  # it stays


async def test_the_services_role_cannot_remove_a_dag_runs_stream_any_other_way(
        pool: asyncpg.Pool, app_pool: asyncpg.Pool) -> None:
    """The log stays append-only for the services: the procedure is their one door (owner's,
    SECURITY DEFINER, its search_path pinned), and its helper for a one-off job's rows is not
    theirs to call."""
    grants = {r["proname"]: (r["definer"], r["config"], set(r["grantees"]))
              for r in await pool.fetch(
        "SELECT p.proname, p.prosecdef AS definer, p.proconfig AS config,"
        " array_agg(coalesce(pg_get_userbyid(a.grantee), 'PUBLIC')) AS grantees"
        " FROM pg_proc p, aclexplode(p.proacl) AS a"
        " WHERE p.proname IN ('ostinato_remove_dag_runs', 'ostinato_remove_one_off_jobs')"
        "   AND a.privilege_type = 'EXECUTE' GROUP BY 1, 2, 3")}
    owner = await pool.fetchval("SELECT pg_get_userbyid(proowner) FROM pg_proc"
                                " WHERE proname = 'ostinato_remove_dag_runs'")
    assert grants["ostinato_remove_dag_runs"] == (True, ["search_path=public, pg_temp"],
                                                  {APP_ROLE, owner})
    assert grants["ostinato_remove_one_off_jobs"][2] == {owner}
    for statement in ("DELETE FROM events WHERE stream_type = 'dag_run'",
                      "SELECT ostinato_remove_one_off_jobs('{}'::uuid[])"):
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await app_pool.execute(statement)


# -- the rules: SQL and Python agree -------------------------------------------------------------

DAG_STATES = ("pending", "running", "succeeded", "failed", "cancelled")


def _cases(n: int, seed: int = 52) -> list[tuple[DagRunFacts, RetentionPolicy, datetime,
                                                 timedelta]]:
    rng = random.Random(seed)
    now = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    cases = []
    for _ in range(n):
        keep = rng.choice((3600, 86400, 30 * 86400))
        window = rng.choice((timedelta(0), timedelta(hours=1), timedelta(hours=24)))

        def near(base: timedelta) -> datetime:
            return now - base + rng.choice((timedelta(0), timedelta(microseconds=1),
                                            -timedelta(microseconds=1), timedelta(hours=3),
                                            -timedelta(days=2)))

        facts = DagRunFacts(
            state=rng.choice(DAG_STATES),
            ended_at=near(timedelta(seconds=keep)) if rng.random() < 0.9 else None,
            node_runs_hot=rng.random() < 0.3,
            checked_slot=near(window) if rng.random() < 0.4 else None,
            deadline=near(window) if rng.random() < 0.3 else None,
            latest_success_of_job=rng.random() < 0.15)
        cases.append((facts, RetentionPolicy(keep_seconds=keep), now, window))
    return cases


async def test_the_sql_rules_and_the_pure_rules_agree(pool: asyncpg.Pool) -> None:
    cases = _cases(2000)
    rows = await pool.fetch(
        "SELECT ostinato_dag_run_retention_kept(s, e, h, c, d, l, k, n, w) AS kept"
        " FROM unnest($1::text[], $2::timestamptz[], $3::bool[], $4::timestamptz[],"
        " $5::timestamptz[], $6::bool[], $7::bigint[], $8::timestamptz[], $9::interval[])"
        " WITH ORDINALITY AS x(s, e, h, c, d, l, k, n, w, i) ORDER BY i",
        [f.state for f, *_ in cases], [f.ended_at for f, *_ in cases],
        [f.node_runs_hot for f, *_ in cases], [f.checked_slot for f, *_ in cases],
        [f.deadline for f, *_ in cases], [f.latest_success_of_job for f, *_ in cases],
        [p_.keep_seconds for _, p_, *_ in cases], [now for *_, now, _ in cases],
        [w for *_, w in cases])
    for (facts, policy, now, window), row in zip(cases, rows, strict=True):
        expected = [k.value for k in dag_run_removable(facts, policy, now,
                                                       checks_window=window).kept]
        assert list(row["kept"]) == expected, facts
