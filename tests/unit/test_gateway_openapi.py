"""The worker-gateway's OpenAPI document (served at /schema/openapi.json) says what each route
answers: issue 42 found `/v1/worker/tasks` documented as returning a string (it returns an
object) and the single-run routes as returning anything. Schemathesis checks the answers
against this document (tests/integration/test_schemathesis.py), so it must be true."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest

from ostinato.eventlog.store import EventStore
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.wire import worker as p
from ostinato.wire.worker import TASKS_PATH, RegisterTasksResponse
from services.worker_gateway.app import create_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.wakeups import ReadySignals

# Each route and the protocol type its 200 carries (`ostinato.wire.worker`'s module doc).
ANSWERS: dict[str, type[msgspec.Struct]] = {
    p.CLAIM_PATH: p.ClaimResponse,
    p.BATCH_PATH: p.BatchResponse,
    p.GOODBYE_PATH: p.GoodbyeResponse,
    TASKS_PATH: RegisterTasksResponse,
    "/v1/worker/runs/{run_id}/heartbeat": p.HeartbeatResponse,
    "/v1/worker/runs/{run_id}/complete": p.OutcomeResponse,
    "/v1/worker/runs/{run_id}/fail": p.OutcomeResponse,
    "/v1/worker/runs/{run_id}/release": p.OutcomeResponse,
    "/v1/worker/runs/{run_id}/steps": p.StepsResponse,
}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    service = Service("worker-gateway", Settings())
    attempts = Attempts(service.pool, EventStore(service.clock, service.settings.topics),
                        service.clock, lease_ttl_seconds=30)
    app = create_app(service, attempts, ReadySignals())
    return app.openapi_schema.to_schema()


def test_every_worker_route_declares_its_protocol_answer(document: dict[str, Any]) -> None:
    declared = {path: ops["post"]["responses"]["200"]["content"]["application/json"]["schema"]
                for path, ops in document["paths"].items()}
    assert declared == {path: {"$ref": f"#/components/schemas/{t.__name__}"}
                        for path, t in ANSWERS.items()}


def test_the_declared_answers_are_objects_with_the_protocol_fields(
        document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for answer in set(ANSWERS.values()):
        schema = schemas[answer.__name__]
        assert schema["type"] == "object", answer
        assert set(schema["properties"]) == set(answer.__struct_fields__), answer


def test_ops_routes_stay_out_of_the_document(document: dict[str, Any]) -> None:
    assert set(document["paths"]) == set(ANSWERS)


async def test_the_gateway_serves_its_document() -> None:
    service = Service("worker-gateway", Settings())
    attempts = Attempts(service.pool, EventStore(service.clock, service.settings.topics),
                        service.clock, lease_ttl_seconds=30)
    transport = httpx.ASGITransport(app=create_app(service, attempts, ReadySignals()))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as c:
        served = await c.get("/schema/openapi.json")
    assert served.status_code == 200
    assert served.json()["paths"].keys() == ANSWERS.keys()
