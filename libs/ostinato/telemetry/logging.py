"""Structured logs: one JSON object per line on stdout, with the run's ids on every line.

Ids travel in structlog contextvars (`bind_run`, `bound`), so code deep in a handler logs
`log.info("lease.renewed")` and still gets `tenant_id`/`run_id`/`attempt`. asyncio copies the
context into each new task, so a binding made inside a task never leaks into its siblings; `bound`
is for a loop that handles several runs in one task. The stdlib `logging` (uvicorn, aiokafka, the
OTel exporter) goes through the same processors at WARNING: nothing reaches stdout unstructured.

A line a failing loop repeats (an outage makes every retry fail the same way) is written once per
interval with the count of those held back (`RateLimitedLogger`; the stdlib's lines through the
same `Repeats`): an outage of 36 s once wrote 10,000 lines that said one thing.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import msgspec
import structlog
from opentelemetry import trace
from structlog._config import BoundLoggerLazyProxy
from structlog.contextvars import bind_contextvars, bound_contextvars, unbind_contextvars
from structlog.tracebacks import ExceptionDictTransformer

__all__ = ["RateLimitedLogger", "RepeatFilter", "Repeats", "bind_run", "bound", "clear_run",
           "configure_logging", "get_logger"]

RUN_KEYS = ("tenant_id", "job_id", "run_id", "attempt")
REPEAT_INTERVAL_S = 10.0  # a repeated line is written at most this often, with `repeated`
_HANDLER_MARK = "_ostinato_handler"
_ENCODER = msgspec.json.Encoder(enc_hook=repr)


# A tenant's key (tenancy.new_api_key) wherever it appears in a line: a field, a message, an
# exception's text, a URL someone logged. The admin key, which has no fixed shape, is added
# by configure_logging from OSTINATO_ADMIN_KEY and OSTINATO_KAFKA_PASSWORD.
KEY_PATTERN = rb"ost_[A-Za-z0-9_-]{16,}"
REDACTED = b"[redacted key]"
_secrets: list[re.Pattern[bytes]] = [re.compile(KEY_PATTERN)]


def redact(line: bytes) -> bytes:
    """Every API key in a rendered line, replaced; one regex pass when none is there."""
    for secret in _secrets:
        line = secret.sub(REDACTED, line)
    return line


def _dumps_bytes(obj: Any, **_kw: Any) -> bytes:
    """msgspec is several times faster than json.dumps; what it can't encode becomes a repr."""
    return redact(_ENCODER.encode(obj))


def _dumps_str(obj: Any, **_kw: Any) -> str:
    return redact(_ENCODER.encode(obj)).decode()


class _AddService:
    """Stamp `service` so lines from five processes stay tellable apart once aggregated."""

    def __init__(self, service: str) -> None:
        self.service = service

    def __call__(self, _logger: Any, _name: str, event_dict: MutableMapping[str, Any]) -> Any:
        event_dict.setdefault("service", self.service)
        return event_dict


def _add_trace_ids(_logger: Any, _name: str, event_dict: MutableMapping[str, Any]) -> Any:
    """Join logs to traces; costs one contextvar read when tracing is off."""
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        event_dict.setdefault("trace_id", format(ctx.trace_id, "032x"))
        event_dict.setdefault("span_id", format(ctx.span_id, "016x"))
    return event_dict


def _console() -> Any:
    render = structlog.dev.ConsoleRenderer()

    def rendered(logger: Any, name: str, event_dict: MutableMapping[str, Any]) -> str:
        return redact(render(logger, name, event_dict).encode()).decode()

    return rendered


def _level_number(level: str) -> int:
    number = logging.getLevelNamesMapping().get(level.upper())
    if number is None:
        raise ValueError(f"unknown log level {level!r}")
    return number


def configure_logging(service: str, level: str = "info") -> None:
    """Configure structlog and the stdlib root logger for this process; safe to call again."""
    threshold = _level_number(level)
    console = os.environ.get("OSTINATO_LOG_FORMAT", "").strip().lower() == "console"
    secrets = (os.environ.get(name, "").strip().encode()
               for name in ("OSTINATO_ADMIN_KEY", "OSTINATO_KAFKA_PASSWORD"))
    _secrets[1:] = [re.compile(re.escape(s)) for s in secrets if s]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
        _AddService(service),
        _add_trace_ids,
    ]
    # Locals in tracebacks can hold secrets and megabytes of payload: keep them out.
    tracebacks = structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))

    logger_factory: Any
    if console:
        tail: list[Any] = [structlog.processors.StackInfoRenderer(), _console()]
        logger_factory = structlog.WriteLoggerFactory(file=sys.stdout)
    elif hasattr(sys.stdout, "buffer"):
        tail = [
            structlog.processors.StackInfoRenderer(),
            tracebacks,
            structlog.processors.JSONRenderer(serializer=_dumps_bytes),
        ]
        logger_factory = structlog.BytesLoggerFactory(file=sys.stdout.buffer)
    else:  # a replaced stdout without a byte layer (some test runners)
        tail = [
            structlog.processors.StackInfoRenderer(),
            tracebacks,
            structlog.processors.JSONRenderer(serializer=_dumps_str),
        ]
        logger_factory = structlog.WriteLoggerFactory(file=sys.stdout)

    structlog.configure(
        processors=[*shared, *tail],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=logger_factory,
        cache_logger_on_first_use=True,
    )
    _route_stdlib(shared, console, max(threshold, logging.WARNING))


def _route_stdlib(shared: list[Any], console: bool, level: int) -> None:
    """Send stdlib records through the same processors, replacing our previous handler only."""
    final: Any = (
        _console()
        if console
        else structlog.processors.JSONRenderer(serializer=_dumps_str)
    )
    processors: list[Any] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if not console:
        processors.append(
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))
        )
    processors.append(final)
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name,
                           structlog.stdlib.ExtraAdder(allow=["repeated"])],
        processors=processors,
    )
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(formatter)
    handler.addFilter(RepeatFilter())  # aiokafka logs each reconnect to a broker that is down
    setattr(handler, _HANDLER_MARK, True)

    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _HANDLER_MARK, False):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)


def get_logger(name: str | None = None) -> Any:
    """A structlog logger; `name` lands in the `logger` field of every line it writes.

    Lazy: safe at module import, it resolves the configuration on first use, not here.
    """
    if not name:
        return structlog.get_logger()
    # What structlog.get_logger(**values) builds; called directly because the key we want,
    # `logger` (as the stdlib records get it), collides with wrap_logger's first parameter.
    return BoundLoggerLazyProxy(None, initial_values={"logger": name}, logger_factory_args=())


def bind_run(
    *,
    tenant_id: str | UUID | None = None,
    job_id: str | UUID | None = None,
    run_id: str | UUID | None = None,
    attempt: int | None = None,
) -> None:
    """Bind a run's ids for the rest of the current context (task); None values are skipped."""
    ids = _present(tenant_id=tenant_id, job_id=job_id, run_id=run_id, attempt=attempt)
    if ids:
        bind_contextvars(**ids)


def clear_run() -> None:
    """Forget the run ids bound by `bind_run` (e.g. when a loop moves on to the next message)."""
    unbind_contextvars(*RUN_KEYS)


@contextmanager
def bound(**ids: Any) -> Iterator[None]:
    """Bind ids (None values skipped) for a block, then restore exactly what was there before."""
    with bound_contextvars(**_present(**ids)):
        yield


def _present(**ids: Any) -> dict[str, Any]:
    return {key: value for key, value in ids.items() if value is not None}


class Repeats:
    """Which of many repeated lines to write: the first of a kind at once, then at most one per
    `interval` seconds, carrying the count held back since the last one written. Pure but for
    `clock` (monotonic seconds; a fake in tests). A burst's last held-back lines are counted by
    the next line of their kind, if one comes (a loop's recovery line says the rest)."""

    def __init__(self, interval: float = REPEAT_INTERVAL_S, *,
                 clock: Callable[[], float] = time.monotonic, max_kinds: int = 4096) -> None:
        self.interval = interval
        self._clock = clock
        self._max_kinds = max_kinds
        self._kinds: dict[Hashable, tuple[float, int]] = {}  # kind -> (written at, held back)

    def admit(self, kind: Hashable) -> int | None:
        """None: hold this line back (counted); else write it, with the count held back since
        the previous one of its kind (0 for the first)."""
        now = self._clock()
        seen = self._kinds.pop(kind, None)
        if seen is not None and now - seen[0] < self.interval:
            self._kinds[kind] = (seen[0], seen[1] + 1)
            return None
        self._kinds[kind] = (now, 0)  # last in order: the least recent kinds are forgotten first
        if len(self._kinds) > self._max_kinds:
            del self._kinds[next(iter(self._kinds))]
        return 0 if seen is None else seen[1]


class RateLimitedLogger:
    """A logger for what a loop logs on every failure: each (logger, event, error type, `kind`)
    is written at once the first time, then at most once per interval, with `repeated=<count>`
    of the lines held back in between (`Repeats`)."""

    def __init__(self, name: str, interval: float = REPEAT_INTERVAL_S, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._log = get_logger(name)
        self._repeats = Repeats(interval, clock=clock)

    def warning(self, event: str, error: BaseException | None = None, *,
                kind: Hashable = None, **fields: Any) -> bool:
        """Whether the line was written. `error` goes out as `error=repr(error)`; `kind` tells
        apart lines of one event that must not hold each other back (a duty's name)."""
        return self._emit("warning", event, error, kind, fields)

    def error(self, event: str, error: BaseException | None = None, *,
              kind: Hashable = None, **fields: Any) -> bool:
        """As `warning`, at error level (pass `exc_info=` for a traceback: once per interval)."""
        return self._emit("error", event, error, kind, fields)

    def _emit(self, level: str, event: str, error: BaseException | None, kind: Hashable,
              fields: dict[str, Any]) -> bool:
        held = self._repeats.admit((event, None if error is None else type(error), kind))
        if held is None:
            return False
        if error is not None:
            fields.setdefault("error", repr(error))
        if held:
            fields["repeated"] = held
        getattr(self._log, level)(event, **fields)
        return True


class RepeatFilter(logging.Filter):
    """`Repeats` for the stdlib's records (aiokafka, uvicorn), by (logger, message template,
    exception type); a record let through after others were held back gets `repeated`."""

    def __init__(self, interval: float = REPEAT_INTERVAL_S, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._repeats = Repeats(interval, clock=clock)
        self._lock = threading.Lock()  # records come from other threads too (OTel's exporter)

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[0] if record.exc_info else None
        with self._lock:
            held = self._repeats.admit((record.name, str(record.msg), error))
        if held is None:
            return False
        if held:
            record.repeated = held
        return True
