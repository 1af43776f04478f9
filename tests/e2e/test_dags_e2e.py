"""A DAG run through the five services as processes (docs/DAGS.md), with the scheduler — the
process that advances DAG runs — killed with SIGKILL while the DAG runs and started again: every
node still runs exactly once, each after its parents, and the DAG run succeeds."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from ostinato.sdk import Worker, task
from tests.helpers.e2e import eventually, running_cluster, tenant_key
from tests.helpers.lab.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


@pytest.fixture
async def cluster(template_db: str, topic_prefix: str,
                  tmp_path: Path) -> AsyncIterator[Cluster]:
    async with running_cluster(template_db, topic_prefix, tmp_path / "logs",
                               clean_exit=False) as c:
        yield c


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def diamonds(count: int) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    nodes = [{"key": "j0", "task": "e2e.dag"}]
    edges = []
    for i in range(1, count + 1):
        nodes += [{"key": f"{side}{i}", "task": "e2e.dag"} for side in ("l", "r", "j")]
        edges += [{"from": f"j{i - 1}", "to": f"l{i}"}, {"from": f"j{i - 1}", "to": f"r{i}"},
                  {"from": f"l{i}", "to": f"j{i}"}, {"from": f"r{i}", "to": f"j{i}"}]
    return nodes, edges


async def test_a_dag_run_survives_a_scheduler_kill(cluster: Cluster) -> None:
    key = await tenant_key(cluster)
    auth = {"Authorization": f"Bearer {key}"}
    ran: list[str] = []

    @task("e2e.dag")
    async def step(payload: dict[str, Any]) -> str:
        await asyncio.sleep(0.05)
        ran.append(payload["dag"]["node"])
        return payload["dag"]["node"]

    nodes, edges = diamonds(10)  # 31 nodes, 10 levels of diamonds
    worker = Worker(cluster.gateway_url, key, [step], concurrency=8, claim_wait_seconds=1)
    running = asyncio.create_task(worker.run())
    try:
        async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as api:
            r = await api.post("/v1/dags", headers=auth, json={
                "name": "diamonds", "nodes": nodes, "edges": edges})
            assert r.status_code == 201, r.text
            r = await api.post(f"/v1/dags/{r.json()['id']}/runs", headers=auth)
            assert r.status_code == 201, r.text
            dag_run = r.json()["id"]
            await eventually(api, f"/v1/dag-runs/{dag_run}", key,
                             lambda v: v["progress"].get("succeeded", 0) >= 6, seconds=120)
            cluster.kill("scheduler")  # kill -9, somewhere in the middle of the DAG run
            await asyncio.sleep(1)
            await asyncio.to_thread(cluster.start, ("scheduler",))
            view = await eventually(api, f"/v1/dag-runs/{dag_run}", key,
                                    lambda v: v["state"] != "running", seconds=300)
            events = (await api.get(f"/v1/dag-runs/{dag_run}/events", headers=auth)).json()
    finally:
        await worker.stop()
        await running
    assert view["state"] == "succeeded", view["progress"]
    assert view["progress"] == {"total": 31, "succeeded": 31}
    assert Counter(ran) == {n["key"]: 1 for n in nodes}  # no node ran twice
    kinds = Counter(e["type"] for e in events["items"])
    assert kinds == {"DagRunStarted": 1, "DagNodeReady": 31, "DagNodeFinished": 31,
                     "DagRunFinished": 1}
    by_key = {n["key"]: n for n in view["nodes"]}
    for edge in edges:  # each node started after its parents ended
        child, parent = by_key[edge["to"]], by_key[edge["from"]]
        assert instant(child["started_at"]) >= instant(parent["finished_at"]), edge
    assert all(n["generation"] == 0 and n["attempts"] == 1 for n in view["nodes"])
