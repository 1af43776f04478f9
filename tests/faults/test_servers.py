"""Services and servers under faults while jobs keep coming: a scheduler frozen past its shard
lease, PostgreSQL and the Kafka broker restarted, the dispatcher and the worker-gateway killed
with -9 and restarted. Each test ends with the common check (tests.helpers.lab.invariants.verify):
every accepted job ran, no effect was applied twice, every run is final, every run's story is
consistent. (Schedulers killed with -9: tests/faults/test_schedulers.py.)

The PostgreSQL and Kafka tests stop the shared servers (infra/<server>/down.sh) and start them
again; the fixture starts them in any case when a test ends. Sleeps here are the scenario's
(load before and after a fault, an outage's length); what a check waits for is observed in the
database (shard leases, RunScheduled events under an epoch)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.helpers.lab.injection import freeze
from tests.helpers.lab.invariants import coverage, shard_epoch_order, verify, wait_settled
from tests.helpers.lab.lab import Lab
from tests.helpers.lab.load import Load, fx_job
from tests.helpers.lab.metrics import metric_total, scrape
from tests.helpers.lab.processes import respawn, scheduler_owner
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(150)]
SHARD_TTL = 3.0  # OSTINATO_SHARD_LEASE_TTL_SECONDS in FAULT_ENV


async def shard_owners(lab: Lab) -> dict[int, tuple[str | None, int]]:
    return {r["shard"]: (r["owner"], r["epoch"]) for r in await lab.db.fetch(
        "SELECT shard, owner, epoch FROM shard_leases WHERE expires_at > now()")}


async def written_under(lab: Lab, epochs: dict[int, int]) -> bool:
    """Some RunScheduled event was written under one of these (shard, epoch) leases."""
    return bool(epochs) and bool(await lab.db.fetchval(
        "SELECT EXISTS (SELECT 1 FROM events e JOIN jobs j ON j.id = (e.data->>'job_id')::uuid "
        "WHERE e.type = 'RunScheduled' AND (j.shard, e.epoch) IN "
        "      (SELECT * FROM unnest($1::int[], $2::bigint[])))",
        list(epochs), list(epochs.values())))


async def all_ready(lab: Lab, seconds: float = 20) -> None:
    """Every service process is alive and answers /readyz with 200 and `"status": "ready"`
    (PostgreSQL and Kafka reachable from it: Kafka down is a 200 "degraded") within
    `seconds`."""
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=3) as client:
        for alias, proc in lab.cluster.procs.items():
            assert proc.poll() is None, f"{alias} exited: {lab.cluster.tail(alias)}"
            while True:
                try:
                    r = await client.get(f"http://127.0.0.1:{lab.cluster.ports[alias]}/readyz")
                    if r.status_code == 200 and r.json()["status"] == "ready":
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, f"{alias} not ready again: " \
                    f"{lab.cluster.tail(alias)}"
                await asyncio.sleep(0.2)


async def settle_and_verify(lab: Lab, load: Load, seconds: float = 45) -> None:
    assert load.abandoned == [], f"{len(load.abandoned)} jobs were never accepted"
    assert len(load.job_ids) > 0
    missing, open_runs = await wait_settled(lab.db, load.job_ids, seconds)
    verdict = await verify(lab.db, load.job_ids)
    assert (missing, open_runs) == (0, 0), verdict.problems()
    assert verdict.problems() == []
    assert verdict.succeeded == verdict.runs == len(load.job_ids) == verdict.effects


async def test_paused_scheduler_writes_nothing_under_a_lost_shard_lease(lab: Lab) -> None:
    await lab.start()
    await asyncio.to_thread(lab.cluster.spawn, "scheduler-b", "scheduler")
    a, b = (scheduler_owner(lab.cluster, alias) for alias in ("scheduler", "scheduler-b"))
    for name in ("w1", "w2"):
        await lab.worker(name, claim_wait_seconds=1)
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    schedule = {"every": "1s", "start_at": start.isoformat(), "misfire": "catch_up",
                "catch_up_max": 1000}
    job_ids = await lab.submit([fx_job(f"tick-{i}", schedule=schedule) for i in range(32)])

    async def balanced() -> bool:
        owners = [o for o, _ in (await shard_owners(lab)).values()]
        return owners.count(a) == owners.count(b) == 8

    await until(balanced, 15, "the two schedulers to share the 16 shards")
    await asyncio.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()) + 2)
    before = {s: e for s, (o, e) in (await shard_owners(lab)).items() if o == a}
    pid = lab.cluster.procs["scheduler"].pid
    await freeze(lab.db, pid)  # frozen between two transactions, holding 8 shard leases
    frozen_at = await lab.db.now()
    try:
        async def taken_over() -> dict[int, int]:
            now = await shard_owners(lab)
            taken = {s: now[s][1] for s in before
                     if now.get(s, (None, 0))[0] == b and now[s][1] > before[s]}
            return taken if len(taken) == len(before) else {}

        took = await until(taken_over, 60, "b to take over a's shards")
        # a stays frozen until b has written under the new epochs of a's shards: whatever a
        # still writes under its old ones when it wakes would then go backwards in the log.
        await until(lambda: written_under(lab, took), 30,
                    "b to fire a's jobs under the new epochs")
    finally:
        os.kill(pid, signal.SIGCONT)  # a wakes up believing it holds its 8 shards
    woke_at = await lab.db.now()
    await until(balanced, 30, "a to rejoin with new leases")
    rejoined = {s: e for s, (o, e) in (await shard_owners(lab)).items() if o == a}
    await until(lambda: written_under(lab, rejoined), 30,
                "a to fire its jobs under its new leases")
    async with lab.client() as client:
        for job_id in job_ids:  # no new occurrences: the runs made so far can all finish
            assert (await client.delete(f"/v1/jobs/{job_id}")).status_code in (200, 204)

    missing, open_runs = await wait_settled(lab.db, job_ids, 30)
    verdict = await verify(lab.db, job_ids)
    assert (missing, open_runs) == (0, 0) and verdict.problems() == [], verdict.problems()
    expected, unaccounted, duplicated, skipped = await coverage(lab.db, job_ids, start)
    first_slot, last_slot = (await lab.db.fetch(
        "SELECT min(scheduled_for), max(scheduled_for) FROM runs"))[0]
    assert first_slot < frozen_at and last_slot > woke_at, \
        f"the slots checked ({first_slot} to {last_slot}) do not span the freeze"
    assert (unaccounted, duplicated, skipped) == (0, 0, 0)
    assert verdict.runs == expected == verdict.effects
    checked, backwards = await shard_epoch_order(lab.db)
    assert checked == expected and backwards == {}, \
        f"RunScheduled written under an older epoch than one already used: {backwards}"
    log = lab.cluster.log_dir.joinpath("scheduler.log").read_text()
    assert "shard lease lost" in log or "write refused" in log, "a never noticed it lost leases"
    after = await shard_owners(lab)
    assert all(epoch > before.get(s, 0) for s, (_, epoch) in after.items() if s in before)
    await all_ready(lab)


async def _under_load(lab: Lab, fault: object, *, rate: float = 100) -> Load:
    """Steady load around `fault()`: 3 s before, the fault, 3 s after; then wait for every
    accepted job."""
    await lab.start()
    for name in ("w1", "w2"):
        await lab.worker(name, concurrency=32)
    load = Load(lab.cluster.api_url, lab.api_key, rate=rate, batch=10).start()
    try:
        await asyncio.sleep(3)
        await fault()  # type: ignore[operator]
        await asyncio.sleep(3)
    finally:
        await load.stop()
    return load


@pytest.mark.restarts_servers
async def test_postgres_restart_under_load(lab: Lab) -> None:
    """The scheduler and the reconciler are frozen *between* transactions while the server
    restarts (the next test shows what a transaction open at that moment does to them); the
    api, dispatcher, gateway and workers take the restart as it comes."""
    started = await lab.db.fetchval("SELECT pg_postmaster_start_time()")

    async def restart() -> None:
        frozen = []
        try:
            for alias in ("scheduler", "reconciler"):
                pid = lab.cluster.procs[alias].pid
                await freeze(lab.db, pid)
                frozen.append(pid)
            await lab.server_down("postgres")
            await asyncio.sleep(1)
            await lab.server_up("postgres")
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)

    load = await _under_load(lab, restart)
    await all_ready(lab, 30)
    await settle_and_verify(lab, load)
    # The outage was one, shown by its cause: the server the services use now is another start
    # of it (infra/postgres/down.sh stops only the server of the checkout it belongs to: run
    # from another worktree it stops nothing, and this fails). The requests that met the
    # outage are reported.
    assert await lab.db.fetchval("SELECT pg_postmaster_start_time()") > started
    print(f"requests failed during the restart: {load.failed_requests} {dict(load.errors)}")


@pytest.mark.restarts_servers
async def test_scheduler_with_an_open_transaction_survives_a_postgres_restart(lab: Lab) -> None:
    async def restart() -> None:
        pid = lab.cluster.procs["scheduler"].pid
        # A tick's transaction in flight, as under load: frozen right after it checked its
        # shard leases (FOR SHARE), so its next statement meets the closed connection.
        await freeze(lab.db, pid, in_transaction=True, last_query_like="%FOR SHARE OF l%")
        try:
            await lab.server_down("postgres")
            await asyncio.sleep(1)
            await lab.server_up("postgres")
        finally:
            os.kill(pid, signal.SIGCONT)

    load = await _under_load(lab, restart, rate=50)
    await all_ready(lab, 30)
    await settle_and_verify(lab, load)


@pytest.mark.restarts_servers
async def test_kafka_restart_under_load(lab: Lab) -> None:
    async def restart() -> None:
        await lab.server_down("kafka")
        await asyncio.sleep(1)
        await lab.server_up("kafka")

    load = await _under_load(lab, restart)
    await all_ready(lab, 30)
    await settle_and_verify(lab, load)


async def test_dispatcher_then_gateway_killed_under_load(lab: Lab) -> None:
    async def kill_and_restart() -> None:
        lab.cluster.kill("dispatcher")
        await asyncio.sleep(1)
        await asyncio.to_thread(lab.cluster.spawn, "dispatcher", "dispatcher")
        await asyncio.sleep(3)
        lab.cluster.kill("worker_gateway")
        await asyncio.sleep(1)
        # same port: the workers know the gateway by its URL
        await asyncio.to_thread(respawn, lab.cluster, "worker_gateway", "worker_gateway")

    load = await _under_load(lab, kill_and_restart)
    await all_ready(lab)
    await settle_and_verify(lab, load)
    dispatcher = await scrape(lab.cluster.ports["dispatcher"])
    assert metric_total(dispatcher, "ostinato_messages_consumed_total") > 0
