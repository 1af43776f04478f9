"""Date-times on the wire are RFC 3339 strings with an offset, nothing else.

Litestar converts request values with msgspec in its lax mode (query strings must become
numbers), and lax msgspec takes an integer for a datetime (`"at": 0` is 1970-01-01) and a
date-time without an offset (a naive local time, which no schedule can place). This check runs
before a route parses its input: every datetime field of the route's body type (found from the
type, so every model is covered) and every datetime query parameter must be such a string,
else a 422 problem names the field. A type without datetimes costs nothing per request.
The same hook refuses a query parameter the route does not take (`parameters`), in the same
422.

On a route that takes an API key the 422 waits for the key check (`raise_pending`, called by
every key dependency once the caller is authenticated and authorized): a caller without a valid
key gets its 401 (or 403) first, never an answer about its body.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import msgspec
from litestar import Request
from litestar.exceptions import SerializationException
from litestar.handlers import HTTPRouteHandler
from litestar.params import BodyKwarg

from ostinato.domain.errors import InvalidInput
from ostinato.runtime.contract import reads_key
from ostinato.runtime.parameters import unknown_parameter_errors

RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})$")
MESSAGE = "an RFC 3339 date-time with an offset, e.g. 2026-12-01T09:00:00Z"
PENDING = "ostinato_pending_instants"  # request state: the 422 held for after the key check


def _datetime_in(t: msgspec.inspect.Type, seen: frozenset[Any] = frozenset()) -> bool:
    i = msgspec.inspect
    if isinstance(t, i.DateTimeType):
        return True
    if isinstance(t, i.Metadata):
        return _datetime_in(t.type, seen)
    if isinstance(t, i.StructType | i.DataclassType | i.TypedDictType):
        if t.cls in seen:
            return False
        return any(_datetime_in(f.type, seen | {t.cls}) for f in t.fields)
    if isinstance(t, i.ListType | i.SetType | i.FrozenSetType | i.VarTupleType):
        return _datetime_in(t.item_type, seen)
    if isinstance(t, i.DictType):
        return _datetime_in(t.value_type, seen)
    if isinstance(t, i.UnionType):
        return any(_datetime_in(a, seen) for a in t.types)
    return False


_FIELDS: dict[Any, tuple[tuple[str, msgspec.inspect.Type], ...]] = {}


def _dated_fields(t: Any) -> tuple[tuple[str, msgspec.inspect.Type], ...]:
    """A struct type's fields that hold datetimes (wire name, type), found once per class."""
    found = _FIELDS.get(t.cls)
    if found is None:
        found = _FIELDS[t.cls] = tuple((getattr(f, "encode_name", f.name), f.type)
                                       for f in t.fields if _datetime_in(f.type))
    return found


def instant_errors(value: Any, t: msgspec.inspect.Type, path: str) -> list[dict[str, str]]:
    """The fields under `path` where `value` holds a datetime of type `t` that is not an RFC
    3339 string with an offset. Shapes that do not fit `t` are left to msgspec's own errors."""
    i = msgspec.inspect
    if isinstance(t, i.Metadata):
        return instant_errors(value, t.type, path)
    if isinstance(t, i.DateTimeType):
        ok = isinstance(value, str) and RFC3339.match(value) is not None
        return [] if ok else [{"field": path or "body", "message": f"expected {MESSAGE}"}]
    if isinstance(t, i.UnionType):
        if value is None:
            return []
        for alternative in t.types:
            if isinstance(alternative, i.DateTimeType | i.Metadata) and \
                    not isinstance(value, dict | list):
                return instant_errors(value, alternative, path)
        shaped = [a for a in t.types if _datetime_in(a)]
        return instant_errors(value, shaped[0], path) if len(shaped) == 1 else []
    if isinstance(t, i.StructType | i.DataclassType | i.TypedDictType) and \
            isinstance(value, dict):
        errors: list[dict[str, str]] = []
        for name, ft in _dated_fields(t):
            if name in value:
                errors += instant_errors(value[name], ft, f"{path}.{name}" if path else name)
        return errors
    if isinstance(t, i.ListType | i.SetType | i.FrozenSetType | i.VarTupleType) and \
            isinstance(value, list):
        return [e for n, item in enumerate(value)
                for e in instant_errors(item, t.item_type, f"{path}[{n}]")]
    if isinstance(t, i.DictType) and isinstance(value, dict):
        return [e for k, item in value.items()
                for e in instant_errors(item, t.value_type, f"{path}.{k}" if path else str(k))]
    return []


@functools.cache
def _inputs(handler: HTTPRouteHandler) -> tuple[msgspec.inspect.Type | None, tuple[str, ...]]:
    """The handler's body type when it holds datetimes, and its datetime query parameters."""
    body: msgspec.inspect.Type | None = None
    queries: list[str] = []
    for name, field in handler.parsed_fn_signature.parameters.items():
        try:
            info = msgspec.inspect.type_info(field.annotation)
        except (TypeError, ValueError):
            continue  # not a wire type (a dependency)
        if not _datetime_in(info):
            continue
        if name == "data" or isinstance(field.kwarg_definition, BodyKwarg):
            body = info
        else:
            kwarg = field.kwarg_definition  # its wire name: `QueryParameter(name="to")`
            queries.append(getattr(kwarg, "name", None) or getattr(kwarg, "query", None)
                           or name)
    return body, tuple(queries)


async def check_instants(request: Request) -> None:
    """A `before_request` hook: refuse non-RFC-3339 date-times and unknown query parameters
    before the route parses its input."""
    body_type, queries = _inputs(request.route_handler)  # type: ignore[arg-type]
    errors = unknown_parameter_errors(request)
    for name in queries:
        for raw in request.query_params.getall(name, []):
            if raw and RFC3339.match(raw) is None:
                errors.append({"field": name, "message": f"expected {MESSAGE}"})
    if body_type is not None and (await request.body()):
        try:
            value = await request.json()
        except SerializationException:
            value = None  # not JSON: the route's own parsing answers it (400)
        errors += instant_errors(value, body_type, "")
    if errors:
        exc = InvalidInput("; ".join(f"{e['field']}: {e['message']}" for e in errors),
                           errors=errors)
        if not _keyed(request.route_handler):  # type: ignore[arg-type]
            raise exc
        request.state[PENDING] = exc


@functools.cache
def _keyed(handler: HTTPRouteHandler) -> bool:
    return reads_key(handler)


def raise_pending(request: Request) -> None:
    """Raise the 422 `check_instants` held back, once the caller's key was accepted."""
    exc = request.state.get(PENDING)
    if exc is not None:
        raise exc

