"""Failure handling end to end, five services as processes and real workers: an effect applied
once although the attempt that applied it crashed before reporting; cancelling a running run;
replaying a dead letter with a fixed payload until it succeeds."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from ostinato.sdk import PermanentError, Worker, current, task
from tests.helpers.e2e import eventually, running_cluster, tenant_key
from tests.helpers.env import owner_url_of
from tests.helpers.lab.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
HERE = Path(__file__).parent


@pytest.fixture
async def cluster(template_db: str, topic_prefix: str,
                  tmp_path: Path) -> AsyncIterator[Cluster]:
    async with running_cluster(template_db, topic_prefix, tmp_path / "logs", clean_exit=False,
                               env={"OSTINATO_LEASE_TTL_SECONDS": "3",
                                    "OSTINATO_RECONCILE_INTERVAL_SECONDS": "0.5"}) as c:
        yield c


def start_worker(log: Path, *args: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, str(HERE / "crashing_worker.py"), *args],
                                stdout=out, stderr=subprocess.STDOUT)


async def test_an_effect_is_applied_once_although_its_attempt_crashed_before_reporting(
        cluster: Cluster, tmp_path: Path) -> None:
    key = await tenant_key(cluster)
    h = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=10) as api:
        job = (await api.post("/v1/jobs", json={"name": "charge", "retry": {
            "initial_delay": "1s", "jitter": "none"}}, headers=h)).json()
        log = tmp_path / "worker.log"
        # the worker keeps its effects in the services' database, as its owner
        args = (cluster.gateway_url, key, owner_url_of(cluster.database_url))
        crash = await asyncio.to_thread(start_worker, log, *args)
        assert await asyncio.to_thread(crash.wait, 30) == 17  # died after its effect
        again = await asyncio.to_thread(start_worker, log, *args)
        try:
            page = await eventually(api, f"/v1/runs?job_id={job['id']}", key,
                                    lambda b: b["items"] and b["items"][0]["state"] ==
                                    "succeeded")
        finally:
            again.terminate()
            await asyncio.to_thread(again.wait, 15)
    [run] = page["items"]
    assert run["attempt"] == 2
    async with httpx.AsyncClient(base_url=cluster.api_url) as api:
        detail = (await api.get(f"/v1/runs/{run['id']}", headers=h)).json()
        events = (await api.get(f"/v1/runs/{run['id']}/events", headers=h)).json()["items"]
    assert detail["output"] == {"applied_now": False}  # the retry found the effect done
    assert "LeaseExpired" in [e["type"] for e in events]
    conn = await asyncpg.connect(owner_url_of(cluster.database_url))
    try:
        charges = await conn.fetch("SELECT run_id, attempt FROM charges")
    finally:
        await conn.close()
    assert [(r["run_id"], r["attempt"]) for r in charges] == [(run["id"], 1)]


@task("slow")
async def slow(payload: dict) -> dict:
    await asyncio.Event().wait()  # never set: only the SDK's cancellation ends it
    return {}


@task("picky")
async def picky(payload: dict) -> dict:
    if payload.get("amount", 0) <= 0:
        raise PermanentError("amount must be positive", type="invalid_amount")
    return {"charged": payload["amount"], "attempt": current().attempt}


async def test_cancel_a_running_run_and_replay_a_fixed_dead_letter(cluster: Cluster) -> None:
    key = await tenant_key(cluster)
    h = {"Authorization": f"Bearer {key}"}
    worker = Worker(cluster.gateway_url, key, [slow, picky], concurrency=4,
                    claim_wait_seconds=1, shutdown_grace_seconds=2)
    running = asyncio.create_task(worker.run())
    try:
        async with httpx.AsyncClient(base_url=cluster.api_url, timeout=10) as api:
            job = (await api.post("/v1/jobs", json={"name": "slow"}, headers=h)).json()
            page = await eventually(api, f"/v1/runs?job_id={job['id']}", key,
                                    lambda b: b["items"] and b["items"][0]["state"] ==
                                    "running")
            run_id = page["items"][0]["id"]
            r = await api.post(f"/v1/runs/{run_id}/cancel", headers=h)
            assert r.json() == {"state": "running", "cancel": "requested"}
            await eventually(api, f"/v1/runs/{run_id}", key,
                             lambda b: b["state"] == "cancelled")

            bad = (await api.post("/v1/jobs", json={"name": "picky", "payload": {"amount": 0}},
                                  headers=h)).json()
            page = await eventually(api, f"/v1/runs?job_id={bad['id']}", key,
                                    lambda b: b["items"] and b["items"][0]["state"] ==
                                    "dead_lettered")
            dead = page["items"][0]["id"]
            replay = await api.post(f"/v1/dead-letters/{dead}/replay", json={
                "payload": {"amount": 42}, "request_key": "fix"}, headers=h)
            assert replay.status_code == 201
            fixed = await eventually(api, f"/v1/runs/{replay.json()['run_id']}", key,
                                     lambda b: b["state"] == "succeeded")
            assert fixed["output"] == {"charged": 42, "attempt": 1}
            assert fixed["replay_of"] == dead and fixed["trigger"] == "replay"
    finally:
        await worker.stop()
        await running
