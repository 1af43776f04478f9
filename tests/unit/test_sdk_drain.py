"""A worker whose gateway drains or restarts (issue 39): reading a resuming workflow's recorded
steps is a read, sent again after a 503 (waiting at least its retry_after_seconds) or a
connection lost before an answer, instead of failing the attempt; a stale token still ends it.
The gateway here is httpx's MockTransport (the real drain: tests/faults/test_rolling_restart.py)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import httpx
import msgspec
import pytest

from ostinato.sdk import LeaseLost, Worker, task

DRAINING = {"type": "https://ostinato.dev/problems/service-unavailable",
            "title": "Service unavailable", "status": 503,
            "detail": "this instance is stopping", "retry_after_seconds": 0.01}


@task("noop")
async def noop(payload: object) -> None:
    return None


def worker(*answers: Any) -> tuple[Worker, list[str]]:
    queue, paths = list(answers), []

    def handle(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        return httpx.Response(status, content=msgspec.json.encode(body),
                              headers={"Retry-After": "1"} if status == 503 else {})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return Worker("http://gateway", "key", [noop], http_client=client), paths


def context() -> Any:
    lost: list[bool] = []
    return SimpleNamespace(run_id=uuid.uuid4(), fencing_token="7",
                           mark_lease_lost=lambda: lost.append(True), lost=lost)


async def test_recorded_steps_are_read_again_after_a_drain_503_and_a_refused_connection() -> None:
    w, paths = worker((503, DRAINING), httpx.ConnectError("refused"), (200, {"steps": []}))
    assert await w.page(context(), -1, 100) == []
    assert len(paths) == 3 and all(p.endswith("/steps") for p in paths)


async def test_a_stale_token_is_not_retried_and_ends_the_attempt() -> None:
    w, paths = worker((503, DRAINING), (409, {"type": "about:blank", "title": "Conflict",
                                              "status": 409, "detail": "stale"}))
    ctx = context()
    with pytest.raises(LeaseLost):
        await w.page(ctx, -1, 100)
    assert len(paths) == 2 and ctx.lost == [True]
