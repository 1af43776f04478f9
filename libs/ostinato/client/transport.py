"""What both clients share around httpx: where to connect, how to authenticate, how an
answer becomes a value or an `ApiError`, and when a call is sent again (one place, so sync and
async decode and retry alike).

Retries: a call that is safe to send again (`retry_safe`: a GET, or a call carrying an
idempotency or request key) is retried after a 503 (the API's database restarting or failing
over) or a connection refused, reset or closed before an answer, up to `retries` times (3 by
default; 0 turns it off), waiting `retry_delay`: at least the answer's `Retry-After`, else a
doubling backoff with jitter. Anything else is raised at once.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import httpx
import msgspec

from ostinato.client.calls import Call, query
from ostinato.client.config import DEFAULT_API_URL
from ostinato.client.errors import ApiError, ApiUnreachable, Problem

USER_AGENT = "ostinato-client/0.1"
ACT_FOR_TENANT = "X-Ostinato-Tenant"
DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 3
RETRY_STATUSES = frozenset({503})  # the API could not serve now; nothing was done
FIRST_BACKOFF = 0.25  # seconds before the first retry without a Retry-After, then doubling
MAX_BACKOFF = 4.0
MAX_RETRY_AFTER = 30.0  # a server asking for longer is answered with the error, not a wait
# Failures before any answer: the connection refused, reset or closed under the request.
RETRY_ERRORS: tuple[type[httpx.HTTPError], ...] = (
    httpx.ConnectError, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


def base_url(url: str | None) -> str:
    """The argument, else OSTINATO_API_URL, else the local default."""
    return (url or os.environ.get("OSTINATO_API_URL") or DEFAULT_API_URL).rstrip("/")


def api_key(key: str | None) -> str | None:
    """The argument, else OSTINATO_API_KEY; None sends no key (the API answers 401)."""
    return key or os.environ.get("OSTINATO_API_KEY") or None


def tenant(tenant_id: object | None) -> str | None:
    """The argument (a tenant's id), else OSTINATO_TENANT; None names no tenant (a tenant's
    key needs none)."""
    return str(tenant_id) if tenant_id else os.environ.get("OSTINATO_TENANT") or None


def headers(key: str | None, extra: dict[str, str] | None,
            act_for: str | None = None) -> dict[str, str]:
    """`act_for`: the tenant id the admin key acts for (X-Ostinato-Tenant)."""
    out = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if key:
        out["Authorization"] = f"Bearer {key}"
    if act_for:
        out[ACT_FOR_TENANT] = act_for
    return {**out, **(extra or {})}


def request_args(call: Call[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"params": query(call.params)}
    if call.timeout is not None:
        out["timeout"] = call.timeout
    heads = dict(call.headers or {})
    if call.body is not None:
        out["content"] = call.body
        heads["Content-Type"] = "application/json"
    if heads:
        out["headers"] = heads
    return out


def unreachable(url: str, exc: httpx.HTTPError) -> ApiUnreachable:
    return ApiUnreachable(url, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def decode(call: Call[Any], response: httpx.Response) -> Any:
    """The answer's value, or the problem it carries raised as `ApiError`."""
    if response.status_code >= 400:
        raise ApiError.from_response(response.status_code,
                                     response.headers.get("content-type", ""), response.content)
    if call.answer is None or response.status_code == 204:
        return None
    try:
        return msgspec.json.decode(response.content, type=call.answer)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ApiError(Problem(status=response.status_code, title="Unexpected answer",
                               detail=f"{call.method} {call.path}: {exc}")) from exc


def retry_safe(call: Call[Any]) -> bool:
    """Whether sending `call` again cannot do twice what once would: reads, and calls that
    carry a key the API dedupes by (`calls.Call.idempotent`)."""
    return call.method in ("GET", "HEAD") or call.idempotent


def retry_delay(attempt: int, retry_after: str | None,
                jitter: Callable[[], float] = random.random) -> float | None:
    """Seconds to wait before retry number `attempt` (1, 2, ...): the answer's `Retry-After`
    (whole seconds) when it gave one, never less than a backoff doubling from FIRST_BACKOFF to
    MAX_BACKOFF with equal jitter (half fixed, half random, so a fleet of clients spreads out).
    None: do not retry, the server asked for more than MAX_RETRY_AFTER."""
    ceiling = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** max(0, attempt - 1))
    backoff = ceiling / 2 + jitter() * ceiling / 2
    try:
        asked = float(retry_after) if retry_after is not None else 0.0
    except ValueError:  # an HTTP-date: not what the API sends; the backoff alone
        asked = 0.0
    if asked > MAX_RETRY_AFTER:
        return None
    return max(asked, backoff)


def next_delay(call: Call[Any], attempt: int, retries: int,
               answer: httpx.Response | httpx.HTTPError) -> float | None:
    """Seconds to wait before sending `call` again as retry number `attempt`, after `answer`
    (a response, or the error that came instead of one); None: don't, raise or decode it."""
    if attempt > retries or not retry_safe(call):
        return None
    if isinstance(answer, httpx.Response):
        if answer.status_code not in RETRY_STATUSES:
            return None
        return retry_delay(attempt, answer.headers.get("retry-after"))
    return retry_delay(attempt, None) if isinstance(answer, RETRY_ERRORS) else None


def check_retries(retries: int) -> int:
    if not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
    return retries
