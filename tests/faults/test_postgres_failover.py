"""The primary PostgreSQL killed with -9 under load, on the HA profile's topology: a
pg_auto_failover monitor, a primary and a synchronous standby (infra/postgres/ha-up.sh, on this
test's own ports and data folder, stopped after). The five services, two workers and the
steady stream of submissions all use the multi-host URL (target_session_attrs=read-write).

What must hold: the manager promotes the standby; every job whose creation was acknowledged
exists afterwards under the id the client was given, and no job exists that the client was not
given (a submission whose answer the kill cut, "in doubt", is resolved by sending it again with
its idempotency key: the same id comes back, or the job is created once then; never a guess);
no request got a 500; every run ends once, each effect applied once (the common end check,
tests.helpers.lab.invariants.verify); the occurrences of jobs recurring every second across
the outage are neither missed nor scheduled twice (`coverage`)."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ostinato.db.migrate import migrate
from tests.helpers.env import KAFKA_BOOTSTRAP
from tests.helpers.lab.cluster import Cluster
from tests.helpers.lab.database import Db
from tests.helpers.lab.invariants import coverage, verify, wait_settled
from tests.helpers.lab.lab import FAULT_ENV, Lab
from tests.helpers.lab.load import Load, fx_job
from tests.helpers.lab.pg_ha import PRIMARY_STATES, HaPostgres
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(420)]


@pytest.fixture
async def ha(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HaPostgres]:
    base = Path(f"/tmp/ostinato-pg-ha-{uuid.uuid4().hex[:8]}")  # the postgres user must reach it
    pg = HaPostgres.on_free_ports(base)
    try:
        await asyncio.to_thread(pg.up)
    except RuntimeError as exc:
        await asyncio.to_thread(pg.down)
        if shutil.which("pg_autoctl") is None:
            pytest.skip("pg_auto_failover (Debian postgresql-15-auto-failover, "
                        f"pg-auto-failover-cli) cannot be installed here: {exc}")
        raise
    try:
        yield pg
    finally:
        await asyncio.to_thread(pg.down)


async def test_a_killed_primary_fails_over_to_its_synchronous_standby_under_load(
        ha: HaPostgres, topic_prefix: str, tmp_path: Path) -> None:
    await migrate(ha.url("ostinato_owner"))
    cluster = Cluster(database_url=ha.url("ostinato_app"), kafka_bootstrap=KAFKA_BOOTSTRAP,
                      topic_prefix=topic_prefix, log_dir=tmp_path / "logs",
                      extra_env=dict(FAULT_ENV))
    lab = Lab(cluster=cluster, db=Db(ha.url("ostinato")), effects_url=ha.url("ostinato_owner"))
    try:
        # the outage (about 11 s here) must not be taken for missed occurrences: the scheduler
        # catches up after it, and that is what is checked
        await lab.start(env={"OSTINATO_MISSED_GRACE_SECONDS": "120"})
        for name in ("w1", "w2"):
            await lab.worker(name, concurrency=16)
        nodes = await ha.nodes()
        [primary] = [n for n in nodes.values() if n.reported == "primary"]
        [standby] = [n for n in nodes.values() if n.reported == "secondary"]
        # synchronous: a commit is acknowledged once the standby has it
        assert await lab.db.fetchval(
            "SELECT sync_state FROM pg_stat_replication") in ("sync", "quorum")
        assert await lab.db.fetchval("SHOW synchronous_standby_names") != ""

        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        schedule = {"every": "1s", "start_at": start.isoformat(), "misfire": "catch_up",
                    "catch_up_max": 1000}
        recurring = await lab.submit([fx_job(f"tick-{i}", schedule=schedule) for i in range(4)])
        load = Load(cluster.api_url, lab.api_key, rate=60, batch=6).start()
        try:
            await until(lambda: _at_least(load, 60), 120, "60 jobs accepted before the kill")
            acknowledged_before = dict(load.accepted)
            await asyncio.to_thread(ha.kill, primary.name)
            kill_wall = datetime.now(UTC)  # the servers share this host's clock

            async def promoted() -> bool:
                now = await ha.nodes()
                return now[standby.name].reported in PRIMARY_STATES

            await until(promoted, 180, f"the monitor to promote {standby.name}", every=0.2)
            after_promotion = len(load.accepted)
            await until(lambda: _at_least(load, after_promotion + 60), 120,
                        "60 more jobs accepted after the promotion")
        finally:
            await load.stop()
        # the scheduler fires again on the new primary before the jobs are deleted (the kill
        # may come before their first slot, and the deletion right after the promotion)
        await until(lambda: _fired_after(lab, recurring, kill_wall), 180,
                    "every recurring job to have an occurrence after the kill")
        async with lab.client() as client:  # no new occurrences: the runs made can all finish
            for job_id in recurring:
                assert (await client.delete(f"/v1/jobs/{job_id}")).status_code in (200, 204)

        nodes = await ha.nodes()
        assert nodes[standby.name].reported in PRIMARY_STATES
        assert nodes[primary.name].reported not in PRIMARY_STATES or \
            nodes[primary.name].goal not in PRIMARY_STATES
        assert load.abandoned == [], f"{len(load.abandoned)} jobs were never accepted"
        assert load.failed_requests > 0, "no client saw the failover: was there one?"
        assert "HTTP 500" not in load.errors, load.errors  # 503 or a cut connection, no guess

        # every acknowledged job exists, under the id given; nothing else was created
        stored = {r["idempotency_key"]: str(r["id"]) for r in await lab.db.fetch(
            "SELECT idempotency_key, id FROM jobs WHERE idempotency_key LIKE $1",
            f"{load.prefix}%")}
        assert acknowledged_before.items() <= stored.items()
        assert stored == load.accepted
        assert load.resolved_in_doubt.items() <= stored.items()

        missing, open_runs = await wait_settled(lab.db, load.job_ids + recurring, 120)
        verdict = await verify(lab.db, load.job_ids + recurring)
        assert (missing, open_runs) == (0, 0), (verdict.problems(), await lab.db.fetch(
            "SELECT id, next_slot, status, shard FROM jobs WHERE id = ANY($1::uuid[])",
            [uuid.UUID(j) for j in recurring]), await lab.db.fetch("SELECT * FROM shard_leases"))
        assert verdict.problems() == []
        slots, unaccounted, duplicated, skipped = await coverage(lab.db, recurring, start)
        assert (unaccounted, duplicated, skipped) == (0, 0, 0)
        last_slot = await lab.db.fetchval(
            "SELECT max(scheduled_for) FROM runs WHERE job_id = ANY($1::uuid[])",
            [uuid.UUID(j) for j in recurring])
        assert last_slot > kill_wall, "the occurrences checked do not span the failover"
        assert verdict.succeeded == verdict.runs == len(load.job_ids) + slots == verdict.effects
        print(f"failover: {primary.name} killed, {standby.name} promoted; "
              f"{len(load.accepted)} jobs, {load.failed_requests} failed requests "
              f"{dict(load.errors)}, {len(load.resolved_in_doubt)} in doubt resolved by key, "
              f"{slots} occurrences")
    finally:
        await lab.close()


async def _at_least(load: Load, count: int) -> bool:
    return len(load.accepted) >= count


async def _fired_after(lab: Lab, job_ids: list[str], instant: datetime) -> bool:
    return await lab.db.fetchval(
        "SELECT count(DISTINCT job_id) = cardinality($1::uuid[]) FROM runs "
        "WHERE job_id = ANY($1::uuid[]) AND scheduled_for > $2",
        [uuid.UUID(j) for j in job_ids], instant)
