"""The HTTP contract every Litestar app of ours keeps, applied to all its routes at once
(`apply_contract`), so a route added anywhere is covered without saying so:

- the OpenAPI document names the error answers each operation really gives, as RFC 9457
  `application/problem+json` with one `ProblemDetails` schema (Litestar alone documents a 400
  with its own JSON shape, which the app never sends), which operations need no bearer key, the
  200 of a create sent again, and what Litestar leaves out of the msgspec models: the range of
  an optional number, `additionalProperties: false` of a model refusing unknown fields, an
  optional body;
- `OPTIONS` on a path lists every method of the path (Litestar's own answer lists only those of
  the first handler registered there when several modules share a path).

The rules deciding which errors an operation answers are `error_statuses`, a plain function.
docs/API.md is the contract as users read it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

import msgspec
from litestar import Litestar, Response
from litestar._openapi.plugin import OpenAPIPlugin
from litestar.datastructures import MutableScopeHeaders
from litestar.enums import HttpMethod
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.spec import (
    OpenAPI,
    OpenAPIFormat,
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    Reference,
    RequestBody,
    Schema,
)
from litestar.routes import HTTPRoute
from litestar.types import Message, Scope

from ostinato.runtime.problems import PROBLEM_JSON

RATE_LIMITED = "contract_rate_limited"  # app state: the key check answers 429
AUTHENTICATED_BY = frozenset({"caller", "tenant"})  # the dependencies that check the bearer key
PROBLEM_REF = "#/components/schemas/ProblemDetails"  # the SDK has a `Problem` of its own

REASONS = {
    400: "Malformed request: not JSON, nested too deeply, a text holding U+0000, or a bad "
         "header or parameter",
    401: "No API key, or an unknown or revoked one",
    403: "The key's role may not do this, or it acts for another tenant",
    404: "No such resource for this tenant",
    409: "Conflicts with the current state: a stale fencing token, an idempotency key reused "
         "with another request, a run not in a state that allows this",
    412: "If-Match names another version than the current one: read it again",
    413: "The body is longer than the API accepts",
    422: "A field or parameter is invalid or unknown; `errors` names each one",
    424: "The run's archive object cannot be read (`archive-unreadable`: corrupt, or not "
         "the run its key names); docs/RETENTION.md",
    429: "Over this key's request rate; `Retry-After` says when to try again",
    503: "The database cannot serve for a moment (restarting, failing over); `Retry-After` "
         "says when to send it again",
}


def error_statuses(*, authenticated: bool, method: str, has_body: bool,
                   has_parameters: bool, rate_limited: bool = True) -> list[int]:
    """The problem statuses one operation answers, from what its handler takes. One with a
    key, a parameter or a body also answers 422 to a query parameter it does not take
    (`parameters`; none of our documented operations reads no key)."""
    statuses: set[int] = {400, 422} if authenticated or has_parameters or has_body else set()
    if authenticated:
        statuses |= {401, 403, 404}  # 404: also a tenant named by the admin key
        if rate_limited:
            statuses.add(429)
        statuses.add(503)  # the key is checked in the database, which may be away a moment
    if has_parameters or has_body:
        statuses |= {404, 422}
    if method not in ("GET", "HEAD"):
        statuses.add(409)
    if has_body or method in ("POST", "PUT", "PATCH"):
        statuses.add(413)
    if method == "PATCH":  # an edit takes If-Match (the version its ETag gave)
        statuses.add(412)
    return sorted(statuses)


def problem_schema() -> Schema:
    text = Schema(type=OpenAPIType.STRING)
    return Schema(
        type=OpenAPIType.OBJECT,
        description="RFC 9457 problem details; further members are extensions.",
        required=["type", "title", "status", "detail"],
        properties={
            "type": Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.URI),
            "title": text,
            "status": Schema(type=OpenAPIType.INTEGER, minimum=400, maximum=599),
            "detail": text,
            "instance": text,
            "errors": Schema(type=OpenAPIType.ARRAY, items=Schema(
                type=OpenAPIType.OBJECT, required=["field", "message"],
                properties={"field": text, "message": text})),
        },
    )


def _problem_response(status: int) -> OpenAPIResponse:
    headers: dict[str, OpenAPIHeader | Reference] | None = None
    if status in (429, 503):
        headers = {"Retry-After": OpenAPIHeader(
            description="Seconds to wait", required=True,
            schema=Schema(type=OpenAPIType.INTEGER, minimum=1, maximum=86_400))}
    return OpenAPIResponse(
        description=REASONS.get(status, "Problem details"), headers=headers,
        content={PROBLEM_JSON: OpenAPIMediaType(schema=Reference(ref=PROBLEM_REF))})


def _handlers(routes: Iterable[Any]) -> Iterable[tuple[str, HTTPRouteHandler]]:
    for route in routes:
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                yield route.path_format or "/", handler


def reads_key(handler: HTTPRouteHandler) -> bool:
    """Whether the handler takes, directly or through its dependencies, the key check."""
    provided = handler.resolve_dependencies()
    wanted = list(handler.parsed_fn_signature.parameters)
    seen: set[str] = set()
    while wanted:
        name = wanted.pop()
        if name in AUTHENTICATED_BY:
            return True
        if name in seen or name not in provided:
            continue
        seen.add(name)
        wanted += list(provided[name].signature_model._fields)  # what the provider takes
    return False


def answers_own_status(handler: HTTPRouteHandler) -> bool:
    """A handler returning a `Response` sets its status itself: the ones that create (201, 202)
    answer 200 when the request was sent before."""
    return handler.parsed_fn_signature.return_type.is_subclass_of(Response)


def document_errors(openapi: OpenAPI, routes: Iterable[Any], *,
                    rate_limited: bool = True) -> OpenAPI:
    """Give every operation its problem answers and its security (none where no key is read)."""
    components = openapi.components
    components.schemas = {**(components.schemas or {}), "ProblemDetails": problem_schema()}
    for path, handler in _handlers(routes):
        item = (openapi.paths or {}).get(path)
        if item is None or not handler.include_in_schema:
            continue
        authenticated = reads_key(handler)
        for method in handler.http_methods:
            operation: Operation | None = getattr(item, method.lower(), None)
            if operation is None:
                continue
            responses = {code: answer for code, answer in (operation.responses or {}).items()
                         if not 400 <= int(code) < 600}  # Litestar's own 400 is not our shape
            for status in error_statuses(
                    authenticated=authenticated, method=str(method),
                    has_body=operation.request_body is not None,
                    has_parameters=bool(operation.parameters), rate_limited=rate_limited):
                responses[str(status)] = _problem_response(status)
            if handler.opt.get("reads_archive"):  # answers archived runs too (their objects)
                responses["424"] = _problem_response(424)
            success = responses.get(str(handler.status_code))
            if handler.status_code in (201, 202) and "200" not in responses and \
                    isinstance(success, OpenAPIResponse) and answers_own_status(handler):
                responses["200"] = OpenAPIResponse(
                    description="Sent before (the same idempotency or request key): "
                                "nothing new was done", content=success.content)
            operation.responses = responses
            body = handler.parsed_fn_signature.parameters.get("data")
            if isinstance(operation.request_body, RequestBody) and body is not None and \
                    body.has_default:
                operation.request_body.required = False  # `data: X | None = None`: optional
            if not authenticated:
                operation.security = []
    return openapi


def _structs(t: Any, found: dict[str, Any]) -> None:
    i = msgspec.inspect
    if isinstance(t, i.StructType):
        if t.cls.__name__ in found:
            return
        found[t.cls.__name__] = t
        for f in t.fields:
            _structs(f.type, found)
    elif isinstance(t, i.Metadata):
        _structs(t.type, found)
    elif isinstance(t, i.UnionType):
        for a in t.types:
            _structs(a, found)
    elif isinstance(t, i.ListType | i.SetType | i.FrozenSetType | i.VarTupleType):
        _structs(t.item_type, found)
    elif isinstance(t, i.DictType):
        _structs(t.value_type, found)


_BOUNDS = (("ge", "minimum"), ("le", "maximum"), ("gt", "exclusive_minimum"),
           ("lt", "exclusive_maximum"))


def _restore(schema: Schema, t: Any) -> None:
    """Copy the bounds of numbers and strings from msgspec type `t` into `schema`, the schema
    Litestar made of it, where Litestar left them out."""
    i = msgspec.inspect
    if isinstance(t, i.Metadata):
        _restore(schema, t.type)
    elif isinstance(t, i.UnionType):
        for member in schema.one_of or []:
            if isinstance(member, Schema):
                for a in t.types:
                    if _fits(member, a):
                        _restore(member, a)
    elif isinstance(t, i.IntType | i.FloatType) and schema.type in (OpenAPIType.INTEGER,
                                                                      OpenAPIType.NUMBER):
        for ours, theirs in _BOUNDS:
            if getattr(t, ours, None) is not None and getattr(schema, theirs) is None:
                setattr(schema, theirs, getattr(t, ours))
    elif isinstance(t, i.StrType) and schema.type == OpenAPIType.STRING:
        for ours, theirs in (("min_length", "min_length"), ("max_length", "max_length"),
                             ("pattern", "pattern")):
            if getattr(t, ours, None) is not None and getattr(schema, theirs) is None:
                setattr(schema, theirs, getattr(t, ours))
    elif isinstance(t, i.ListType | i.SetType | i.FrozenSetType | i.VarTupleType) and \
            isinstance(schema.items, Schema):
        _restore(schema.items, t.item_type)
    elif isinstance(t, i.DictType) and isinstance(schema.additional_properties, Schema):
        _restore(schema.additional_properties, t.value_type)


def _fits(schema: Schema, t: Any) -> bool:
    i = msgspec.inspect
    kinds = {OpenAPIType.INTEGER: (i.IntType,), OpenAPIType.NUMBER: (i.FloatType, i.IntType),
             OpenAPIType.STRING: (i.StrType,),
             OpenAPIType.ARRAY: (i.ListType, i.SetType, i.FrozenSetType, i.VarTupleType),
             OpenAPIType.OBJECT: (i.DictType,)}
    return isinstance(t.type if isinstance(t, i.Metadata) else t, kinds.get(schema.type, ()))


_RULE_KEYS = {"oneOf": "one_of", "anyOf": "any_of", "allOf": "all_of", "required": "required",
              "properties": "properties", "type": "type"}


def rule_schema(rule: dict[str, Any]) -> Schema:
    """A model's `SCHEMA_RULES` (JSON Schema as a dict, since models import no Litestar) as
    Litestar's `Schema`; a key not in `_RULE_KEYS` is a KeyError, never silently dropped."""
    schema = Schema()
    for key, value in rule.items():
        if key in ("oneOf", "anyOf", "allOf"):
            value = [rule_schema(v) for v in value]
        elif key == "properties":
            value = {name: rule_schema(v) for name, v in value.items()}
        elif key == "type":
            value = OpenAPIType(value)
        setattr(schema, _RULE_KEYS[key], value)
    return schema


def restore_model_rules(openapi: OpenAPI, routes: Iterable[Any]) -> OpenAPI:
    """Litestar drops the range of an optional number (`Annotated[int, Meta(ge=1)] | None`
    loses its `ge`) and never says that a model refuses unknown fields; put both back from the
    msgspec models, so the document says what the API enforces. A rule across fields that the
    server enforces after decoding (a schedule's one of `at`, `cron`, `every`) is a model's
    `SCHEMA_RULES` class variable, added here."""
    found: dict[str, Any] = {}
    for _, handler in _handlers(routes):
        for field in handler.parsed_fn_signature.parameters.values():
            with contextlib.suppress(TypeError, ValueError):
                _structs(msgspec.inspect.type_info(field.annotation), found)
        with contextlib.suppress(TypeError, ValueError):
            _structs(msgspec.inspect.type_info(handler.parsed_fn_signature.return_type
                                               .annotation), found)
    schemas = openapi.components.schemas or {}
    for name, struct in found.items():
        component = schemas.get(name)
        if isinstance(component, Schema) and struct.forbid_unknown_fields:
            component.additional_properties = False  # an unknown field is a 422
        rules = getattr(struct.cls, "SCHEMA_RULES", None)
        if isinstance(component, Schema) and rules:
            extra = rule_schema(rules)
            for key in ("one_of", "any_of", "all_of"):
                if getattr(extra, key) is not None:
                    setattr(component, key, getattr(extra, key))
        if isinstance(component, Schema) and component.properties:
            for f in struct.fields:
                prop = component.properties.get(f.encode_name)
                if isinstance(prop, Schema):
                    _restore(prop, f.type)
    return openapi


class _ContractOpenAPIPlugin(OpenAPIPlugin):
    __slots__ = ()

    def _build_openapi(self) -> OpenAPI:
        openapi = super()._build_openapi()
        rate_limited = bool(self.app.state.get(RATE_LIMITED, True))
        return restore_model_rules(document_errors(openapi, self.app.routes,
                                                   rate_limited=rate_limited), self.app.routes)


def _allow_every_method(app: Litestar) -> None:
    allow: dict[int, str] = {}
    for _, handler in _handlers(app.routes):
        if HttpMethod.OPTIONS in handler.http_methods:
            route = next(r for r in app.routes if isinstance(r, HTTPRoute)
                         and handler in r.route_handlers)
            allow[id(handler)] = ", ".join(sorted(route.methods))

    async def before_send(message: Message, scope: Scope) -> None:
        if message["type"] == "http.response.start" and scope.get("method") == "OPTIONS":
            methods = allow.get(id(scope.get("route_handler")))
            if methods:
                MutableScopeHeaders.from_message(message)["allow"] = methods

    app.before_send.append(before_send)


def apply_contract(app: Litestar, *, rate_limited: bool = True) -> Litestar:
    """`rate_limited`: whether the app's key check answers 429 (the API's does, the
    worker-gateway's does not)."""
    app.state[RATE_LIMITED] = rate_limited
    plugin = app.plugins.get(OpenAPIPlugin)
    plugin.__class__ = _ContractOpenAPIPlugin  # same slots: only the document builder changes
    _allow_every_method(app)
    return app
