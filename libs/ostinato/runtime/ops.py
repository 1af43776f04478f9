"""The operational HTTP surface every service shares: probes, /metrics, HTTP metrics and spans,
and an in-loop uvicorn server that leaves signal handling to the service.

Probes follow Kubernetes: /livez (and the /healthz alias) only proves the event loop answers, so a
database outage never restarts every pod; /readyz runs the service's dependency checks, its
background duties among them (a failing one's last error under `reasons`). Ready means "can do
its work": a failing check is a 503 unless it is `Degraded` (a dependency the work path
survives, Kafka behind the outbox), which is a 200 with `"status": "degraded"` (`readyz_answer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import uvicorn
from litestar import Litestar, Request, Response, get
from litestar.datastructures import State
from litestar.exceptions import HTTPException
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import trace

from ostinato.domain.errors import PROBLEM_BASE
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger
from ostinato.telemetry.tracing import tracing_enabled

__all__ = [
    "BodyLimit",
    "Degraded",
    "Drain",
    "HttpMetricsMiddleware",
    "HttpServer",
    "instrument_http",
    "log_unhandled_exception",
    "ops_app",
    "ops_route_handlers",
    "readyz_answer",
    "serve_http",
    "tracing_middleware",
]


@dataclass(frozen=True, slots=True)
class Degraded:
    """A failing check of a dependency the work path survives (Kafka: the outbox keeps what it
    cannot take, the reconciler repairs the rest): reported on /readyz, never a 503."""

    reason: str


# name -> True when ready; False, or the reason as text (a failing duty's last error), when not;
# Degraded(reason) when down but not needed to do the work.
Check = bool | str | Degraded
Readiness = Callable[[], Awaitable[Mapping[str, Check]]]
READINESS_TIMEOUT_S = 0.9  # a 1 s probe timeout always gets an answer
OPS_PATHS = ("/livez", "/healthz", "/readyz", "/metrics")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"})
_log = get_logger("ostinato.runtime.ops")


def _method(scope: Scope) -> str:
    """Unknown methods collapse to `_OTHER` (OTel's rule) so a client can't mint label values."""
    method = str(scope.get("method", "")).upper()
    return method if method in _METHODS else "_OTHER"


class HttpMetricsMiddleware:
    """ASGI middleware observing `ostinato_http_request_duration_seconds`.

    The route label is Litestar's route template (`scope["path_template"]`, e.g. `/items/{id}`),
    never the raw path; requests no route matched are labelled `unmatched`. Install it around the
    whole app with `instrument_http` so 404s are counted too: inside Litestar's `middleware=[...]`
    it would only see requests that matched a route.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            # The router writes path_template into this same scope dict once it has matched.
            route = scope.get("path_template") or "unmatched"
            metrics.HTTP_REQUEST_DURATION.labels(_method(scope), route, str(status)).observe(
                time.perf_counter() - start
            )


class BodyLimit:
    """ASGI middleware: a request whose Content-Length is over `max_bytes` gets a 413 problem
    without reaching the app. The body is read and dropped first (up to `drain_bytes`): a
    server that answers and closes while the client is still sending makes the client's OS
    reset the connection, and the client never sees the answer."""

    def __init__(self, app: ASGIApp, max_bytes: int, drain_bytes: int = 64 << 20) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.drain_bytes = drain_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        length = _content_length(scope) if scope["type"] == "http" else None
        if length is None or length <= self.max_bytes:
            await self.app(scope, receive, send)
            return
        drained = 0
        while drained <= self.drain_bytes:
            message = await receive()
            if message["type"] != "http.request":
                break
            drained += len(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = msgspec.json.encode({
            "type": PROBLEM_BASE + "payload-too-large",
            "title": "Payload too large", "status": 413,
            "detail": f"the body is {length} bytes; the limit is {self.max_bytes}",
            "instance": scope.get("path", "")})
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


DRAIN_GRACE_SECONDS = 5.0  # after the drain period, how long requests in flight may still take
DRAIN_RETRY_AFTER_SECONDS = 1  # another instance (or this one restarted) serves by then


class Drain:
    """ASGI middleware for an orderly stop (issue 39): after `begin()` (SIGTERM), /readyz is a
    503 at once, so a load balancer stops sending here; a new request gets a 503
    `service-unavailable` problem with `Retry-After` and `Connection: close`, so the client
    retries on a new connection, which the balancer sends to another instance; requests
    already in flight run to their end (their answers close the connection too). /livez and
    /metrics keep answering: a draining process is alive. Nothing a 503 refused was done, so
    the client and the SDK send it again (`ostinato.client.transport`)."""

    def __init__(self, app: ASGIApp, retry_after_seconds: int = DRAIN_RETRY_AFTER_SECONDS) -> None:
        self.app = app
        self.retry_after = retry_after_seconds
        self.draining = False
        self.in_flight = 0
        self.refused = 0  # new requests answered 503 while draining
        self._idle = asyncio.Event()  # set while nothing is in flight
        self._idle.set()

    def begin(self) -> None:
        self.draining = True

    async def drain(self, seconds: float, grace: float = DRAIN_GRACE_SECONDS) -> int:
        """`begin()`, refuse new requests for `seconds`, then wait up to `grace` more for
        those in flight; returns how many are still running (uvicorn's own graceful
        shutdown then gives them its timeout before cancelling them)."""
        self.begin()
        await asyncio.sleep(seconds)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace)
        _log.info("http.drained", refused=self.refused, still_in_flight=self.in_flight,
                  drain_seconds=seconds)
        return self.in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if self.draining and path == "/readyz":
            await _send_json(send, 503, b"application/json", msgspec.json.encode({
                "status": "not ready", "checks": {"draining": False},
                "reasons": {"draining": "stopping: draining requests"}}))
            return
        if self.draining and path not in OPS_PATHS:
            self.refused += 1
            await _send_json(send, 503, b"application/problem+json", msgspec.json.encode({
                "type": PROBLEM_BASE + "service-unavailable", "title": "Service unavailable",
                "status": 503, "detail": f"this instance is stopping; retry after "
                f"{self.retry_after} s (another instance serves it)", "instance": path,
                "retry_after_seconds": self.retry_after}),
                [(b"retry-after", str(self.retry_after).encode()), (b"connection", b"close")])
            return

        async def closing(message: Message) -> None:
            if message["type"] == "http.response.start" and self.draining:
                message["headers"] = [*message.get("headers", ()), (b"connection", b"close")]
            await send(message)

        self.in_flight += 1
        self._idle.clear()
        try:
            await self.app(scope, receive, closing)
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self._idle.set()


async def _send_json(send: Send, status: int, content_type: bytes, body: bytes,
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", content_type), (b"content-length", str(len(body)).encode()),
        *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def instrument_http(app: Litestar) -> Litestar:
    """Wrap the app's ASGI entry (outside routing and exception handling) in HTTP metrics.

    Litestar 2 has no public hook for middleware that runs before routing, so this wraps
    `app.asgi_handler`, the same attribute Litestar itself wraps for its OpenTelemetry middleware.
    """
    if app.logging_config is not None:
        # Litestar's default LoggingConfig replaces the root handler installed by
        # configure_logging, so uvicorn/aiokafka lines stop being JSON. Say so, loudly.
        _log.warning("litestar.logging_config_enabled", hint="pass logging_config=None")
    app.asgi_handler = HttpMetricsMiddleware(app.asgi_handler)
    return app


class _RouteSpanNameMiddleware:
    """Rename the server span to `{method} {route}` once routing has found the template.

    The OTel middleware runs before routing, so it can only name the span `{method}`.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        span = trace.get_current_span()
        route = scope.get("path_template")
        if route and span.is_recording():
            span.update_name(f"{_method(scope)} {route}")
            span.set_attribute("http.route", route)
        await self.app(scope, receive, send)


def _span_details(scope: Scope) -> tuple[str, dict[str, Any]]:
    """Span name before routing: the method alone (semconv: never the URI path)."""
    return _method(scope) if scope.get("type") == "http" else "websocket", {}


def tracing_middleware() -> list[Any]:
    """Middleware for Litestar's `middleware=[...]` when tracing is on; `[]` when it is off."""
    if not tracing_enabled():
        return []
    from litestar.plugins.opentelemetry import OpenTelemetryConfig

    config = OpenTelemetryConfig(
        scope_span_details_extractor=_span_details,
        exclude=[f"^{path}$" for path in OPS_PATHS],  # probes and scrapes are noise in traces
        exclude_spans=["receive", "send"],
    )
    # Litestar hoists the OTel middleware outside routing; the renamer stays per-route.
    return [config.middleware, _RouteSpanNameMiddleware]


async def log_unhandled_exception(exc: Exception, scope: Scope) -> None:
    """`after_exception` hook: log 5xx causes as one structured line (Litestar's logging is off)."""
    if isinstance(exc, HTTPException) and exc.status_code < 500:
        return
    _log.error(
        "http.unhandled_exception",
        method=scope.get("method"),
        route=scope.get("path_template") or "unmatched",
        exc_info=exc,
    )


async def _run_readiness(readiness: Readiness) -> tuple[Mapping[str, Check], str | None]:
    """(the checks' answers, the error of the checks themselves)."""
    try:
        async with asyncio.timeout(READINESS_TIMEOUT_S):
            return await readiness(), None
    except TimeoutError:
        return {"readiness": False}, f"checks took longer than {READINESS_TIMEOUT_S:g}s"
    except Exception as exc:
        _log.warning("readiness.check_failed", exc_info=exc)
        return {"readiness": False}, type(exc).__name__


def readyz_answer(result: Mapping[str, Check],
                  error: str | None = None) -> tuple[int, dict[str, Any]]:
    """The /readyz status and body: 503 "not ready" when a required check fails (or the checks
    themselves did), else 200, "degraded" with those checks listed when a `Degraded` one
    fails, "ready" when none does. Strict: only a real True passes, so a check returning an
    error string can't read as ready."""
    checks = {str(name): ok is True for name, ok in result.items()}
    reasons = {str(name): ok.reason if isinstance(ok, Degraded) else ok
               for name, ok in result.items() if isinstance(ok, str | Degraded)}
    degraded = sorted(str(name) for name, ok in result.items() if isinstance(ok, Degraded))
    ready = error is None and all(ok for name, ok in checks.items() if name not in degraded)
    status = "not ready" if not ready else "degraded" if degraded else "ready"
    body: dict[str, Any] = {"status": status, "checks": checks}
    if degraded:
        body["degraded"] = degraded
    if error is not None:
        body["error"] = error
    if reasons:
        body["reasons"] = reasons
    return (200 if ready else 503), body


def ops_route_handlers(readiness: Readiness) -> list[Any]:
    """/livez, /healthz, /readyz and /metrics handlers, hidden from the OpenAPI schema."""

    @get(["/livez", "/healthz"], include_in_schema=False, sync_to_thread=False)
    def livez() -> dict[str, str]:
        return {"status": "ok"}

    @get("/readyz", include_in_schema=False)
    async def readyz() -> Response[dict[str, Any]]:
        status, body = readyz_answer(*await _run_readiness(readiness))
        return Response(body, status_code=status)

    @get("/metrics", include_in_schema=False, sync_to_thread=False)
    def metrics_endpoint(request: Request[Any, Any, Any]) -> Response[bytes]:
        body, content_type = metrics.render(request.headers.get("accept"))
        return Response(body, media_type=content_type)

    return [livez, readyz, metrics_endpoint]


def ops_app(service: str, readiness: Readiness) -> Litestar:
    """The whole HTTP app for services without a public API (scheduler, dispatcher, reconciler)."""
    app = Litestar(
        route_handlers=ops_route_handlers(readiness),
        middleware=tracing_middleware(),
        after_exception=[log_unhandled_exception],
        openapi_config=None,
        logging_config=None,  # Litestar's default would reconfigure the root logger
        state=State({"service": service}),
    )
    return instrument_http(app)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn would replace SIGINT/SIGTERM handlers with signal.signal and re-raise the
        # signal after shutdown; the service owns those signals and calls HttpServer.stop().
        yield


class HttpServer:
    """uvicorn in the current event loop: `await start()`, later `await stop()`."""

    def __init__(
        self, app: ASGIApp | Litestar, host: str, port: int, *, graceful_timeout: float = 5.0,
        drain_seconds: float = 0.0,
    ) -> None:
        self.host = host
        self.drain = Drain(app)  # `stop()` drains first (`drain_seconds`; 0: readyz 503 only)
        self.drain_seconds = drain_seconds
        self._config = uvicorn.Config(
            self.drain,
            host=host,
            port=port,
            lifespan="on",
            log_config=None,  # keep our structlog routing of the stdlib loggers
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=graceful_timeout,  # type: ignore[arg-type]
        )
        self._server = _Server(self._config)
        self._task: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        return self._server.started and self._task is not None and not self._task.done()

    @property
    def port(self) -> int:
        """The bound port (useful when constructed with port 0)."""
        if not self._server.started:
            return int(self._config.port)
        return int(self._server.servers[0].sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Bind and run lifespan startup; returns once serving, raises if startup failed."""
        if self._task is not None:
            raise RuntimeError("HttpServer.start() called twice")
        self._task = asyncio.create_task(self._serve(), name=f"http:{self.host}:{self.port}")
        while not self._server.started:
            if self._task.done():
                await self._task  # raises the startup failure
                raise RuntimeError("HTTP server exited before it started")
            await asyncio.sleep(0.01)

    async def _serve(self) -> None:
        try:
            await self._server.serve()
        except SystemExit as exc:  # uvicorn sys.exit()s on bind or lifespan failure
            raise RuntimeError(
                f"HTTP server on {self.host}:{self._config.port} failed to start (exit {exc.code})"
            ) from None

    async def stop(self) -> None:
        """Drain (`Drain.drain`: /readyz 503, new requests a 503 with Retry-After for
        `drain_seconds`, those in flight let finish), then stop accepting, let what is still
        in flight finish (bounded), run lifespan shutdown."""
        if self._task is None:
            return
        if self.started:
            await self.drain.drain(self.drain_seconds)
        self._server.should_exit = True  # uvicorn's main loop checks this every 0.1 s
        try:
            await self._task
        except Exception as exc:
            _log.warning("http.server_failed", exc_info=exc)


async def serve_http(app: ASGIApp | Litestar, host: str, port: int) -> HttpServer:
    """Start an `HttpServer` and return it; call `await server.stop()` on shutdown."""
    server = HttpServer(app, host, port)
    await server.start()
    return server
