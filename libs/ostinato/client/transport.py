"""What both clients share around httpx: where to connect, how to authenticate, and how an
answer becomes a value or an `ApiError` (one place, so sync and async decode alike)."""

from __future__ import annotations

import os
from typing import Any

import httpx
import msgspec

from ostinato.client.calls import Call, query
from ostinato.client.config import DEFAULT_API_URL
from ostinato.client.errors import ApiError, ApiUnreachable, Problem

USER_AGENT = "ostinato-client/0.1"
ACT_FOR_TENANT = "X-Ostinato-Tenant"
DEFAULT_TIMEOUT = 30.0


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
