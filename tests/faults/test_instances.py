"""Instances join and leave under load (issue 39): one instance of each service takes a steady
load and a set of every-second recurring jobs; a second instance of each service joins (the api
and the worker-gateway behind a balancer that already names the second's port, as a Service
does); once each second instance has done its share (an api answer, shards held, a dispatch
decision, a claim, a reconciler check), the first instance of every service is killed with -9.
The load goes on against the survivors. Judged from the log: every accepted job ran once (one
run, one effect), every recurring slot from the start to the end has one run (none missed, none
twice), shard epochs never went backwards, and the survivors did the work after the kills."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers.env import (
    KAFKA_BOOTSTRAP,
    app_url_for,
    drop_database,
    fresh_database,
    owner_url_for,
    url_for,
)
from tests.helpers.lab.cluster import SERVICES, Cluster, instance_alias
from tests.helpers.lab.database import Db
from tests.helpers.lab.invariants import coverage, shard_epoch_order, verify, wait_settled
from tests.helpers.lab.lab import FAULT_ENV, Lab
from tests.helpers.lab.load import Load, create_tenant, fx_job
from tests.helpers.lab.metrics import metric_total, scrape
from tests.helpers.lab.processes import scheduler_owner
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(600)]
RECURRING = 16


@pytest.fixture
async def pair_lab(template_db: str, topic_prefix: str, tmp_path: Path) -> AsyncIterator[Lab]:
    """A lab whose cluster has room for two instances of each service (ports and balancers),
    of which the test starts the first ones."""
    name = await fresh_database(template_db)
    cluster = Cluster(database_url=app_url_for(name), kafka_bootstrap=KAFKA_BOOTSTRAP,
                      topic_prefix=topic_prefix, log_dir=tmp_path / "logs",
                      extra_env=dict(FAULT_ENV), instances=2)
    lab = Lab(cluster=cluster, db=Db(url_for(name)), effects_url=owner_url_for(name))
    try:
        yield lab
    finally:
        try:
            await lab.close()
        finally:
            await drop_database(name)


async def served_by(lab: Lab, alias: str, metric: str, **labels: str) -> bool:
    return metric_total(await scrape(lab.cluster.ports[alias]), metric, **labels) > 0


async def test_second_instances_join_under_load_and_the_first_ones_die(pair_lab: Lab) -> None:
    lab = pair_lab
    c = lab.cluster
    await asyncio.to_thread(c.start, SERVICES, up_to=1)
    assert set(c.procs) == set(SERVICES) and set(c.balancers) == {"api", "worker_gateway"}
    lab.api_key = await create_tenant(c.api_url, c.admin_key, "instances")
    for name in ("w1", "w2"):  # through the balancer: either gateway, whichever is alive
        await lab.worker(name, concurrency=32, claim_wait_seconds=1)
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    schedule = {"every": "1s", "start_at": start.isoformat(), "misfire": "catch_up",
                "catch_up_max": 1000}
    recurring = await lab.submit([fx_job(f"tick-{i}", schedule=schedule)
                                  for i in range(RECURRING)])
    load = Load(c.api_url, lab.api_key, rate=30, batch=5).start()
    joined: Load | None = None
    try:
        await asyncio.sleep(3)
        for service in SERVICES:  # the second instances join under load
            await asyncio.to_thread(c.spawn, instance_alias(service, 2), service)
        second = scheduler_owner(c, "scheduler-2")
        # Kept-alive connections stay where they were made (as behind any L4 balancer): a
        # client that connects a batch and a worker that connect after the join spread over
        # both instances (a kept-alive one could land on the first instance and stay there).
        joined = Load(c.api_url, lab.api_key, rate=30, batch=5, keep_alive=False).start()
        await lab.worker("w3", concurrency=32, claim_wait_seconds=1)

        async def second_holds_shards() -> bool:
            return bool(await lab.db.fetchval(
                "SELECT count(*) FROM shard_leases WHERE owner = $1 AND expires_at > now()",
                second))

        await until(second_holds_shards, 60, "scheduler-2 to take some of the 16 shards")
        for alias, metric, labels in (
                ("api-2", "ostinato_http_request_duration_seconds_count",
                 {"route": "/v1/jobs/batch", "status": "200"}),
                ("dispatcher-2", "ostinato_dispatch_decisions_total", {}),
                ("worker_gateway-2", "ostinato_runs_claimed_total", {}),
                ("reconciler-2", "ostinato_duty_tick_seconds_count", {})):
            await until(lambda a=alias, m=metric, x=labels: served_by(lab, a, m, **x), 60,
                        f"{alias} to do its share ({metric} {labels})")
        killed_at = await lab.db.now()
        for service in SERVICES:  # every first instance dies at once
            c.kill(service)
        accepted_before = len(load.accepted) + len(joined.accepted)
        await until(lambda: _more((load, joined), accepted_before + 60), 60,
                    "submissions accepted by api-2 after the kill")
        await asyncio.sleep(3)
    finally:
        await load.stop()
        if joined is not None:
            await joined.stop()
    assert joined is not None

    # the survivors hold everything and did the work after the kills
    owners = {r["owner"] for r in await lab.db.fetch(
        "SELECT owner FROM shard_leases WHERE expires_at > now()")}
    assert owners == {second}
    after = {r["type"]: r["n"] for r in await lab.db.fetch(
        "SELECT type, count(*) AS n FROM events WHERE recorded_at > $1 "
        "AND type = ANY($2::text[]) GROUP BY 1", killed_at,
        ["RunScheduled", "RunQueued", "RunStarted", "RunSucceeded"])}
    assert all(after.get(t, 0) > 0 for t in ("RunScheduled", "RunQueued", "RunStarted",
                                             "RunSucceeded")), after
    async with lab.client() as client:
        for job_id in recurring:  # no new occurrences: what was made can all finish
            assert (await client.delete(f"/v1/jobs/{job_id}")).status_code in (200, 204)

    assert load.abandoned == joined.abandoned == [], "jobs were never accepted"
    one_off = load.job_ids + joined.job_ids
    expected_jobs = one_off + recurring
    missing, open_runs = await wait_settled(lab.db, expected_jobs, 90)
    verdict = await verify(lab.db, expected_jobs)
    assert (missing, open_runs) == (0, 0), verdict.problems()
    assert verdict.problems() == []
    slots, unaccounted, duplicated, skipped = await coverage(lab.db, recurring, start)
    assert (unaccounted, duplicated, skipped) == (0, 0, 0)
    # every run once: one succeeded run per one-off job and per recurring slot, one effect each
    assert verdict.runs == verdict.succeeded == verdict.effects == len(one_off) + slots
    checked, backwards = await shard_epoch_order(lab.db)
    # every run's RunScheduled (one-off and recurring) was written under a shard epoch that
    # never went down, across the join and the kills
    assert checked == verdict.runs and backwards == {}, backwards
    last_slot = await lab.db.fetchval("SELECT max(scheduled_for) FROM runs WHERE job_id = "
                                      "ANY($1::uuid[])", recurring)
    assert last_slot > killed_at, "no recurring slot after the kills was checked"


async def _more(loads: tuple[Load, Load], n: int) -> bool:
    return sum(len(x.accepted) for x in loads) >= n
