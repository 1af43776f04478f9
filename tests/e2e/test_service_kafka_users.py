"""End to end with every service as its own Kafka SCRAM user on the broker's SERVICES listener
(as `make up` runs them): a tenant created through the api gets its Kafka access from the api's
own user, and a job submitted over HTTP and one produced by the tenant both run to success
through the five services; no service's log shows its password."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from ostinato.bus import access
from ostinato.bus.kafka import ensure_topics
from ostinato.bus.topics import Topics
from ostinato.sdk import Worker, task
from tests.helpers.e2e import running_cluster
from tests.helpers.env import KAFKA_BOOTSTRAP, SERVICE_BOOTSTRAP, TENANT_BOOTSTRAP
from tests.helpers.lab.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
ENOUGH = 90.0  # a safety net, never a bound on how fast the run is


@task("kafka-e2e")
async def echo(payload: dict) -> dict:
    return {"echo": payload["n"]}


@pytest.fixture
async def cluster(template_db: str, topic_prefix: str,
                  tmp_path: Path) -> AsyncIterator[tuple[Cluster, list[str]]]:
    topics = Topics(prefix=topic_prefix, partitions=3)
    await ensure_topics(KAFKA_BOOTSTRAP, topics.all(), 3)  # as `make up` does before
    service_env, passwords = {}, []
    for service in access.SERVICES:
        user, password = access.service_user(topics, service), access.new_password()
        await access.grant(KAFKA_BOOTSTRAP, user=user, password=password,
                           acls=access.service_acls(topics, service))
        passwords.append(password)
        service_env[service] = {"OSTINATO_KAFKA_BOOTSTRAP": SERVICE_BOOTSTRAP,
                                "OSTINATO_KAFKA_USERNAME": user,
                                "OSTINATO_KAFKA_PASSWORD": password}
    service_env["api"]["OSTINATO_KAFKA_TENANT_BOOTSTRAP"] = TENANT_BOOTSTRAP
    async with running_cluster(template_db, topic_prefix, tmp_path / "logs",
                               service_env=service_env) as c:
        yield c, passwords


async def succeeded(api: httpx.AsyncClient, headers: dict[str, str], name: str) -> dict:
    async with asyncio.timeout(ENOUGH):
        while True:
            jobs = (await api.get("/v1/jobs", headers=headers)).json()["items"]
            for job in (j for j in jobs if j["name"] == name):
                runs = (await api.get(f"/v1/runs?job_id={job['id']}", headers=headers)).json()
                done = [r for r in runs["items"] if r["state"] == "succeeded"]
                if done:
                    return (await api.get(f"/v1/runs/{done[0]['id']}", headers=headers)).json()
            await asyncio.sleep(0.2)


async def test_the_services_run_jobs_as_their_own_kafka_users(
        cluster: tuple[Cluster, list[str]]) -> None:
    c, passwords = cluster
    async with httpx.AsyncClient(base_url=c.api_url, timeout=10) as api:
        r = await api.post("/v1/tenants", json={"name": "scram"},
                           headers={"Authorization": f"Bearer {c.admin_key}"})
        assert r.status_code == 201, r.text
        key, kafka = r.json()["api_key"], r.json()["kafka"]
        assert kafka is not None  # granted by the api's own user (ALTER on the cluster)
        h = {"Authorization": f"Bearer {key}"}
        r = await api.post("/v1/jobs", json={"name": "over-http", "task": "kafka-e2e",
                                             "payload": {"n": 1}}, headers=h)
        assert r.status_code == 201, r.text
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka["bootstrap_servers"],
            security_protocol=kafka["security_protocol"], sasl_mechanism=kafka["sasl_mechanism"],
            sasl_plain_username=kafka["username"], sasl_plain_password=kafka["password"])
        await producer.start()
        try:
            await producer.send_and_wait(kafka["topic"], json.dumps(
                {"name": "over-kafka", "task": "kafka-e2e", "payload": {"n": 2}}).encode())
        finally:
            await producer.stop()
        worker = Worker(c.gateway_url, key, [echo], concurrency=2, claim_wait_seconds=2,
                        shutdown_grace_seconds=5)
        running = asyncio.create_task(worker.run())
        try:
            assert (await succeeded(api, h, "over-http"))["output"] == {"echo": 1}
            assert (await succeeded(api, h, "over-kafka"))["output"] == {"echo": 2}
        finally:
            await worker.stop()
            await running
    for log in c.log_dir.glob("*.log"):
        text = log.read_text(errors="replace")
        assert not any(p in text for p in passwords), log.name
