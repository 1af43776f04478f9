"""The object store's metrics, recorded the same way by both backends (docs/OBSERVABILITY.md):
each call counted by operation and outcome, timed, and the bytes it moved. A backend's methods
are wrapped with `measured(op)` (and its `list` with `measured_list`); the label `backend` is the
class's `BACKEND` ("file", "s3").

Outcomes: `ok`; `missing` (ObjectMissing: a fact, not a fault); `unavailable`
(ObjectStoreUnavailable: down, slow, 5xx, throttled); `error` (anything else: credentials, a
bad key, a bug). A key refused before any I/O (`check_key`'s ValueError) is an `error` too."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from ostinato.objects import ObjectMissing, ObjectStoreUnavailable
from ostinato.telemetry import metrics

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def outcome_of(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    if isinstance(exc, ObjectMissing):
        return "missing"
    if isinstance(exc, ObjectStoreUnavailable):
        return "unavailable"
    return "error"


def _record(backend: str, op: str, started: float, exc: BaseException | None,
            size: int | None) -> None:
    metrics.OBJECT_STORE_SECONDS.labels(backend, op).observe(time.perf_counter() - started)
    metrics.OBJECT_STORE_REQUESTS.labels(backend, op, outcome_of(exc)).inc()
    if size is not None and exc is None:
        metrics.OBJECT_STORE_BYTES.labels(backend, op).inc(size)


def measured(op: str) -> Callable[[F], F]:
    """Count, time and (put: the data's length; get: the answer's) size a backend's call."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                result = await fn(self, *args, **kwargs)
            except BaseException as exc:
                _record(self.BACKEND, op, started, exc, None)
                raise
            size = None
            if op == "put":
                size = len(args[1] if len(args) > 1 else kwargs["data"])
            elif op == "get":
                size = len(result)
            _record(self.BACKEND, op, started, None, size)
            return result

        return call  # type: ignore[return-value]

    return wrap


def measured_list(fn: Callable[[Any, str], AsyncIterator[str]],
                  ) -> Callable[[Any, str], AsyncIterator[str]]:
    """A backend's `list`: one call counted and timed until its last key (or its failure); a
    listing its caller abandons is counted when the iterator is closed."""

    @functools.wraps(fn)
    async def call(self: Any, prefix: str) -> AsyncIterator[str]:
        started = time.perf_counter()
        failed: BaseException | None = None
        try:
            async for key in fn(self, prefix):
                yield key
        except BaseException as exc:
            failed = exc
            raise
        finally:
            _record(self.BACKEND, "list", started,
                    None if isinstance(failed, GeneratorExit) else failed, None)

    return call
