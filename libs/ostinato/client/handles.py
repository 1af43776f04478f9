"""Run handles: `client.runs.start(task, payload)` / `client.runs.get_handle(run_id)` return one;
`handle.result(timeout=)` returns the run's output or raises.

    handle = client.runs.start("send-invoice", {"invoice": 42})
    try:
        output = handle.result(timeout=60)
    except RunFailedError as exc:        # dead-lettered (a DAG run: failed)
        print(exc.error["type"], exc.error["message"])
    except RunCancelledError: ...
    except RunTimeoutError: ...          # a TimeoutError; the run goes on

`result` sends long polls (`GET /v1/runs/{id}/result?wait=`), each answered by the API the
moment the run ends, or with `done: false` when its wait is over, and then sends the next: no
polling interval, nothing between the run's end and the answer but the API's wake-up. The
decisions (how long each poll waits, what an answer means) are the plain functions here, shared
by the sync and the async handle.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ostinato.client import calls as c
from ostinato.client.calls import Id
from ostinato.client.errors import RunCancelledError, RunFailedError, RunTimeoutError
from ostinato.wire import api as m

MAX_POLL = 50.0  # seconds one long poll waits (the API's cap is 60)


def poll_wait(remaining: float | None, max_poll: float = MAX_POLL) -> float:
    """How long the next long poll waits: the time left (None: no deadline), at most
    `max_poll`, never negative."""
    if remaining is None:
        return max_poll
    return max(0.0, min(max_poll, remaining))


def outcome(result: m.RunResult) -> Any:
    """A final answer's value: the output if it succeeded, else the typed error raised."""
    if result.state == "succeeded":
        return result.output
    if result.state == "cancelled":
        raise RunCancelledError(result)
    raise RunFailedError(result)


@dataclass(frozen=True)
class Await:
    """One `result(timeout)` in progress: its deadline on the monotonic clock."""

    run_id: Id
    timeout: float | None
    started: float

    def remaining(self, now: float) -> float | None:
        return None if self.timeout is None else self.timeout - (now - self.started)

    def expired(self, now: float) -> bool:
        left = self.remaining(now)
        return left is not None and left <= 0


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None and (not isinstance(timeout, int | float) or math.isnan(timeout)
                                or timeout < 0):
        raise ValueError(f"timeout must be seconds >= 0 or None, got {timeout!r}")


class RunHandle:
    """A run (task, workflow or DAG run) of the sync client, by id; `job_id`: the one-off job
    that creates it (`runs.start`), so it can be awaited before the scheduler created it."""

    def __init__(self, send: Callable[[c.Call[Any]], Any], run_id: Id,
                 job_id: Id | None = None) -> None:
        self._send = send
        self.run_id = run_id
        self.job_id = job_id

    def __repr__(self) -> str:
        return f"RunHandle(run_id={self.run_id!s})"

    def status(self) -> m.RunResult:
        """The answer as it stands now (`done`, `state`), without waiting."""
        result: m.RunResult = self._send(c.run_result(self.run_id, 0, self.job_id))
        return result

    def wait(self, timeout: float | None = None) -> m.RunResult:
        """The final answer (whatever the state), or RunTimeoutError after `timeout` s."""
        _check_timeout(timeout)
        job = Await(self.run_id, timeout, time.monotonic())
        last: m.RunResult | None = None
        while True:
            last = self._send(c.run_result(
                self.run_id, poll_wait(job.remaining(time.monotonic())), self.job_id))
            assert last is not None
            if last.done:
                return last
            if job.expired(time.monotonic()):
                raise RunTimeoutError(self.run_id, float(timeout or 0), last)

    def result(self, timeout: float | None = None) -> Any:
        """The run's output once it succeeds; RunFailedError / RunCancelledError with its
        final error; RunTimeoutError after `timeout` seconds (None: wait as long as it
        takes)."""
        return outcome(self.wait(timeout))


class AsyncRunHandle:
    """The async twin of `RunHandle`: `await handle.result(timeout=60)`."""

    def __init__(self, send: Callable[[c.Call[Any]], Awaitable[Any]], run_id: Id,
                 job_id: Id | None = None) -> None:
        self._send = send
        self.run_id = run_id
        self.job_id = job_id

    def __repr__(self) -> str:
        return f"AsyncRunHandle(run_id={self.run_id!s})"

    async def status(self) -> m.RunResult:
        result: m.RunResult = await self._send(c.run_result(self.run_id, 0, self.job_id))
        return result

    # `timeout=` as the sync handle's (and DBOS's, Temporal's): the deadline spans many polls.
    async def wait(self, timeout: float | None = None) -> m.RunResult:  # noqa: ASYNC109
        _check_timeout(timeout)
        job = Await(self.run_id, timeout, time.monotonic())
        while True:
            last: m.RunResult = await self._send(c.run_result(
                self.run_id, poll_wait(job.remaining(time.monotonic())), self.job_id))
            if last.done:
                return last
            if job.expired(time.monotonic()):
                raise RunTimeoutError(self.run_id, float(timeout or 0), last)

    async def result(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        return outcome(await self.wait(timeout))
