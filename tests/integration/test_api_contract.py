"""The API's contract as its OpenAPI document states it, checked against what the API answers
(issue "Security and hardening", finding 7): the bearer scheme, every operation's problem
answers, numeric ranges, strict RFC 3339 date-times, 405 with `Allow`, `OPTIONS` listing every
method. The schemathesis run (tests/contract) checks the same document by generated requests;
each nonconformance it found has its regression case here."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from services.worker_gateway.app import create_app as create_gateway_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.wakeups import ReadySignals
from tests.helpers.api import ADMIN, assert_problem, auth, tenant
from tests.helpers.integration import store

pytestmark = pytest.mark.integration

METHODS = ("get", "put", "post", "delete", "patch")
PROBLEM = "#/components/schemas/ProblemDetails"


async def document(client: httpx.AsyncClient) -> dict[str, Any]:
    r = await client.get("/schema/openapi.json")
    assert r.status_code == 200, r.text
    return r.json()


def gateway_document() -> dict[str, Any]:
    service = Service("worker-gateway", Settings())
    app = create_gateway_app(service, Attempts(None, store(), service.clock,  # type: ignore[arg-type]
                                               lease_ttl_seconds=30), ReadySignals())
    return app.openapi_schema.to_schema()


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def unbounded_numbers(doc: dict[str, Any]) -> set[str]:
    """Every integer or number in a request body or parameter without both ends of its range."""
    components = doc["components"]["schemas"]
    found: set[str] = set()

    def walk(node: Any, where: str, seen: frozenset[str]) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[-1]
                if name not in seen:
                    walk(components[name], name, seen | {name})
                return
            if node.get("type") in ("integer", "number"):
                low = "minimum" in node or "exclusiveMinimum" in node
                high = "maximum" in node or "exclusiveMaximum" in node
                if not (low and high):
                    found.add(where)
            for key, value in node.items():
                walk(value, f"{where}.{key}", seen)
        elif isinstance(node, list):
            for n, value in enumerate(node):
                walk(value, f"{where}[{n}]", seen)

    for path, method, op in operations(doc):
        walk(op.get("requestBody", {}), f"{method} {path} body", frozenset())
        for p in op.get("parameters", []):
            walk(p.get("schema", {}), f"{method} {path} ?{p['name']}", frozenset())
    return found


# -- the document --------------------------------------------------------------------------

async def test_the_document_declares_the_bearer_scheme_on_every_api_operation(
        client: httpx.AsyncClient) -> None:
    doc = await document(client)
    assert doc["components"]["securitySchemes"]["bearer"] == {
        **doc["components"]["securitySchemes"]["bearer"], "type": "http", "scheme": "bearer"}
    assert doc["security"] == [{"bearer": []}]
    ops = list(operations(doc))
    assert len(ops) > 50
    for path, method, op in ops:  # every /v1 route reads a key: none opts out
        assert op.get("security") is None, (method, path)


def test_operations_that_read_no_key_say_so() -> None:
    from litestar import Litestar, get
    from litestar.openapi import OpenAPIConfig

    from ostinato.runtime.contract import apply_contract

    @get("/open")
    async def open_route() -> dict[str, str]:
        return {}

    app = apply_contract(Litestar([open_route], openapi_config=OpenAPIConfig(
        title="t", version="1", security=[{"bearer": []}])))
    op = app.openapi_schema.to_schema()["paths"]["/open"]["get"]
    assert op["security"] == []
    assert not [s for s in op["responses"] if s.startswith("4")]  # no input, no key: no 4xx


@pytest.mark.parametrize("which", ["api", "gateway"])
async def test_every_operation_documents_its_problem_answers(
        client: httpx.AsyncClient, which: str) -> None:
    doc = await document(client) if which == "api" else gateway_document()
    assert doc["components"]["schemas"]["ProblemDetails"]["required"] == [
        "type", "title", "status", "detail"]
    for path, method, op in operations(doc):
        answers = op["responses"]
        errors = {int(s) for s in answers if int(s) >= 400}
        assert {400, 401, 403} <= errors, (method, path, errors)
        assert (429 in errors) == (which == "api"), (method, path)  # the gateway limits no key
        if "{" in path or op.get("requestBody"):
            assert {404, 422} <= errors, (method, path, errors)
        if op.get("requestBody"):
            assert 413 in errors, (method, path)
        if method != "get":
            assert 409 in errors, (method, path)
        for status in errors:
            assert answers[str(status)]["content"] == {
                "application/problem+json": {"schema": {"$ref": PROBLEM}}}, (method, path)
        if which == "api":
            assert "Retry-After" in answers["429"]["headers"]
        assert "Retry-After" in answers["503"]["headers"], (method, path)  # the database away


@pytest.mark.parametrize("which", ["api", "gateway"])
async def test_every_number_a_request_carries_has_its_range(client: httpx.AsyncClient,
                                                            which: str) -> None:
    doc = await document(client) if which == "api" else gateway_document()
    assert unbounded_numbers(doc) == set()


async def test_an_optional_number_keeps_its_range(client: httpx.AsyncClient) -> None:
    """Litestar drops a range inside `X | None` and a list item's length; the contract puts
    them back."""
    limit = (await document(client))["components"]["schemas"]["LimitRequest"]["properties"]
    bounded = limit["max_concurrency"]["oneOf"][0]
    assert (bounded["minimum"], bounded["maximum"]) == (0, 1_000_000)
    key = (await document(client))["components"]["schemas"]["KeyRequest"]["properties"]
    assert key["pools"]["items"]["minLength"] == 1  # found by positive_data_acceptance: ""


async def test_documented_problems_are_what_the_api_answers(client: httpx.AsyncClient) -> None:
    key = await tenant(client, "contract-answers")
    assert_problem(await client.get("/v1/jobs"), 401)
    assert_problem(await client.post("/v1/tenants", json={"name": "x"}, headers=auth(key)), 403)
    assert_problem(await client.get("/v1/jobs/00000000-0000-0000-0000-000000000000",
                                    headers=auth(key)), 404)
    assert_problem(await client.post("/v1/jobs", json={"name": ""}, headers=auth(key)), 422,
                   "name")
    assert_problem(await client.post("/v1/jobs", content=b"{", headers={
        **auth(key), "Content-Type": "application/json"}), 400)


# -- date-times: RFC 3339 with an offset, nothing else ---------------------------------------

@pytest.mark.parametrize(("at", "accepted"), [
    (0, False), (1_764_579_600, False), (1.5, False), ("2026-12-01T09:00:00", False),
    ("2026-12-01", False), ("tomorrow", False), (True, False),
    ("2026-12-01T09:00:00Z", True), ("2026-12-01T10:00:00+01:00", True),
    ("2026-12-01T09:00:00.123456-05:30", True)])
async def test_a_schedule_instant_must_be_rfc3339_with_an_offset(
        pool: asyncpg.Pool, client: httpx.AsyncClient, at: Any, accepted: bool) -> None:
    key = await tenant(client, "instants")
    r = await client.post("/v1/jobs", json={"name": "when", "schedule": {"at": at}},
                          headers=auth(key))
    if accepted:
        assert r.status_code == 201, r.text
        return
    assert_problem(r, 422, "schedule.at")
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE name = 'when'") == 0


async def test_every_model_with_a_date_time_is_strict(client: httpx.AsyncClient) -> None:
    """In a batch, a preview, a cron's bounds and a backfill: each names its field."""
    key = await tenant(client, "instants-all")
    h = auth(key)
    naive = "2026-12-01T09:00:00"
    assert_problem(await client.post("/v1/jobs/batch", json={"jobs": [
        {"name": "a", "schedule": {"at": "2026-12-01T09:00:00Z"}},
        {"name": "b", "schedule": {"at": 0}}]}, headers=h), 422, "jobs[1].schedule.at")
    assert_problem(await client.post("/v1/schedules/preview", json={"schedule": {
        "cron": "0 9 * * *", "start_at": naive}}, headers=h), 422, "schedule.start_at")
    assert_problem(await client.post("/v1/jobs", json={"name": "c", "schedule": {
        "cron": "0 9 * * *", "end_at": 86_400}}, headers=h), 422, "schedule.end_at")
    job = await client.post("/v1/jobs", json={"name": "d", "schedule": {
        "cron": "0 9 * * *", "timezone": "UTC"}}, headers=h)
    assert job.status_code == 201, job.text
    jid = job.json()["id"]
    assert_problem(await client.post(f"/v1/jobs/{jid}/backfill", json={
        "start": 0, "end": "2026-12-02T00:00:00Z"}, headers=h), 422, "start")
    assert_problem(await client.get(f"/v1/jobs/{jid}/skips", params={"after": naive},
                                    headers=h), 422, "after")
    ok = await client.get(f"/v1/jobs/{jid}/skips", params={"after": "2026-12-01T00:00:00Z"},
                          headers=h)
    assert ok.status_code == 200, ok.text


async def test_the_key_is_checked_before_a_bad_date_time(pool: asyncpg.Pool,
                                                          client: httpx.AsyncClient) -> None:
    """A caller without a valid key learns nothing about its body: 401 (or a 403 for a role
    that may not create jobs) comes before the date-time's 422, and nothing is written."""
    key = await tenant(client, "instants-auth")
    viewer = (await client.post("/v1/keys", json={"name": "v", "role": "viewer"},
                                headers=auth(key))).json()["key"]
    bad = {"name": "auth-first", "schedule": {"at": 0}}
    assert_problem(await client.post("/v1/jobs", json=bad), 401)
    assert_problem(await client.post("/v1/jobs", json=bad, headers=auth("no-such-key")), 401)
    assert_problem(await client.post("/v1/jobs", json=bad, headers=auth(viewer)), 403)
    assert_problem(await client.post("/v1/jobs", json=bad, headers=auth(key)), 422,
                   "schedule.at")
    assert_problem(await client.post("/v1/jobs", json=bad, headers=auth(ADMIN)), 422,
                   "schedule.at")  # the admin key, which no tenant's rate limits
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE name = 'auth-first'") == 0


async def test_the_gateway_checks_the_key_before_a_bad_date_time(
        gateway: httpx.AsyncClient) -> None:
    bad = {"worker_id": "w", "steps": [{"run_id": str(uuid.uuid4()), "fencing_token": 1,
                                        "seq": 0, "name": "s", "deadline": 0}]}
    assert_problem(await gateway.post("/v1/worker/batch", json=bad), 401)
    assert_problem(await gateway.post("/v1/worker/batch", json=bad,
                                      headers=auth("no-such-key")), 401)
    for _ in range(2):  # the key checked, then the key remembered (`KnownKeys`)
        assert_problem(await gateway.post("/v1/worker/batch", json=bad, headers=auth(ADMIN)),
                       422, "steps[0].deadline")


# -- methods ---------------------------------------------------------------------------------

async def test_a_405_names_the_allowed_methods(client: httpx.AsyncClient) -> None:
    for method, path in (("PATCH", "/v1/jobs"), ("PUT", "/v1/runs"),
                         ("DELETE", "/v1/schedules/preview")):
        r = await client.request(method, path, headers=auth(ADMIN))
        assert_problem(r, 405)
        assert r.headers["allow"], (method, path)
        assert method not in r.headers["allow"]


async def test_options_lists_every_documented_method_of_a_path(
        client: httpx.AsyncClient) -> None:
    doc = await document(client)
    for path, item in doc["paths"].items():
        concrete = re.sub(r"\{(\w+)\}", lambda m: "00000000-0000-0000-0000-000000000000"
                          if m.group(1).endswith("id") else "1" if m.group(1) == "seq"
                          else "x", path)
        r = await client.options(concrete)
        assert r.status_code == 204, (path, r.text)
        allowed = {m.strip().lower() for m in r.headers["allow"].split(",")}
        assert {m for m in METHODS if m in item} <= allowed, (path, allowed)
        assert "options" in allowed
    r = await client.options("/v1/jobs")
    assert {m.strip() for m in r.headers["allow"].split(",")} == {"GET", "POST", "OPTIONS"}


# -- regressions found by schemathesis (tests/integration/test_schemathesis.py) --------------

async def test_a_repeated_create_answers_a_documented_200(client: httpx.AsyncClient) -> None:
    """POST .../retry with a request key used before answered 200, documented only as 201."""
    doc = await document(client)
    key = await tenant(client, "repeats")
    h = auth(key)
    job = {"name": "again", "idempotency_key": "k", "schedule": {
        "cron": "0 9 * * *", "timezone": "UTC"}}
    answers = [await client.post("/v1/jobs", json=job, headers=h) for _ in range(2)]
    assert [a.status_code for a in answers] == [201, 200]
    run = await client.post(f"/v1/jobs/{answers[0].json()['id']}/trigger", headers=h)
    run_id = run.json()["run_id"]
    assert (await client.post(f"/v1/runs/{run_id}/cancel", headers=h)).status_code < 300
    retries = [await client.post(f"/v1/runs/{run_id}/retry", json={"request_key": "r"},
                                 headers=h) for _ in range(2)]
    assert [r.status_code for r in retries] == [201, 200], [r.text for r in retries]
    for path, status in (("/v1/jobs", 200), ("/v1/runs/{run_id}/retry", 200),
                         ("/v1/runs/{run_id}/retry", 201)):
        assert str(status) in doc["paths"][path]["post"]["responses"], (path, status)


async def test_a_nul_character_is_a_400_and_stores_nothing(pool: asyncpg.Pool,
                                                           client: httpx.AsyncClient) -> None:
    """PostgreSQL text cannot hold U+0000: found by the worker protocol fuzz as a 500 (the
    gateway's `worker_id`); the same mapping covers every API field stored as text."""
    key = await tenant(client, "nul")
    r = await client.post("/v1/jobs", json={"name": "nul", "idempotency_key": "a\x00b"},
                          headers=auth(key))
    assert_problem(r, 400)
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE name = 'nul'") == 0


async def test_a_model_refusing_unknown_fields_says_so(client: httpx.AsyncClient) -> None:
    """Found by schemathesis's positive_data_acceptance: the document allowed extra members
    that the API refuses (msgspec `forbid_unknown_fields`)."""
    schemas = (await document(client))["components"]["schemas"]
    for name in ("JobRequest", "LimitRequest", "TenantRequest", "ScheduleSpec"):
        assert schemas[name]["additionalProperties"] is False, name
    key = await tenant(client, "extras")
    assert_problem(await client.post("/v1/jobs", json={"name": "x", "colour": "red"},
                                     headers=auth(key)), 422, "colour")


async def test_an_optional_body_is_documented_as_optional(client: httpx.AsyncClient) -> None:
    """Found by schemathesis's negative_data_rejection: POST /v1/jobs/{id}/pause without a body
    was accepted (rightly) while the document said the body was required."""
    doc = await document(client)
    assert doc["paths"]["/v1/jobs/{job_id}/pause"]["post"]["requestBody"]["required"] is False
    assert doc["paths"]["/v1/jobs"]["post"]["requestBody"]["required"] is True
    key = await tenant(client, "no-body")
    job = await client.post("/v1/jobs", json={"name": "p", "schedule": {
        "cron": "0 9 * * *", "timezone": "UTC"}}, headers=auth(key))
    r = await client.post(f"/v1/jobs/{job.json()['id']}/pause", headers=auth(key))
    assert r.status_code == 200, r.text
