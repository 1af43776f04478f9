"""Payload schemas without servers: what `@task(payload=...)` declares, what a worker registers
and claims with, how a handler gets its payload converted (or the run fails `invalid_payload`
without the handler being called), against the in-process fake gateway; and how a registered
schema checks a payload (`ostinato.jobs.payloads`: field paths, no remote `$ref`)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import fastjsonschema
import httpx
import msgspec
import pytest

from ostinato.jobs.payloads import PayloadSchemas, Verdict, _errors, compile_schema
from ostinato.sdk import (
    GatewayError,
    PermanentError,
    Task,
    Worker,
    WorkflowContext,
    task,
    workflow,
)
from ostinato.sdk.registration import definitions
from ostinato.sdk.tasks import registry
from ostinato.stores.task_schemas import NewestSchema
from ostinato.testing.gateway import API_KEY, FakeGateway, running
from ostinato.testing.handlers import HandlerEnvironment
from ostinato.wire import worker as p
from ostinato.wire.worker import TASKS_PATH
from tests.helpers.waiting import eventually


class Line(msgspec.Struct):
    sku: str
    qty: Annotated[int, msgspec.Meta(ge=1)]


class Charge(msgspec.Struct, forbid_unknown_fields=True):
    amount: int
    currency: str = "EUR"
    lines: list[Line] = []


def charge_task(seen: list[Any], **kw: Any) -> Task:
    @task("billing.charge", payload=Charge, **kw)
    async def charge(payload: Charge) -> int:
        seen.append(payload)
        return payload.amount

    return charge


# -- declaration ----------------------------------------------------------------------------


def test_a_declared_payload_has_version_1_accepts_it_and_carries_its_json_schema() -> None:
    spec = charge_task([]).payload
    assert spec is not None
    assert (spec.type, spec.version, spec.accepts) == (Charge, 1, (1,))
    assert spec.schema == msgspec.json.schema(Charge)
    later = charge_task([], payload_version=3, accepts=[2, 3]).payload
    assert later is not None and (later.version, later.accepts) == (3, (2, 3))


@pytest.mark.parametrize(("kw", "error"), [
    ({"payload_version": 2}, "need payload="),
    ({"accepts": [1]}, "need payload="),
    ({"payload": Charge, "payload_version": 0}, "integer >= 1"),
    ({"payload": Charge, "payload_version": True}, "integer >= 1"),
    ({"payload": Charge, "accepts": []}, "non-empty"),
    ({"payload": Charge, "payload_version": 2, "accepts": [1]}, "must include"),
])
def test_a_payload_declaration_is_checked_when_the_task_is_declared(kw: dict[str, Any],
                                                                    error: str) -> None:
    with pytest.raises(ValueError, match=error):
        task("t", **kw)


def test_a_payload_type_msgspec_cannot_describe_is_refused_at_declaration() -> None:
    with pytest.raises(TypeError, match="cannot describe"):
        task("t", payload=object)


def test_only_tasks_with_a_payload_type_are_registered() -> None:
    @task("plain")
    async def plain(payload: Any) -> None: ...

    @workflow("billing.order", payload=Charge, payload_version=2)
    async def order(ctx: WorkflowContext, payload: Charge) -> None: ...

    handlers = registry([plain, charge_task([]), order])
    assert [(d.task, d.payload_version, d.payload_schema) for d in definitions(handlers)] == [
        ("billing.charge", 1, msgspec.json.schema(Charge)),
        ("billing.order", 2, msgspec.json.schema(Charge)),
    ]


# -- the worker -----------------------------------------------------------------------------


async def test_the_worker_registers_its_schemas_before_it_claims_and_claims_with_accepts() -> None:
    gw, seen = FakeGateway(), []

    @task("plain")
    async def plain(payload: Any) -> None: ...

    run_id = await gw.add("billing.charge", {"amount": 5})
    async with running(gw, [charge_task(seen, payload_version=2, accepts=[1, 2]), plain]) as w:
        await eventually(lambda: run_id in gw.completions())
    assert gw.paths[0] == TASKS_PATH  # before the first claim
    [registered] = gw.registrations
    assert registered.worker_id == w.worker_id
    assert [(t.task, t.payload_version) for t in registered.tasks] == [("billing.charge", 2)]
    assert {c.payload_versions == {"billing.charge": [1, 2]} for c in gw.claims} == {True}


async def test_a_worker_without_payload_types_registers_nothing_and_claims_as_before() -> None:
    gw = FakeGateway()

    async def plain(payload: Any) -> None: ...

    run_id = await gw.add("plain")
    async with running(gw, {"plain": plain}):
        await eventually(lambda: run_id in gw.completions())
    assert TASKS_PATH not in gw.paths and gw.registrations == []
    assert {c.payload_versions for c in gw.claims} == {None}


async def test_the_handler_gets_the_payload_converted_into_its_declared_type() -> None:
    gw, seen = FakeGateway(), []
    run_id = await gw.add("billing.charge", {"amount": 7, "lines": [{"sku": "a", "qty": 2}]},
                          payload_version=1)
    async with running(gw, [charge_task(seen)]):
        await eventually(lambda: run_id in gw.completions())
    assert seen == [Charge(amount=7, lines=[Line(sku="a", qty=2)])]
    assert gw.completions()[run_id].output == 7


@pytest.mark.parametrize(("payload", "field"), [
    ({"amount": "7"}, "`payload.amount`"),
    ({"amount": 7, "lines": [{"sku": "a", "qty": 0}]}, "`payload.lines[0].qty`"),
    ({"amount": 7, "tip": 1}, "`payload`"),  # unknown field: forbid_unknown_fields
    (None, "`payload`"),
])
async def test_a_payload_that_does_not_convert_fails_the_run_for_good_naming_the_field(
        payload: Any, field: str) -> None:
    gw, seen = FakeGateway(), []
    run_id = await gw.add("billing.charge", payload)
    async with running(gw, [charge_task(seen)]):
        await eventually(lambda: run_id in gw.failures())
    error = gw.failures()[run_id].error
    assert (error.type, error.retryable, error.classified) == ("invalid_payload", False, True)
    assert field in error.message and "billing.charge" in error.message
    assert seen == []  # the handler was not called


async def test_a_sync_handler_and_a_workflow_get_their_payload_converted_too() -> None:
    gw, seen = FakeGateway(), []

    @task("sync.charge", payload=Charge)
    def sync_charge(payload: Charge) -> str:
        seen.append(payload)
        return payload.currency

    @workflow("flow.charge", payload=Charge)
    async def flow(ctx: WorkflowContext, payload: Charge) -> int:
        seen.append(payload)
        return payload.amount

    first = await gw.add("sync.charge", {"amount": 1})
    second = await gw.add("flow.charge", {"amount": 2})
    bad = await gw.add("flow.charge", {"amount": []})
    async with running(gw, [sync_charge, flow]):
        await eventually(lambda: {first, second} <= gw.completions().keys()
                         and bad in gw.failures())
    assert sorted(seen, key=lambda c: c.amount) == [Charge(amount=1), Charge(amount=2)]
    assert gw.failures()[bad].error.type == "invalid_payload"


async def test_a_refused_registration_stops_the_worker_before_it_claims() -> None:
    gw = FakeGateway()
    gw.register_status = 409
    client = httpx.AsyncClient(transport=httpx.MockTransport(gw.handle))
    worker = Worker("http://gateway.test/", API_KEY, [charge_task([])], http_client=client)
    with pytest.raises(GatewayError) as refused:
        await asyncio.wait_for(worker.run(), 60)  # a hang guard only
    await client.aclose()
    assert refused.value.status == 409
    assert p.CLAIM_PATH not in gw.paths and gw.claims == []


async def test_the_handler_test_environment_converts_the_payload_like_a_worker() -> None:
    seen: list[Any] = []
    env = HandlerEnvironment(task="billing.charge")
    assert await env.run(charge_task(seen), {"amount": 3}) == 3
    assert seen == [Charge(amount=3)]
    with pytest.raises(PermanentError) as refused:
        await HandlerEnvironment(task="billing.charge").run(charge_task(seen), {"amount": "3"})
    assert refused.value.type == "invalid_payload" and "`payload.amount`" in str(refused.value)
    assert len(seen) == 1


# -- checking a payload against a registered schema ---------------------------------------


def fields(schema: Any, payload: Any) -> list[tuple[str, str]]:
    validate = compile_schema(schema)
    try:
        validate(payload)
    except (fastjsonschema.JsonSchemaValueException,
            fastjsonschema.JsonSchemaValuesException) as exc:
        return [(e["field"], e["message"]) for e in _errors(exc, "payload")]
    return []


def test_a_registered_schema_names_every_bad_field_by_its_path() -> None:
    schema = msgspec.json.schema(Charge)
    assert fields(schema, {"amount": 1}) == []
    assert fields(schema, {"amount": "x", "lines": [{"sku": "a", "qty": 0}], "tip": 1}) == [
        ("payload.amount", "must be integer"),
        ("payload.lines[0].qty", "must be bigger than or equal to 1"),
        ("payload.tip", "unknown field"),
    ]
    assert fields(schema, {"lines": []}) == [("payload.amount", "required field missing")]
    assert fields(schema, None) == [("payload", "must be object")]


def test_checking_never_writes_defaults_into_the_payload() -> None:
    payload = {"amount": 1}
    compile_schema(msgspec.json.schema(Charge))(payload)
    assert payload == {"amount": 1}


@pytest.mark.parametrize("ref", ["http://127.0.0.1:1/x.json", "file:///etc/passwd",
                                 "other.json#/x"])
def test_a_schema_referring_outside_itself_is_refused_without_fetching(ref: str) -> None:
    with pytest.raises(fastjsonschema.JsonSchemaDefinitionException, match="leaves the schema"):
        compile_schema({"type": "object", "properties": {"a": {"$ref": ref}}})


def test_a_schema_that_is_not_one_is_refused() -> None:
    with pytest.raises(fastjsonschema.JsonSchemaDefinitionException):
        compile_schema({"type": "nonsense"})
    with pytest.raises(fastjsonschema.JsonSchemaDefinitionException):
        compile_schema(["not", "a", "schema"])


def schema_row(schema: Any, version: int = 1, scope: str = "*") -> NewestSchema:
    return NewestSchema(scope=scope, task="billing.charge", payload_version=version,
                        schema=msgspec.json.encode(schema).decode())


def test_a_verdict_records_the_version_and_a_schema_is_compiled_once_per_version() -> None:
    checker = PayloadSchemas(size=2)
    v1 = schema_row(msgspec.json.schema(Charge))
    assert checker.verdict(v1, {"amount": 1}) == Verdict(1, [])
    assert checker.verdict(v1, {}, root="jobs[2].payload") == Verdict(
        1, [{"field": "jobs[2].payload.amount", "message": "required field missing"}])
    assert list(checker._compiled) == [("*", "billing.charge", 1)]
    for version in (2, 3):  # the least recently used goes first
        checker.verdict(schema_row({"type": "object"}, version), {})
    assert list(checker._compiled) == [("*", "billing.charge", 2), ("*", "billing.charge", 3)]


def test_a_schema_that_fails_on_a_payload_refuses_it_rather_than_answering_500() -> None:
    verdict = PayloadSchemas().verdict(schema_row({"multipleOf": 0}), 5)
    assert verdict.payload_version == 1
    assert [e["field"] for e in verdict.errors] == ["payload"]
    assert "cannot check" in verdict.errors[0]["message"]


def test_a_bad_regex_in_a_schema_is_a_definition_error() -> None:
    with pytest.raises(fastjsonschema.JsonSchemaDefinitionException, match="not a usable"):
        compile_schema({"type": "string", "pattern": "("})
