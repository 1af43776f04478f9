"""Updates to a running workflow, awaited: `client.runs.update(run_id, name, payload,
timeout=)` sends the update (keyed: a retry sends one) and returns the workflow's answer.

    try:
        cart = client.runs.update(run_id, "add_item", {"sku": "a-1"}, timeout=30)
    except UpdateRejectedError as exc:   # exc.error_type: e.g. unknown_update
        ...
    except UpdateTimeoutError: ...       # a TimeoutError; the update stays delivered

The answer is awaited with long polls (`GET /v1/runs/{id}/updates/{update_id}?wait=`) that the
API answers once the workflow recorded its answer or the run ended; the decisions are the plain
functions here, shared by the sync and the async client.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from ostinato.client import calls as c
from ostinato.client.calls import Id
from ostinato.client.errors import UpdateRejectedError, UpdateTimeoutError
from ostinato.client.handles import Await, _check_timeout, poll_wait
from ostinato.wire import api as m


def answer(view: m.UpdateView) -> Any:
    """A final view's value: the output if completed, else UpdateRejectedError."""
    if view.state == "completed":
        return view.output
    raise UpdateRejectedError(view)


def update(send: Callable[[c.Call[Any]], Any], run_id: Id, name: str, payload: Any,
           timeout: float | None, idempotency_key: str | None) -> Any:
    return answer(final_view(send, run_id, name, payload, timeout, idempotency_key))


def final_view(send: Callable[[c.Call[Any]], Any], run_id: Id, name: str, payload: Any,
               timeout: float | None, idempotency_key: str | None) -> m.UpdateView:
    """Send the update, then the API's view of it once no longer pending (whatever its
    state); UpdateTimeoutError after `timeout` seconds."""
    _check_timeout(timeout)
    job = Await(run_id, timeout, time.monotonic())
    view: m.UpdateView = send(c.send_update(run_id, name, payload, idempotency_key))
    while view.state == "pending":
        if job.expired(time.monotonic()):
            raise UpdateTimeoutError(run_id, view.update_id, float(timeout or 0))
        view = send(c.update_outcome(run_id, view.update_id,
                                     poll_wait(job.remaining(time.monotonic()))))
    return view


async def update_async(send: Callable[[c.Call[Any]], Awaitable[Any]], run_id: Id, name: str,
                       payload: Any, timeout: float | None,  # noqa: ASYNC109
                       idempotency_key: str | None) -> Any:
    _check_timeout(timeout)
    job = Await(run_id, timeout, time.monotonic())
    view: m.UpdateView = await send(c.send_update(run_id, name, payload, idempotency_key))
    while view.state == "pending":
        if job.expired(time.monotonic()):
            raise UpdateTimeoutError(run_id, view.update_id, float(timeout or 0))
        view = await send(c.update_outcome(run_id, view.update_id,
                                           poll_wait(job.remaining(time.monotonic()))))
    return answer(view)
