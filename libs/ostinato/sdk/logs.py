"""Per-attempt log capture: what a handler logs travels with its outcome (``logs``).

While a handler runs, a context variable points at its attempt's ``LogBuffer``. Two hooks,
installed once per process by the Worker and inert outside a handler, copy what is emitted in
that context into the buffer; everything is still emitted normally:

- a structlog processor, inserted just before the last processor of the configured chain (the
  renderer), so user processors that add, rename or redact fields have already run;
- a ``logging.Handler`` on the root logger for stdlib records. It sees what the logging
  configuration lets through (the root logger's level, ``WARNING`` unless configured) and
  nothing from loggers with ``propagate=False``. When it is the only handler, it passes records
  on to ``logging.lastResort`` as logging itself would; but ``logging.basicConfig()`` does
  nothing once the root logger has a handler: configure logging before starting the Worker (or
  use ``basicConfig(force=True)``; the handler is re-added at the next attempt).

Context variables follow the handler into its asyncio tasks and into the thread of a sync
handler, not into threads the handler starts itself. When structlog renders through stdlib
logging, the record that follows a captured structlog event is not captured a second time.
Call ``structlog.configure(...)`` before starting the Worker; the processor is re-inserted at the
start of each attempt if a later ``configure`` replaced the chain.

Bounds (``protocol.MAX_LOG_*``): a line's message is cut to 8192 characters and its fields to
32 JSON-safe values of about 1 KiB each; past 500 lines or 256 KiB per attempt the buffer keeps
the first 250 and the last 250 lines (each half at most 128 KiB) and one line in between saying
how many were dropped.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Mapping, MutableMapping
from typing import Any

import msgspec
import structlog

from ostinato.wire.worker import MAX_LOG_BYTES, MAX_LOG_LINES, MAX_LOG_MESSAGE_CHARS, LogLine

__all__ = ["LogBuffer", "capture_into", "capture_processor", "install_log_capture"]

MAX_FIELDS = 32
MAX_FIELD_CHARS = 1024
_SKIPPED_KEYS = frozenset({"event", "level", "timestamp", "exc_info", "stack_info"})
_LEVEL_ALIASES = {"exception": "error", "warn": "warning", "fatal": "critical", "msg": "info",
                  "log": "info"}
_RECORD_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__.keys()
    | {"message", "asctime", "taskName"}
)
_json = msgspec.json.Encoder()

_capture: contextvars.ContextVar[LogBuffer | None] = contextvars.ContextVar(
    "ostinato_log_capture", default=None
)
_local = threading.local()  # logger name of a structlog event about to arrive as a stdlib record


class LogBuffer:
    """The bounded log of one attempt; thread-safe (a sync handler writes from its thread)."""

    def __init__(
        self,
        started: float | None = None,
        *,
        omit: Mapping[str, Any] | None = None,
        max_lines: int = MAX_LOG_LINES,
        max_bytes: int = MAX_LOG_BYTES,
    ) -> None:
        self.started = time.monotonic() if started is None else started
        self._omit = dict(omit or {})  # bound fields equal to these values are left out
        self._half_lines = max(1, max_lines // 2)
        self._half_bytes = max(1, max_bytes // 2)
        self._head: list[LogLine] = []
        self._head_bytes = 0
        self._head_open = True
        self._tail: deque[tuple[LogLine, int]] = deque()
        self._tail_bytes = 0
        self._dropped = 0
        self._dropped_until = 0.0
        self._lock = threading.Lock()

    def add(self, level: str, message: str, fields: Mapping[str, Any] | None = None) -> None:
        t = round(time.monotonic() - self.started, 6)
        message = message[:MAX_LOG_MESSAGE_CHARS]
        clean = _json_safe(fields or {}, self._omit)
        size = len(message.encode("utf-8", "replace")) + (len(_json.encode(clean)) if clean else 0)
        line = LogLine(t=t, level=level.lower()[:32], message=message, fields=clean)
        with self._lock:
            if self._head_open:
                if (len(self._head) < self._half_lines
                        and self._head_bytes + size <= self._half_bytes):
                    self._head.append(line)
                    self._head_bytes += size
                    return
                self._head_open = False
            self._tail.append((line, size))
            self._tail_bytes += size
            while len(self._tail) > self._half_lines or (
                self._tail_bytes > self._half_bytes and len(self._tail) > 1
            ):
                dropped, dropped_size = self._tail.popleft()
                self._tail_bytes -= dropped_size
                self._dropped += 1
                self._dropped_until = dropped.t

    @property
    def dropped(self) -> int:
        return self._dropped

    def lines(self) -> list[LogLine] | None:
        """The captured lines (``None`` when there are none, so the field stays off the wire)."""
        with self._lock:
            lines = list(self._head)
            if self._dropped:
                lines.append(LogLine(
                    t=self._dropped_until, level="warning",
                    message=f"{self._dropped} log lines dropped (at most {2 * self._half_lines}"
                            f" lines and {2 * self._half_bytes} bytes are kept per attempt)",
                    fields={"dropped": self._dropped},
                ))
            lines.extend(line for line, _ in self._tail)
        return lines or None


def capture_into(context: contextvars.Context, buffer: LogBuffer) -> None:
    """Make ``buffer`` the capture target of code run in ``context`` (a handler's copy)."""
    context.run(_capture.set, buffer)


# ----------------------------------------------------------------------------- the hooks


def capture_processor(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: copy the event into the current attempt's buffer, if any."""
    buffer = _capture.get()
    if buffer is None:
        return event_dict
    try:
        level = str(event_dict.get("level") or _LEVEL_ALIASES.get(method_name, method_name))
        fields = {k: v for k, v in event_dict.items() if k not in _SKIPPED_KEYS}
        exception = _exception_text(event_dict.get("exc_info"))
        if exception:
            fields["exception"] = exception
        elif isinstance(fields.get("exception"), list):  # dict tracebacks rendered before us
            fields["exception"] = _traceback_text(fields["exception"])
        buffer.add(level, str(event_dict.get("event", "")), fields)
        if isinstance(logger, logging.Logger):  # rendered through stdlib: a record follows
            number = logging.getLevelName(level.upper())
            if isinstance(number, int) and logger.isEnabledFor(number):
                _local.pending = logger.name
    except Exception:  # capturing must never break the user's logging
        pass
    return event_dict


class _CaptureHandler(logging.Handler):
    """Root handler copying stdlib records emitted in a handler's context."""

    def emit(self, record: logging.LogRecord) -> None:
        if self._alone(record):  # keep Python's "no handler configured" fallback to stderr
            last_resort = logging.lastResort
            if last_resort is not None and record.levelno >= last_resort.level:
                last_resort.handle(record)
        buffer = _capture.get()
        if buffer is None:
            return
        pending = getattr(_local, "pending", None)
        _local.pending = None
        if pending is not None and pending == record.name:
            return  # the structlog event we captured already
        try:
            try:
                message = record.getMessage()
            except Exception:
                message = str(record.msg)
            fields: dict[str, Any] = {"logger": record.name}
            fields.update((k, v) for k, v in record.__dict__.items()
                          if k not in _RECORD_ATTRS and not k.startswith("_"))
            if record.exc_info:
                fields["exception"] = _exception_text(record.exc_info)
            buffer.add(record.levelname, message, fields)
        except Exception:
            pass


    def _alone(self, record: logging.LogRecord) -> bool:
        """True if no other handler saw the record (then logging would have used lastResort)."""
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(h is not self for h in logger.handlers):
                return False
            logger = logger.parent if logger.propagate else None
        return True


_handler = _CaptureHandler()
_install_lock = threading.Lock()


def install_log_capture() -> None:
    """Install the processor and the root handler (idempotent, cheap when already there)."""
    processors = structlog.get_config()["processors"]
    root = logging.getLogger()
    if capture_processor in processors and _handler in root.handlers:
        return
    with _install_lock:
        if _handler not in root.handlers:
            root.addHandler(_handler)
        processors = structlog.get_config()["processors"]
        if capture_processor not in processors:
            if isinstance(processors, list):  # in place: loggers cached on first use see it too
                processors.insert(max(0, len(processors) - 1), capture_processor)
            else:
                chain = list(processors)
                chain.insert(max(0, len(chain) - 1), capture_processor)
                structlog.configure(processors=chain)


# ---------------------------------------------------------------------------- helpers


def _exception_text(exc_info: Any) -> str | None:
    if not exc_info:
        return None
    if exc_info is True:
        exc_info = sys.exc_info()
    if isinstance(exc_info, BaseException):
        exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
    if not isinstance(exc_info, tuple) or len(exc_info) != 3 or exc_info[0] is None:
        return None
    text = "".join(traceback.format_exception(*exc_info))
    return text[-MAX_LOG_MESSAGE_CHARS:]  # the end of a traceback says the most


def _traceback_text(exceptions: list[Any]) -> Any:
    """structlog's ``dict_tracebacks`` form as compact text (the end kept when too long)."""
    parts: list[str] = []
    for exc in exceptions:
        if not isinstance(exc, dict):
            return exceptions
        parts.extend(
            f'  File "{f.get("filename")}", line {f.get("lineno")}, in {f.get("name")}'
            for f in exc.get("frames") or () if isinstance(f, dict)
        )
        parts.append(f"{exc.get('exc_type')}: {exc.get('exc_value')}")
    return "\n".join(parts)[-MAX_LOG_MESSAGE_CHARS:]


def _json_safe(fields: Mapping[str, Any], omit: Mapping[str, Any]) -> dict[str, Any]:
    clean: dict[str, Any] = {}
    for key, value in fields.items():
        if len(clean) >= MAX_FIELDS:
            clean["_truncated"] = True
            break
        if key in omit and _same(omit[key], value):
            continue  # run_id, attempt, ...: already known for the whole attempt
        limit = MAX_LOG_MESSAGE_CHARS if key == "exception" else MAX_FIELD_CHARS
        clean[str(key)[:64]] = _json_value(value, limit)
    return clean


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _json_value(value: Any, limit: int) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        return str(value)  # beyond what JSON decoders keep exactly
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, list | tuple | dict):
        try:
            raw = _json.encode(value)
        except Exception:
            raw = None
        if raw is not None and len(raw) <= limit:
            return msgspec.json.decode(raw)
    try:
        text = repr(value)
    except Exception:
        text = f"<unprintable {type(value).__name__}>"
    return text[:limit]
