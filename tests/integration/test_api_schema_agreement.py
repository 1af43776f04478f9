"""The OpenAPI document and the server agree on which bodies are whole (issue 42): a body the
document accepts is accepted, one it refuses is a 422. Rules that span fields are in the
document too (a model's `SCHEMA_RULES`, put there by `runtime/contract.py`): a schedule has
exactly one of `at`, `cron` or `every`, and the filter form of pausing names a task or a
job_id. A job without a schedule is due now (docs/SCHEDULES.md), so `schedule` is optional."""

from __future__ import annotations

import uuid
from typing import Any

import fastjsonschema
import httpx
import pytest

from tests.helpers.api import auth, tenant

pytestmark = pytest.mark.integration

JOB_ID = str(uuid.UUID(int=7))
CASES: list[tuple[str, dict[str, Any], bool]] = [  # (path, body, whole by the document)
    ("/v1/jobs", {"name": "now"}, True),  # no schedule: due now
    ("/v1/jobs", {"name": "now", "schedule": None}, True),
    ("/v1/jobs", {"name": "daily", "schedule": {"cron": "0 9 * * *", "at": None}}, True),
    ("/v1/jobs", {"name": "once", "schedule": {"at": "2030-01-01T09:00:00Z"}}, True),
    ("/v1/jobs", {"name": "often", "schedule": {"every": "15m", "timezone": "UTC"}}, True),
    ("/v1/jobs", {"name": "empty", "schedule": {}}, False),
    ("/v1/jobs", {"name": "zone-only", "schedule": {"timezone": "Europe/Berlin"}}, False),
    ("/v1/jobs", {"name": "nulls", "schedule": {"at": None, "cron": None}}, False),
    ("/v1/jobs", {"name": "two", "schedule": {"cron": "0 9 * * *", "every": "1h"}}, False),
    ("/v1/runs/pause", {"task": "report"}, True),
    ("/v1/runs/pause", {"job_id": JOB_ID, "task": None}, True),
    ("/v1/runs/pause", {"task": "report", "job_id": JOB_ID, "reason": "audit"}, True),
    ("/v1/runs/pause", {}, False),
    ("/v1/runs/pause", {"reason": "no target"}, False),
    ("/v1/runs/pause", {"task": None, "job_id": None}, False),
    ("/v1/runs/resume", {"job_id": JOB_ID}, True),
    ("/v1/runs/resume", {}, False),
]


async def test_the_document_and_the_server_agree_on_each_body(
        client: httpx.AsyncClient) -> None:
    r = await client.get("/schema/openapi.json")  # the document the api serves
    assert r.status_code == 200
    document = r.json()
    key = await tenant(client, "agreement")
    for path, body, whole in CASES:
        schema = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        validate = fastjsonschema.compile({**schema["schema"],
                                           "components": document["components"]})
        try:
            validate(body)
            valid = True
        except fastjsonschema.JsonSchemaValueException:
            valid = False
        assert valid == whole, ("the document", path, body)
        answer = await client.post(path, json=body, headers=auth(key))
        if whole:
            assert answer.status_code in (200, 201), (path, body, answer.text)
        else:
            assert answer.status_code == 422, (path, body, answer.text)
            assert answer.headers["content-type"].startswith("application/problem+json")
