"""Request ids (`runtime.request_ids`): a client's sane X-Request-Id is kept, anything else is
replaced by a fresh id; the answer carries it and the handler sees the same one."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from ostinato.runtime import request_ids
from ostinato.runtime.problems import status_of
from services.api.auditing import _outcome


async def _app(scope: Any, receive: Any, send: Any) -> None:
    body = request_ids.current().encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


async def _call(headers: dict[str, str]) -> httpx.Response:
    transport = httpx.ASGITransport(app=request_ids.RequestIds(_app))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        return await c.get("/", headers=headers)


async def test_a_sane_client_id_is_kept_and_echoed() -> None:
    r = await _call({"X-Request-Id": "deploy-42:step/1"})
    assert r.headers["x-request-id"] == r.text == "deploy-42:step/1"


@pytest.mark.parametrize("sent", [None, "", "a b", "x" * 129, "<script>", "a\tb"])
async def test_anything_else_gets_a_fresh_id(sent: str | None) -> None:
    r = await _call({} if sent is None else {"X-Request-Id": sent})
    assert r.headers["x-request-id"] == r.text != sent
    assert uuid.UUID(r.text).version == 7


async def test_no_id_outside_a_request() -> None:
    await _call({})
    assert request_ids.current() == ""


@pytest.mark.parametrize(("status", "outcome"), [
    (200, "done"), (201, "done"), (204, "done"), (303, "done"), (400, "rejected"),
    (401, "refused"), (403, "refused"), (404, "rejected"), (409, "rejected"),
    (422, "rejected"), (500, "error")])
def test_the_outcome_of_a_status(status: int, outcome: str) -> None:
    assert _outcome(status) == outcome


def test_status_of_an_unexpected_error_is_500_and_of_a_deep_body_400() -> None:
    assert status_of(ValueError("x")) == 500
    assert status_of(RecursionError()) == 400
