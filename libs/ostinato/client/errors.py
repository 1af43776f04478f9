"""The one exception the client raises: `ApiError`, carrying the API's RFC 9457 problem.

Callers catch one type and branch on `status` or `type` (a stable URI, e.g.
`https://ostinato.dev/problems/not-found`), never on message text. An answer that is not a
problem document (a proxy's HTML 502) still becomes an `ApiError`, with type `about:blank` as
RFC 9457 prescribes; a request that never got an answer is `ApiUnreachable` (status 0), a
subclass, so `except ApiError` covers it as well.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import msgspec


class Problem(msgspec.Struct, kw_only=True):
    """An RFC 9457 problem document; `errors` lists the fields of bad input."""

    type: str = "about:blank"
    title: str = ""
    status: int = 0
    detail: str = ""
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None


_problem = msgspec.json.Decoder(Problem)


class ApiError(Exception):
    """The API answered with an error (or could not be reached: `ApiUnreachable`)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(f"{problem.status} {problem.title}: {problem.detail}"
                         if problem.detail else f"{problem.status} {problem.title}")

    @property
    def status(self) -> int:
        return self.problem.status

    @property
    def type(self) -> str:
        return self.problem.type

    @property
    def title(self) -> str:
        return self.problem.title

    @property
    def detail(self) -> str:
        return self.problem.detail

    @property
    def errors(self) -> list[dict[str, Any]]:
        return self.problem.errors or []

    @classmethod
    def from_response(cls, status: int, content_type: str, body: bytes) -> ApiError:
        if "json" in content_type:
            try:
                problem = _problem.decode(body)
            except msgspec.DecodeError:
                pass
            else:
                problem.status = problem.status or status
                problem.title = problem.title or _phrase(status)
                return cls(problem)
        text = body.decode("utf-8", "replace").strip()
        return cls(Problem(status=status, title=_phrase(status), detail=text[:500]))


class ApiUnreachable(ApiError):
    """No answer at all: refused, timed out, DNS, TLS. Status 0."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(Problem(title="API unreachable", detail=f"{url}: {reason}"))


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


class RunError(Exception):
    """A run awaited with `handle.result()` ended without succeeding: `result` is the API's
    answer (`state`, the final `error`: `type`, `message`, ...). Catch `RunFailedError` or
    `RunCancelledError`, or this for both."""

    def __init__(self, result: Any) -> None:
        self.result = result
        error = result.error or {}
        super().__init__(f"run {result.run_id} {result.state}: "
                         f"{error.get('type', result.state)}: {error.get('message', '')}".rstrip(
                             ": "))

    @property
    def run_id(self) -> Any:
        return self.result.run_id

    @property
    def state(self) -> str:
        return str(self.result.state)

    @property
    def error(self) -> dict[str, Any]:
        return dict(self.result.error or {})


class RunFailedError(RunError):
    """The run failed for good: dead-lettered (a DAG run: `failed`)."""


class RunCancelledError(RunError):
    """The run was cancelled."""


class RunTimeoutError(TimeoutError):
    """`handle.result(timeout=)` ran out before the run ended (the run goes on); `result` is
    the last answer (`state`), None if none came."""

    def __init__(self, run_id: Any, timeout: float, result: Any = None) -> None:
        self.run_id = run_id
        self.timeout = timeout
        self.result = result
        state = f" (still {result.state})" if result is not None else ""
        super().__init__(f"run {run_id} did not end within {timeout:g}s{state}")


class UpdateRejectedError(Exception):
    """An update sent with `client.runs.update` was refused by the workflow (`state`
    rejected: its `error_type`, e.g. `unknown_update`, and `message`), or its run ended
    without answering it (`state` abandoned). `view` is the API's answer."""

    def __init__(self, view: Any) -> None:
        self.view = view
        error = view.error
        self.error_type = error.type if error is not None else str(view.state)
        self.message = error.message if error is not None else \
            f"run {view.run_id} ended without answering update {view.name!r}"
        super().__init__(f"update {view.name!r} {view.state}: {self.error_type}: "
                         f"{self.message}")

    @property
    def state(self) -> str:
        return str(self.view.state)


class UpdateTimeoutError(TimeoutError):
    """`client.runs.update(timeout=)` ran out before the workflow answered (the update stays
    delivered and may still be answered: `update_id`, `client.runs.update_outcome`)."""

    def __init__(self, run_id: Any, update_id: Any, timeout: float) -> None:
        self.run_id = run_id
        self.update_id = update_id
        self.timeout = timeout
        super().__init__(f"update {update_id} of run {run_id} was not answered within "
                         f"{timeout:g}s")
