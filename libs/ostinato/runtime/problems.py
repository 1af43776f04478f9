"""The one mapping from errors to RFC 9457 problem details, shared by the API and the gateway.

Every error response is `application/problem+json` with a stable `type` URI; field errors go in
an `errors` extension member as `[{"field": ..., "message": ...}]`. A database that cannot serve
for a moment (restarting, failing over, out of connections) is a 503 `service-unavailable` with
`Retry-After`, which the client and the SDK retry, never a 500.
"""

from __future__ import annotations

import math
import re
from typing import Any

import asyncpg
import msgspec
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException

from ostinato.db.sqlstate import is_unavailable
from ostinato.domain.errors import (
    PROBLEM_BASE,
    OstinatoError,
    RateLimited,
    ServiceUnavailable,
)
from ostinato.telemetry.logging import RateLimitedLogger

PROBLEM_JSON = "application/problem+json"
RETRY_AFTER_SECONDS = 1  # a restart or a failover is over in seconds: ask again soon
# Every request fails alike while the database is down (82 in a 1 s restart): one line per
# 10 s per kind of error, with the count held back.
log = RateLimitedLogger("ostinato.http")
UNSTORABLE_TEXT = (asyncpg.CharacterNotInRepertoireError, asyncpg.UntranslatableCharacterError)
UNSTORABLE = "a text value holds a character that cannot be stored (U+0000, NUL)"
TOO_DEEP = "the body is nested too deeply"
_NAMED_FIELD = re.compile(r"(?:unknown|missing required) field `([^`]+)`")

_HTTP_TYPES = {400: "bad-request", 401: "unauthorized", 403: "forbidden", 404: "not-found",
               405: "method-not-allowed", 409: "conflict", 413: "payload-too-large",
               415: "unsupported-media-type", 429: "too-many-requests"}


def problem(status: int, type_: str, title: str, detail: str, request: Request | None = None,
            **extra: Any) -> Response[bytes]:
    body: dict[str, Any] = {"type": type_, "title": title, "status": status, "detail": detail}
    if request is not None:
        body["instance"] = request.url.path
    body.update({k: v for k, v in extra.items() if v is not None})
    return Response(msgspec.json.encode(body), status_code=status, media_type=PROBLEM_JSON)


def _field_errors(extra: Any) -> list[dict[str, str]]:
    errors: list[dict[str, str]] = []
    for item in extra if isinstance(extra, list) else []:
        if not isinstance(item, dict):
            continue
        message = str(item.get("message", "invalid"))
        field = str(item.get("key", "")) or "body"
        named = _NAMED_FIELD.search(message)
        if named:
            field = named.group(1) if field in ("body", "data") else f"{field}.{named.group(1)}"
        errors.append({"field": field, "message": message})
    return errors


def on_ostinato_error(request: Request, exc: OstinatoError) -> Response[bytes]:
    response = problem(exc.status, exc.problem_type, exc.title, exc.detail, request, **exc.extra)
    if isinstance(exc, RateLimited | ServiceUnavailable):  # when to ask again
        response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_seconds)))
    return response


def _validation_detail(exc: ValidationException, errors: list[dict[str, str]]) -> str:
    return "; ".join(f"{e['field']}: {e['message']}" for e in errors) or str(exc.detail)


def on_validation_error(request: Request, exc: ValidationException) -> Response[bytes]:
    errors = _field_errors(exc.extra)
    fields = ", ".join(e["field"] for e in errors) or "request"
    detail = _validation_detail(exc, errors)
    status = 422 if errors else 400
    return problem(status, PROBLEM_BASE + "invalid-input", f"Invalid {fields}", detail, request,
                   errors=errors or None)


def on_http_error(request: Request, exc: HTTPException) -> Response[bytes]:
    code = _HTTP_TYPES.get(exc.status_code, "http-error")
    response = problem(exc.status_code, PROBLEM_BASE + code,
                       code.replace("-", " ").capitalize(), str(exc.detail), request)
    for name, value in (exc.headers or {}).items():  # a 405's Allow, a 429's Retry-After
        response.headers[name] = value
    return response


def on_too_deep(request: Request, exc: RecursionError) -> Response[bytes]:
    """A body nested deeper than decoding or validation can follow (thousands of levels):
    refused like any malformed body, never a 500."""
    return problem(400, PROBLEM_BASE + "bad-request", "Bad request", TOO_DEEP, request)


def status_of(exc: BaseException) -> int:
    """The status the handlers below answer `exc` with (the audit trail records it)."""
    if isinstance(exc, OstinatoError):
        return exc.status
    if isinstance(exc, ValidationException):
        return 422 if _field_errors(exc.extra) else 400
    if isinstance(exc, HTTPException):
        return exc.status_code
    if isinstance(exc, UNSTORABLE_TEXT):
        return 400  # a NUL in text (on_unstorable_text)
    if isinstance(exc, RecursionError):
        return 400
    return 503 if is_unavailable(exc) else 500


def detail_of(exc: BaseException) -> str:
    """The detail the handlers below answer `exc` with (the audit trail records it); an
    unexpected error's is its type's name, never its text."""
    if isinstance(exc, OstinatoError):
        return exc.detail
    if isinstance(exc, ValidationException):
        return _validation_detail(exc, _field_errors(exc.extra))
    if isinstance(exc, HTTPException):
        return str(exc.detail)
    if isinstance(exc, UNSTORABLE_TEXT):
        return UNSTORABLE
    return TOO_DEEP if isinstance(exc, RecursionError) else type(exc).__name__


def on_unstorable_text(request: Request, exc: asyncpg.PostgresError) -> Response[bytes]:
    """A string holding U+0000 (NUL), which PostgreSQL text and jsonb cannot store: refused
    like any malformed input; the statement failed, so its transaction changed nothing."""
    return problem(400, PROBLEM_BASE + "bad-request", "Bad request", UNSTORABLE, request)


def on_unavailable(request: Request, exc: Exception) -> Response[bytes]:
    """The database cannot serve now (`sqlstate.is_unavailable`): a 503 to retry after
    `Retry-After`, logged as a warning without a traceback. A request that carried an
    idempotency key may be sent again as it was: it cannot apply twice."""
    log.warning("database unavailable", exc, kind=_route(request), path=request.url.path,
                status=503)
    response = problem(
        503, PROBLEM_BASE + "service-unavailable", "Service unavailable",
        f"the database cannot serve this request now ({type(exc).__name__}); "
        f"retry after {RETRY_AFTER_SECONDS} s", request, retry_after_seconds=RETRY_AFTER_SECONDS)
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def on_unexpected_error(request: Request, exc: Exception) -> Response[bytes]:
    if is_unavailable(exc):
        return on_unavailable(request, exc)
    log.error("unhandled error", exc, kind=_route(request), path=request.url.path,
              exc_info=exc)
    return problem(500, PROBLEM_BASE + "internal", "Internal error",
                   "an unexpected error occurred; it has been logged", request)


def _route(request: Request) -> str:
    """The route template (`/v1/jobs/{job_id}`): one kind of repeated line per route."""
    return str(request.scope.get("path_template") or request.url.path)


EXCEPTION_HANDLERS: dict[Any, Any] = {
    OstinatoError: on_ostinato_error,
    ValidationException: on_validation_error,
    HTTPException: on_http_error,
    RecursionError: on_too_deep,
    **dict.fromkeys(UNSTORABLE_TEXT, on_unstorable_text),
    Exception: on_unexpected_error,
}

__all__ = ["EXCEPTION_HANDLERS", "PROBLEM_JSON", "RETRY_AFTER_SECONDS", "MediaType", "problem",
           "status_of"]
