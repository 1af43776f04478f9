"""End to end: one trace crosses the services. A job submitted over HTTP with our own
`traceparent` runs on an SDK worker; then Jaeger (started by `make test` through
`infra/up.sh ... jaeger`) must hold spans of that trace id from the api, from the scheduler or
the dispatcher (its Kafka consumer span), and from the worker-gateway."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ostinato.sdk import Worker, current, task
from tests.helpers.e2e import running_cluster
from tests.helpers.lab.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

JAEGER_QUERY = os.environ.get("OSTINATO_JAEGER_QUERY", "http://127.0.0.1:16686").rstrip("/")
JAEGER_OTLP = os.environ.get("OSTINATO_JAEGER_OTLP", "http://127.0.0.1:4318").rstrip("/")
TRACE_WAIT_SECONDS = 30.0

API, SCHEDULER, DISPATCHER, GATEWAY = (
    "ostinato-api", "ostinato-scheduler", "ostinato-dispatcher", "ostinato-worker-gateway")


@pytest.fixture(scope="module")
def jaeger() -> str:
    try:
        r = httpx.get(f"{JAEGER_QUERY}/api/services", timeout=3)
        r.raise_for_status()
    except httpx.HTTPError as exc:
        pytest.skip(f"Jaeger query API {JAEGER_QUERY} (OSTINATO_JAEGER_QUERY) does not answer "
                    f"({exc!r}); start it with `infra/up.sh jaeger`")
    return JAEGER_QUERY


@pytest.fixture
async def cluster(jaeger: str, template_db: str, topic_prefix: str,
                  tmp_path: Path) -> AsyncIterator[Cluster]:
    # Export every service's spans to Jaeger (see ostinato.telemetry.tracing.init_tracing).
    # Each service names itself ostinato-<service>: a service name inherited from the
    # environment must not merge them, nor may a sampler or an SDK switch inherited from it
    # drop spans. A short batch delay makes spans queryable while the services still run.
    async with running_cluster(template_db, topic_prefix, tmp_path / "logs", env={
        "OSTINATO_OTLP_ENDPOINT": JAEGER_OTLP,
        "OTEL_SERVICE_NAME": "",
        "OTEL_SDK_DISABLED": "false",
        "OTEL_TRACES_SAMPLER": "parentbased_always_on",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }) as c:
        yield c


@task("traced")
async def traced(payload: dict) -> dict:
    await current().heartbeat()
    return {"echo": payload["n"]}


def _summary(trace: dict[str, Any] | None) -> str:
    """One line per span: service, operation, span id, parent; for failure messages."""
    if not trace:
        return "(no trace)"
    services = {pid: p["serviceName"] for pid, p in trace.get("processes", {}).items()}
    lines = []
    for s in sorted(trace.get("spans", []), key=lambda s: s["startTime"]):
        parents = ",".join(r["spanID"] for r in s.get("references", [])) or "-"
        lines.append(f"  {services.get(s['processID'], '?'):24} {s['operationName']:40} "
                     f"span={s['spanID']} parent={parents}")
    return "\n".join(lines)


def _services(trace: dict[str, Any] | None) -> set[str]:
    if not trace:
        return set()
    names = {pid: p["serviceName"] for pid, p in trace.get("processes", {}).items()}
    return {names.get(s["processID"], "?") for s in trace.get("spans", [])}


def _complete(services: set[str]) -> bool:
    return {API, SCHEDULER, DISPATCHER, GATEWAY} <= services


async def _fetch_trace(client: httpx.AsyncClient, trace_id: str) -> dict[str, Any] | None:
    r = await client.get(f"/api/traces/{trace_id}")
    if r.status_code == 404:
        return None
    r.raise_for_status()
    data = r.json().get("data") or []
    return data[0] if data else None


async def test_one_trace_crosses_the_services(cluster: Cluster, jaeger: str) -> None:
    trace_id = secrets.token_hex(16)
    caller_span = secrets.token_hex(8)
    traceparent = f"00-{trace_id}-{caller_span}-01"  # sampled

    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=10) as api:
        r = await api.post("/v1/tenants", json={"name": "tracing"},
                           headers={"Authorization": f"Bearer {cluster.admin_key}"})
        assert r.status_code == 201, r.text
        key = r.json()["api_key"]
        h = {"Authorization": f"Bearer {key}"}
        r = await api.post("/v1/jobs", json={"name": "traced", "task": "traced",
                                             "payload": {"n": 7}},
                           headers={**h, "traceparent": traceparent})
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]

        worker = Worker(cluster.gateway_url, key, [traced], concurrency=1,
                        claim_wait_seconds=2, shutdown_grace_seconds=5)
        running = asyncio.create_task(worker.run())
        try:
            deadline = asyncio.get_running_loop().time() + 60
            while True:
                items = (await api.get(f"/v1/runs?job_id={job_id}", headers=h)).json()["items"]
                if any(i["state"] == "succeeded" for i in items):
                    break
                assert asyncio.get_running_loop().time() < deadline, \
                    f"run did not succeed: {items}"
                await asyncio.sleep(0.1)
        finally:
            await worker.stop()
            await running

    # Spans reach Jaeger asynchronously (batch processors in each service and in Jaeger).
    trace: dict[str, Any] | None = None
    async with httpx.AsyncClient(base_url=jaeger, timeout=5) as q:
        deadline = asyncio.get_running_loop().time() + TRACE_WAIT_SECONDS
        while True:
            trace = await _fetch_trace(q, trace_id)
            if _complete(_services(trace)):
                break
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.5)

    found = _services(trace)
    print(f"\ntrace {trace_id} in Jaeger: services {sorted(found)}\n{_summary(trace)}")
    assert _complete(found), (
        f"trace {trace_id} lacks spans after {TRACE_WAIT_SECONDS:.0f}s: want {API}, {SCHEDULER}, "
        f"{DISPATCHER} and {GATEWAY}; got {sorted(found)}\n{_summary(trace)}\n"
        f"service logs in {cluster.log_dir}"
    )
    assert trace is not None
    # The api's server span continues the caller's traceparent.
    api_parents = {r["spanID"] for s in trace["spans"]
                   if trace["processes"][s["processID"]]["serviceName"] == API
                   for r in s.get("references", [])}
    assert caller_span in api_parents, f"no api span is a child of {caller_span}\n{_summary(trace)}"
