"""End to end: the five services as separate processes over the real PostgreSQL and Kafka; jobs
submitted over HTTP run on a worker written with the SDK, and their timelines are right."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from ostinato.sdk import PermanentError, Worker, current, task
from tests.helpers.e2e import running_cluster
from tests.helpers.lab.cluster import Cluster
from tests.helpers.lab.metrics import metric_total, scrape

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
EXPECTED = ["RunScheduled", "RunQueued", "RunStarted", "RunSucceeded"]


@pytest.fixture
async def cluster(template_db: str, topic_prefix: str,
                  tmp_path: Path) -> AsyncIterator[Cluster]:
    async with running_cluster(template_db, topic_prefix, tmp_path / "logs") as c:
        yield c


@task("greet")
async def greet(payload: dict) -> dict:
    ctx = current()
    await ctx.heartbeat()
    return {"greeting": f"hello {payload['who']}", "attempt": ctx.attempt,
            "key": ctx.idempotency_key}


@task("flaky")
async def flaky(payload: dict) -> dict:
    if current().attempt == 1:
        raise ConnectionError("upstream reset")  # unclassified: retryable by default
    return {"ok": True}


@task("reject")
async def reject(payload: dict) -> dict:
    raise PermanentError("not today", type="business_rule")


async def wait_for(client: httpx.AsyncClient, path: str, headers: dict[str, str],
                   done: callable, seconds: float = 60) -> dict:
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        body = (await client.get(path, headers=headers)).json()
        if done(body):
            return body
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{path} did not reach the expected state: {body}")
        await asyncio.sleep(0.1)


async def test_jobs_run_through_all_five_services(cluster: Cluster) -> None:
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/tenants", json={"name": "acme"},
                           headers={"Authorization": f"Bearer {cluster.admin_key}"})
        assert r.status_code == 201, r.text
        key = r.json()["api_key"]
        h = {"Authorization": f"Bearer {key}"}
        soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
        submitted = {}
        for who, schedule in [("now", None), ("soon", {"at": soon}), ("also-now", None)]:
            body = {"name": f"greet-{who}", "task": "greet", "payload": {"who": who}}
            if schedule:
                body["schedule"] = schedule
            r = await api.post("/v1/jobs", json=body, headers=h)
            assert r.status_code == 201, r.text
            submitted[r.json()["id"]] = who
        r = await api.post("/v1/jobs", json={"name": "nope", "task": "reject"}, headers=h)
        rejected_job = r.json()["id"]
        r = await api.post("/v1/jobs", json={"name": "flaky", "task": "flaky", "retry": {
            "initial_delay": "1s", "jitter": "none"}}, headers=h)
        flaky_job = r.json()["id"]

        worker = Worker(cluster.gateway_url, key, [greet, reject, flaky], concurrency=4,
                        claim_wait_seconds=2, shutdown_grace_seconds=5)
        running = asyncio.create_task(worker.run())
        try:
            for job_id, who in submitted.items():
                page = await wait_for(api, f"/v1/runs?job_id={job_id}", h, lambda b: any(
                    i["state"] == "succeeded" for i in b["items"]))
                [run] = page["items"]
                detail = (await api.get(f"/v1/runs/{run['id']}", headers=h)).json()
                assert detail["state"] == "succeeded" and detail["attempt"] == 1
                assert detail["output"]["greeting"] == f"hello {who}"
                assert detail["output"]["key"] == f"run:{run['id']}"
                times = detail["timestamps"]
                assert times["scheduled_at"] <= times["queued_at"] <= times["started_at"] \
                    <= times["finished_at"]
                timeline = (await api.get(f"/v1/runs/{run['id']}/events", headers=h)).json()
                events = timeline["items"]
                assert [e["type"] for e in events] == EXPECTED
                assert [e["version"] for e in events] == [1, 2, 3, 4]
                assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
                assert events[0]["actor"] == "scheduler" and events[1]["actor"] == "dispatcher"
                assert events[2]["epoch"] == events[3]["epoch"] == 1  # the fencing token
                assert events[2]["actor"] == events[3]["actor"] == f"worker:{worker.worker_id}"
            page = await wait_for(api, f"/v1/runs?job_id={rejected_job}", h, lambda b: any(
                i["state"] == "dead_lettered" for i in b["items"]))
            [failed] = page["items"]
            assert failed["last_error"]["type"] == "business_rule"
            assert failed["last_error"]["retryable"] is False
            letters = (await api.get("/v1/dead-letters", headers=h)).json()
            assert [d["run_id"] for d in letters["items"]] == [failed["id"]]
            page = await wait_for(api, f"/v1/runs?job_id={flaky_job}", h, lambda b: any(
                i["state"] == "succeeded" for i in b["items"]))
            [flaky_run] = page["items"]
            assert flaky_run["attempt"] == 2
            timeline = (await api.get(f"/v1/runs/{flaky_run['id']}/events", headers=h)).json()
            assert [e["type"] for e in timeline["items"]] == [
                "RunScheduled", "RunQueued", "RunStarted", "RunFailed", "RetryScheduled",
                "RetryDue", "RunQueued", "RunStarted", "RunSucceeded"]
            assert [e["epoch"] for e in timeline["items"] if e["type"] == "RunStarted"] == [1, 2]
        finally:
            await worker.stop()
            await running

        async with httpx.AsyncClient(timeout=5) as ops:
            for name, port in cluster.ports.items():
                text = (await ops.get(f"http://127.0.0.1:{port}/metrics")).text
                assert "ostinato_build_info" in text, name
        # summed over the instances of each service: either may have done the work
        claimed = [metric_total(await scrape(cluster.ports[a]), "ostinato_runs_claimed_total")
                   for a in cluster.aliases("worker_gateway")]
        created = [metric_total(await scrape(cluster.ports[a]), "ostinato_runs_created_total")
                   for a in cluster.aliases("scheduler")]
        assert (sum(claimed), sum(created)) == (6, 5), (claimed, created)
