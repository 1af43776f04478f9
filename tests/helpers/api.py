"""The public API as the integration tests call it: the admin key, bearer headers, a tenant made
through the API, API keys, and the RFC 9457 problem check."""

from __future__ import annotations

from typing import Any

import httpx

ADMIN = "test-admin-key"
GATEWAY_BASE = "http://gateway.test"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def tenant(client: httpx.AsyncClient, name: str) -> str:
    r = await client.post("/v1/tenants", json={"name": name}, headers=auth(ADMIN))
    assert r.status_code == 201, r.text
    assert r.json()["api_key"].startswith("ost_")
    return r.json()["api_key"]


def assert_problem(r: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["type"].startswith("https://")
    assert body["title"] and body["detail"]
    if field is not None:
        assert field in [e["field"] for e in body["errors"]], body
    return body


async def issue(client: httpx.AsyncClient, key: str, role: str, name: str | None = None,
                **extra: Any) -> dict[str, Any]:
    r = await client.post("/v1/keys", json={"name": name or role, "role": role, **extra},
                          headers=auth(key))
    assert r.status_code == 201, r.text
    return r.json()
