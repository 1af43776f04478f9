"""Exceptions a handler raises (or receives) and how they map to a reported failure.

Classification is by a stable ``type`` string, never by class identity across processes: the
gateway's retry policy matches ``non_retryable_types`` against it. Any exception that is not one
of ours is retryable, like Temporal, Hatchet and Dramatiq (and unlike Celery), because a crash
is more often transient than permanent and a retry budget bounds the cost of being wrong. Such a
failure is sent with ``classified=false`` so the job's policy may still decide otherwise (by
``type``, or "unclassified means permanent"); ours are sent with ``classified=true``:

====================  ===================  =========  ==========  ========================
raised                ``type``             retryable  classified  extra
====================  ===================  =========  ==========  ========================
RetryableError        given (retryable)    true       true
PermanentError        given (permanent)    false      true
Throttled             given (throttled)    true       true        ``retry_after_seconds``
Cancelled             cancelled            false      true
anything else         the class name       true       false
====================  ===================  =========  ==========  ========================

``LeaseLost`` and ``Cancelled`` are control flow, not errors: they derive from ``BaseException``
so that a handler's ``except Exception`` cannot swallow them and carry on writing effects after
another worker took over the run.
"""

from __future__ import annotations

import math
from datetime import timedelta

from ostinato.wire.worker import MAX_ERROR_MESSAGE_CHARS, MAX_ERROR_TYPE_CHARS, ErrorInfo

__all__ = [
    "Cancelled",
    "GatewayError",
    "LeaseLost",
    "OstinatoWorkerError",
    "PermanentError",
    "RetryableError",
    "Suspended",
    "Throttled",
    "error_info",
    "sdk_error",
]

MAX_MESSAGE_BYTES = 4096


class OstinatoWorkerError(Exception):
    """Root of the SDK's ordinary errors, so callers can catch all of them at once."""


class RetryableError(OstinatoWorkerError):
    """The attempt failed but another attempt may succeed (the default for any exception)."""

    retryable = True

    def __init__(self, message: str, type: str = "retryable") -> None:
        super().__init__(message)
        self.message = message
        self.type = type


class PermanentError(OstinatoWorkerError):
    """Retrying cannot help (bad input, declined card): the run goes to the dead letters."""

    retryable = False

    def __init__(self, message: str, type: str = "permanent") -> None:
        super().__init__(message)
        self.message = message
        self.type = type


class Throttled(OstinatoWorkerError):
    """The handler (or the API it called) says "not now, retry after X".

    Reported as a retryable failure with ``retry_after_seconds``; the gateway reschedules the run
    that much later *without* using up an attempt, so a rate limit cannot exhaust a retry budget.
    ``retry_after`` is seconds (int or float) or a ``timedelta``; negative values count as 0.
    Keep the default ``type`` unless you have a reason: the gateway recognises throttling by it.
    """

    retryable = True

    def __init__(
        self, message: str, retry_after: float | timedelta, type: str = "throttled"
    ) -> None:
        if isinstance(retry_after, timedelta):
            seconds = retry_after.total_seconds()
        else:
            seconds = float(retry_after)
        if not math.isfinite(seconds):
            raise ValueError(f"retry_after must be finite, got {retry_after!r}")
        super().__init__(message)
        self.message = message
        self.type = type
        self.retry_after_seconds = max(0.0, seconds)


class GatewayError(OstinatoWorkerError):
    """The gateway answered with a problem document (or an unusable body). ``retry_after``:
    the seconds a 503 asked to wait (its database restarting), which the claim loop and the
    batch reporter wait at least before sending again."""

    def __init__(self, status: int, title: str, detail: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{status} {title}" + (f": {detail}" if detail else ""))
        self.status = status
        self.title = title
        self.detail = detail
        self.retry_after = retry_after


def retry_after_of(exc: BaseException) -> float:
    """The wait a failed gateway call asked for (0 when it asked none), at most a minute."""
    after = getattr(exc, "retry_after", None) if isinstance(exc, GatewayError) else None
    return min(60.0, max(0.0, after)) if isinstance(after, int | float) else 0.0


class LeaseLost(BaseException):
    """This worker no longer owns the run; stop before writing more effects.

    Raised by ``current().heartbeat()`` when the gateway rejects the fencing token (409) or the
    lease's local trust window elapsed without a renewal. No outcome is reported for the run;
    the attempt that now owns it (or lease expiry) decides what happens next.
    """

    def __init__(self, run_id: str, reason: str = "lease lost") -> None:
        super().__init__(f"{reason}: run {run_id}")
        self.run_id = run_id
        self.reason = reason


class Suspended(BaseException):
    """Control flow of a workflow (``ostinato.sdk.workflow``): the run now waits for a timer or
    a signal without its worker. It unwinds the workflow function; nothing more is reported for
    this attempt, and the run executes again (replaying its steps) once woken. Never catch it."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"suspended ({reason}): run {run_id}")
        self.run_id = run_id
        self.reason = reason


class Cancelled(BaseException):
    """Someone asked to cancel the run; raised by ``heartbeat()`` so the handler unwinds.

    If it escapes the handler the attempt is reported as a permanent failure of type
    ``"cancelled"``, which the gateway records against the cancel request. Async handlers are
    also interrupted at their next ``await`` with ``asyncio.CancelledError`` (see ``ostinato.sdk``).
    """

    def __init__(self, run_id: str) -> None:
        super().__init__(f"cancel requested: run {run_id}")
        self.run_id = run_id


def truncate_utf8(text: str, max_bytes: int = MAX_MESSAGE_BYTES) -> str:
    """Cut ``text`` to at most ``max_bytes`` of UTF-8 without splitting a character."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", "ignore")


def error_info(exc: BaseException) -> ErrorInfo:
    """Describe a handler's exception the way the gateway and retry policy expect it."""
    retry_after: float | None = None
    if isinstance(exc, RetryableError | PermanentError | Throttled):
        type_, message, retryable, classified = exc.type, exc.message, exc.retryable, True
        if isinstance(exc, Throttled):
            retry_after = exc.retry_after_seconds
    elif isinstance(exc, Cancelled):
        type_, message, retryable, classified = "cancelled", str(exc), False, True
    else:
        type_, message, retryable, classified = type(exc).__name__, str(exc), True, False
    type_ = (type_ or type(exc).__name__)[:MAX_ERROR_TYPE_CHARS]
    message = truncate_utf8(message or type(exc).__name__)[:MAX_ERROR_MESSAGE_CHARS]
    return ErrorInfo(
        type=type_, message=message, retryable=retryable, classified=classified,
        retry_after_seconds=retry_after,
    )


def sdk_error(type_: str, message: str, *, retryable: bool) -> ErrorInfo:
    """A failure the SDK decided itself (timeout, cancel, unknown task, bad output): classified."""
    message = truncate_utf8(message)[:MAX_ERROR_MESSAGE_CHARS]
    return ErrorInfo(type=type_, message=message, retryable=retryable, classified=True)
