"""`POST /v1/worker/tasks`: a worker registers the payload schema of each task it serves, before
its first claim (`ostinato.wire.worker` has the wire types, `ostinato.sdk.registration` the
worker's side).

The schemas go to `task_schemas` under the worker's scope (its key's tenant, or `*` for the
admin key: a shared worker's schemas hold for every tenant without its own), all or none, in
one statement (`stores.task_schemas.register`). Each schema must compile (the API validates
submissions with it) and stay within `MAX_SCHEMA_BYTES`, else 422 naming the item; a
(task, payload_version) already registered in the scope with other JSON is refused with 409
`payload-schema-conflict`: an incompatible change takes a new payload version, so a run queued
under the old one keeps the meaning its submitter validated. Refusals are logged and counted
(`ostinato_task_schemas_refused_total{reason}`); the worker fails to start on them.
"""

from __future__ import annotations

import uuid

import fastjsonschema
import msgspec
from litestar import Request, Response
from prometheus_client import Counter

from ostinato.domain.errors import PROBLEM_BASE
from ostinato.jobs.payloads import compile_schema
from ostinato.runtime.problems import problem
from ostinato.stores import task_schemas
from ostinato.telemetry.logging import get_logger
from ostinato.wire import worker as p

log = get_logger("ostinato.gateway")
SCHEMAS_REFUSED = Counter("ostinato_task_schemas_refused_total",
                          "Task payload schema registrations the gateway refused.", ["reason"])
_json = msgspec.json.Encoder()


def _refused(request: Request, status: int, code: str, title: str,
             errors: list[dict[str, str]], worker_id: str, scope: str) -> Response[bytes]:
    SCHEMAS_REFUSED.labels(reason=code).inc()
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:10])
    log.warning("task schema registration refused", worker_id=worker_id, scope=scope,
                reason=code, errors=errors[:10])
    return problem(status, PROBLEM_BASE + code, title, detail, request, errors=errors)


async def register_tasks(request: Request, tenant_id: uuid.UUID | None,
                         data: p.RegisterTasksRequest) -> Response[bytes]:
    """Register the payload schemas of the worker's tasks in its scope (`tenant_id`, None: the
    shared one), all or none: 422 for a schema that cannot be used, 409 when a (task,
    payload_version) is registered already with another schema."""
    scope = "*" if tenant_id is None else str(tenant_id)
    errors: list[dict[str, str]] = []
    definitions: list[task_schemas.SchemaDefinition] = []
    seen: dict[tuple[str, int], int] = {}  # (task, payload version) -> its item's index
    for i, item in enumerate(data.tasks):
        field = f"tasks[{i}]"
        if item.payload_schema is None:
            continue  # a task without a payload type: nothing to register
        version = item.payload_version or 1
        if (item.task, version) in seen:
            errors.append({"field": f"{field}.payload_version",
                           "message": f"task {item.task!r} version {version} given twice"})
            continue
        seen[(item.task, version)] = i
        text = _json.encode(item.payload_schema).decode()
        if len(text) > p.MAX_SCHEMA_BYTES:
            errors.append({"field": f"{field}.payload_schema",
                           "message": f"larger than {p.MAX_SCHEMA_BYTES} bytes"})
            continue
        try:
            compile_schema(item.payload_schema)
        except fastjsonschema.JsonSchemaDefinitionException as exc:
            errors.append({"field": f"{field}.payload_schema",
                           "message": f"not a usable JSON Schema: {exc}"})
            continue
        definitions.append(task_schemas.SchemaDefinition(item.task, version, text))
    if errors:
        return _refused(request, 422, "invalid-input", "Invalid task schemas", errors,
                        data.worker_id, scope)
    state = request.app.state
    async with state.pool.acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        try:
            held = await task_schemas.register(conn, tenant_id, definitions,
                                               state.clock.db_now())
        except BaseException:
            await transaction.rollback()
            raise
        kept = {(s.task, s.payload_version) for s in held}
        conflicts = [d for d in definitions if (d.task, d.payload_version) not in kept]
        if conflicts:  # nothing is registered: the worker must not start half-declared
            await transaction.rollback()
            return _refused(request, 409, "payload-schema-conflict", "Payload schema conflict", [
                {"field": f"tasks[{seen[(c.task, c.payload_version)]}].payload_schema",
                 "message": f"task {c.task!r} payload_version {c.payload_version} is registered "
                            "with a different schema in this scope; bump payload_version for an "
                            "incompatible change"} for c in conflicts],
                data.worker_id, scope)
        await transaction.commit()
    created = [s for s in held if s.created]
    if created:
        log.info("task schemas registered", worker_id=data.worker_id, scope=scope,
                 schemas={s.task: s.payload_version for s in created})
    body = p.RegisterTasksResponse(scope=scope, schemas=[
        p.RegisteredSchema(task=s.task, payload_version=s.payload_version, created=s.created)
        for s in held])
    return Response(_json.encode(body), status_code=200, media_type="application/json")
