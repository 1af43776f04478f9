"""Payload schemas at submission: a payload is checked against its task's registered JSON Schema
before anything is written, and the version it was checked against is recorded with the job.

Which schema: the newest `payload_version` registered for the task in the submitting tenant's
own scope, else in the shared scope (`*`, schemas of shared workers); a task with none is
accepted as before (version None). Looked up with one query per submission request, whatever
the number of jobs in it (`stores.task_schemas.newest`); schemas are compiled with
fastjsonschema once per (scope, task, payload_version) and process: a registered version's
schema never changes (the gateway refuses other JSON under it), so a compiled validator never
goes stale.

A payload that does not match is an `InvalidInput` (422) whose errors name each field by its
path from the request body (`payload.amount: must be integer`, `jobs[3].payload.lines[0].qty:
...`), counted in `ostinato_payloads_rejected_total{path}`.

Compiled schemas never fetch anything: `$ref`s outside the document are refused (a schema is
tenant input, and fastjsonschema would otherwise resolve a remote `$ref` with urllib), defaults
are not written into the payload, and formats are checked where fastjsonschema knows them
(`date-time`, `date`, `uuid`, ...); others (msgspec's `duration`, `decimal`) are not.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import asyncpg
import fastjsonschema
import msgspec
from prometheus_client import Counter

from ostinato.stores import task_schemas
from ostinato.telemetry.logging import get_logger

__all__ = ["PAYLOADS_REJECTED", "PayloadSchemas", "Verdict", "compile_schema", "schemas"]

MAX_ERRORS: Final = 20  # field errors reported per payload
CACHE_SIZE: Final = 4096  # compiled validators kept per process
log = get_logger("ostinato.payloads")
PAYLOADS_REJECTED = Counter(
    "ostinato_payloads_rejected_total",
    "Payloads refused at submission because they do not match their task's payload schema.",
    ["path"],
)
Validator = Callable[[Any], Any]


class _NoRemoteRefs(dict[str, Callable[[str], Any]]):
    """fastjsonschema's `handlers`: every URI scheme is "handled", by refusing it."""

    def __contains__(self, scheme: object) -> bool:
        return True

    def __getitem__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse_remote


def _refuse_remote(uri: str) -> Any:
    raise fastjsonschema.JsonSchemaDefinitionException(
        f"$ref {uri!r} leaves the schema: only references inside it (#/...) are allowed")


_NO_REMOTE = _NoRemoteRefs()


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def compile_schema(schema: Any) -> Validator:
    """A validator for `schema` (a JSON Schema document, draft 4 to 7, as msgspec writes
    them); raises `fastjsonschema.JsonSchemaDefinitionException` for a schema that is not one,
    or that refers outside itself."""
    if not isinstance(schema, dict | bool):
        raise fastjsonschema.JsonSchemaDefinitionException("a schema is an object or a boolean")
    for ref in _refs(schema):
        if not ref.startswith("#"):
            _refuse_remote(ref)
    document = msgspec.json.decode(msgspec.json.encode(schema))  # compile rewrites $refs in place
    try:
        return fastjsonschema.compile(document, handlers=_NO_REMOTE, use_default=False,
                                      fast_fail=False)
    except fastjsonschema.JsonSchemaDefinitionException:
        raise
    except Exception as exc:  # tenant input: a bad regex (re.error), a malformed keyword, ...
        raise fastjsonschema.JsonSchemaDefinitionException(
            f"not a usable schema: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class Verdict:
    """One payload checked: the version to record (None: the task has no schema) and the field
    errors (empty: accepted), fields named from the item's root (`payload....`)."""

    payload_version: int | None
    errors: list[dict[str, str]]


_ACCEPTED = Verdict(None, [])


def _field(name: str | None, root: str) -> str:
    """fastjsonschema's `data.lines[0].qty` as `payload.lines[0].qty`."""
    name = name or "data"
    return root + name[len("data"):] if name.startswith("data") else f"{root}.{name}"


def _errors(exc: fastjsonschema.JsonSchemaValueException | fastjsonschema.JsonSchemaValuesException,
            root: str) -> list[dict[str, str]]:
    found = exc.errors if isinstance(exc, fastjsonschema.JsonSchemaValuesException) else [exc]
    errors: list[dict[str, str]] = []
    for error in found:
        field = _field(error.name, root)
        value, definition = error.value, error.definition if isinstance(error.definition,
                                                                         dict) else {}
        if error.rule == "required" and isinstance(value, dict):
            errors += [{"field": f"{field}.{key}", "message": "required field missing"}
                       for key in definition.get("required", []) if key not in value]
            continue
        if (error.rule == "additionalProperties" and isinstance(value, dict)
                and not definition.get("patternProperties")):
            known = definition.get("properties", {})
            errors += [{"field": f"{field}.{key}", "message": "unknown field"}
                       for key in value if key not in known]
            continue
        message = error.message
        prefix = (error.name or "data") + " "
        if message.startswith(prefix):
            message = message[len(prefix):]
        errors.append({"field": field, "message": message})
    return errors[:MAX_ERRORS] or [{"field": root, "message": exc.message}]


class PayloadSchemas:
    """Validators compiled from registered schemas, cached per (scope, task, payload_version)
    in this process (least recently used first out, past `size`)."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._compiled: OrderedDict[tuple[str, str, int], Validator | None] = OrderedDict()

    def _validator(self, found: task_schemas.NewestSchema) -> Validator | None:
        key = (found.scope, found.task, found.payload_version)
        if key in self._compiled:
            self._compiled.move_to_end(key)
            return self._compiled[key]
        try:
            validator: Validator | None = compile_schema(msgspec.json.decode(found.schema))
        except (fastjsonschema.JsonSchemaDefinitionException, msgspec.DecodeError) as exc:
            # the gateway compiles every schema before it stores one: only a schema stored by
            # another fastjsonschema version can get here. Record the version, check nothing.
            log.error("payload schema does not compile; payloads of its task are not checked",
                      scope=found.scope, task=found.task,
                      payload_version=found.payload_version, error=str(exc),
                      alert="ostinato_payload_schema_unusable")
            validator = None
        self._compiled[key] = validator
        while len(self._compiled) > self._size:
            self._compiled.popitem(last=False)
        return validator

    def verdict(self, found: task_schemas.NewestSchema, payload: Any,
                root: str = "payload") -> Verdict:
        """`payload` checked against the schema `found` (compiled on first use)."""
        validator = self._validator(found)
        errors: list[dict[str, str]] = []
        if validator is not None:
            try:
                validator(payload)
            except (fastjsonschema.JsonSchemaValueException,
                    fastjsonschema.JsonSchemaValuesException) as exc:
                errors = _errors(exc, root)
            except RecursionError:  # a recursive schema over a very deep payload
                errors = [{"field": root, "message": "nested too deeply to check"}]
            except Exception as exc:  # the schema's own fault (multipleOf 0, ...): refuse
                errors = [{"field": root, "message": "the task's payload schema cannot "
                           f"check this payload ({type(exc).__name__}: {exc})"}]
        return Verdict(found.payload_version, errors)

    async def check(self, conn: asyncpg.Connection, tenant_id: uuid.UUID,
                    items: Sequence[tuple[str, Any]], *, path: str = "submission",
                    root: str = "payload") -> list[Verdict]:
        """One verdict per (task, payload) item, in order; one query for all of them."""
        if not items:
            return []
        newest = {s.task: s for s in await task_schemas.newest(conn, tenant_id,
                                                                [t for t, _ in items])}
        if not newest:
            return [_ACCEPTED] * len(items)
        verdicts: list[Verdict] = []
        for task, payload in items:
            found = newest.get(task)
            verdict = _ACCEPTED if found is None else self.verdict(found, payload, root)
            if verdict.errors:
                PAYLOADS_REJECTED.labels(path=path).inc()
                log.info("payload refused by its task's schema", tenant_id=str(tenant_id),
                         task=task, payload_version=verdict.payload_version,
                         scope=found.scope if found else None, errors=verdict.errors[:3])
            verdicts.append(verdict)
        return verdicts


schemas = PayloadSchemas()  # the process's cache: every submission path of a service shares it
