"""Exceptions a handler raises (or receives) and how they map to a reported failure.

Classification is by a stable ``type`` string, never by class identity across processes: the
gateway's retry policy matches ``non_retryable_types`` against it. Any exception that is not one
of ours is retryable, like Temporal, Hatchet and Dramatiq (and unlike Celery), because a crash
is more often transient than permanent and a retry budget bounds the cost of being wrong.

``LeaseLost`` and ``Cancelled`` are control flow, not errors: they derive from ``BaseException``
so that a handler's ``except Exception`` cannot swallow them and carry on writing effects after
another worker took over the run.
"""

from __future__ import annotations

from ostinato.sdk.protocol import MAX_ERROR_MESSAGE_CHARS, MAX_ERROR_TYPE_CHARS, ErrorInfo

__all__ = [
    "Cancelled",
    "GatewayError",
    "LeaseLost",
    "OstinatoWorkerError",
    "PermanentError",
    "RetryableError",
    "error_info",
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


class GatewayError(OstinatoWorkerError):
    """The gateway answered with a problem document (or an unusable body)."""

    def __init__(self, status: int, title: str, detail: str | None = None) -> None:
        super().__init__(f"{status} {title}" + (f": {detail}" if detail else ""))
        self.status = status
        self.title = title
        self.detail = detail


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


class Cancelled(BaseException):
    """Someone asked to cancel the run; raised by ``heartbeat()`` so the handler unwinds.

    If it escapes the handler the attempt is reported as a permanent failure of type
    ``"cancelled"``, which the gateway records against the cancel request.
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
    if isinstance(exc, RetryableError | PermanentError):
        type_, message, retryable = exc.type, exc.message, exc.retryable
    elif isinstance(exc, Cancelled):
        type_, message, retryable = "cancelled", str(exc), False
    else:
        type_, message, retryable = type(exc).__name__, str(exc), True
    type_ = (type_ or type(exc).__name__)[:MAX_ERROR_TYPE_CHARS]
    message = truncate_utf8(message or type(exc).__name__)[:MAX_ERROR_MESSAGE_CHARS]
    return ErrorInfo(type=type_, message=message, retryable=retryable)
