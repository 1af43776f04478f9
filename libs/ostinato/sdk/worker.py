"""The worker: claim runs by long poll, run them (``execution.py``), report them in batches.

One claim loop asks for ``max_runs = free slots`` so a worker never holds more runs than it can
run (a run claimed but waiting would burn its lease and starve other workers). Handlers run as
asyncio tasks; sync handlers run in a thread pool sized to ``concurrency`` (rather than
``asyncio.to_thread``'s shared default pool, capped at 32 threads, which would silently lower the
concurrency of sync handlers). A semaphore still enforces ``concurrency`` if a gateway ever hands
out more runs than asked for. A sync handler abandoned at its timeout keeps its slot until its
thread ends.

Graceful shutdown (``stop()``, SIGTERM/SIGINT): stop claiming, wait up to
``shutdown_grace_seconds`` for in-flight handlers, cancel the rest and *release* their leases
(``releases`` in the batch: the gateway queues those runs again at once, no attempt used, no
failure recorded), flush, say goodbye (the gateway forgets the worker, so its declared slots stop
counting as pool capacity at once rather than after the registry's TTL), close.

Every claim declares ``slots=concurrency``: the capacity fair dispatch shares among tenants.

Transport: with no ``http_client`` given and a plain ``http://`` gateway reached without a
proxy, requests go over kept-alive HTTP/1.1 connections of the worker's own (``_Http11``:
asyncio transports, the request written in one piece, the response parsed by httptools' C
parser). A lone workflow waits for one round trip per step, and on a 2-core VM one httpx POST
cost ~2 ms of the worker's CPU (its models, httpcore's pool, anyio's checkpoints, h11, and the
head and body in two writes, so two wake-ups of the gateway) against ~0.1 ms here. Errors are
httpx's exception types either way. httpx stays for ``https://``, proxies from the environment
and a client passed in (tests pass ``httpx.MockTransport`` or ``ASGITransport`` clients).

Rejected: a claim request per free slot (a round trip per run, see DESIGN "Performance shape")
and prefetching beyond ``concurrency`` (leases tick while runs wait).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import time
import urllib.request
from collections.abc import Mapping, Sequence
from contextlib import suppress
from http import HTTPStatus
from typing import cast
from urllib.parse import urlsplit

import httptools
import httpx
import msgspec
import structlog
from opentelemetry import propagate

from ostinato import eventloop
from ostinato.sdk.context import Custody, RunContext
from ostinato.sdk.errors import GatewayError, LeaseLost, retry_after_of, sdk_error
from ostinato.sdk.execution import AttemptRunner
from ostinato.sdk.registration import register
from ostinato.sdk.reporter import Reporter, backoff_delay
from ostinato.sdk.tasks import Handler, Task, registry, task
from ostinato.wire.worker import (
    BATCH_PATH,
    CLAIM_PATH,
    GOODBYE_PATH,
    MAX_CLAIM_RUNS,
    MAX_CLAIM_WAIT_SECONDS,
    MIN_LIVENESS_SECONDS,
    BatchItemResult,
    BatchRequest,
    BatchResponse,
    ClaimedRun,
    ClaimRequest,
    ClaimResponse,
    GoodbyeRequest,
    Problem,
    StepItem,
    StepRecord,
    StepsRequest,
    StepsResponse,
    run_path,
)

__all__ = ["Handler", "Task", "Worker", "task"]

log = structlog.get_logger("ostinato.sdk")
_encoder = msgspec.json.Encoder()
_claim_decoder = msgspec.json.Decoder(ClaimResponse)
_batch_decoder = msgspec.json.Decoder(BatchResponse)
_steps_decoder = msgspec.json.Decoder(StepsResponse)
_problem_decoder = msgspec.json.Decoder(Problem)
_FATAL_CLAIM_STATUSES = frozenset({400, 401, 403, 404, 422})
# Reading a run's recorded steps (a workflow resuming) is sent again after a 503 (a gateway
# draining, its database away) or a connection lost before an answer, this many times.
_PAGE_RETRIES = 8
_RETRIED_TRANSPORT = (httpx.ConnectError, httpx.ReadError, httpx.WriteError,
                      httpx.RemoteProtocolError)
# While it holds runs the worker pings this often (an empty batch when nothing else goes): the
# gateway records it, and a worker silent for OSTINATO_WORKER_DEAD_AFTER_SECONDS is judged dead
# and its runs are taken back in seconds rather than at the end of their leases. None: no
# pings, the leases alone decide (as with SDKs before issue 39).
LIVENESS_SECONDS = 1.0
# During a rolling upgrade the gateway behind the address may be the previous release, whose
# requests forbid unknown fields: a claim refused for an optional field it does not know (a
# 400/422 naming it) is sent again at once without it, and the field is left out for this long
# before it is offered again (that gateway may have been upgraded meanwhile). docs/UPGRADES.md.
REFUSED_FIELD_SECONDS = 60.0
_UNKNOWN_FIELD = re.compile(r"unknown field `([A-Za-z_][A-Za-z0-9_]*)`")
_CLAIM_OPTIONAL = {f.name: f.default for f in msgspec.structs.fields(ClaimRequest)
                   if f.default is not msgspec.NODEFAULT}


def refused_field(exc: GatewayError, optional: Mapping[str, object]) -> str | None:
    """The optional request field an older gateway refused as unknown, else None."""
    if exc.status not in (400, 422):
        return None
    found = _UNKNOWN_FIELD.search(f"{exc.title} {exc.detail or ''}")
    return found.group(1) if found and found.group(1) in optional else None


class Worker:
    """Runs handlers for claimed runs until ``stop()``; see ``ostinato.sdk`` for the model."""

    def __init__(
        self,
        gateway_url: str,
        api_key: str,
        handlers: Mapping[str, Handler] | Sequence[Task],
        *,
        pools: Sequence[str] = ("default",),
        concurrency: int = 16,
        worker_id: str | None = None,
        claim_wait_seconds: float = 10.0,
        shutdown_grace_seconds: float = 30.0,
        capture_logs: bool = True,
        http_client: httpx.AsyncClient | None = None,
        liveness_seconds: float | None = LIVENESS_SECONDS,
    ) -> None:
        if not 1 <= concurrency <= MAX_CLAIM_RUNS:
            raise ValueError(f"concurrency must be in 1..{MAX_CLAIM_RUNS}")
        if not 0 <= claim_wait_seconds <= MAX_CLAIM_WAIT_SECONDS:
            raise ValueError(f"claim_wait_seconds must be in 0..{MAX_CLAIM_WAIT_SECONDS}")
        if liveness_seconds is not None and not MIN_LIVENESS_SECONDS <= liveness_seconds <= 60:
            raise ValueError(f"liveness_seconds must be in {MIN_LIVENESS_SECONDS}..60 or None")
        if shutdown_grace_seconds < 0 or not pools:
            raise ValueError("shutdown_grace_seconds must be >= 0 and pools non-empty")
        self._handlers = registry(handlers)
        self._versions = {name: h.version for name, h in sorted(self._handlers.items())}
        self._workflows = sorted(name for name, h in self._handlers.items() if h.workflow) or None
        self._payload_versions = {name: list(h.payload.accepts) for name, h in
                                  sorted(self._handlers.items()) if h.payload} or None
        self._base = gateway_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        self._pools = list(pools)
        self._concurrency = concurrency
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"
        self._claim_wait = claim_wait_seconds
        self._grace = shutdown_grace_seconds
        self._owns_client = http_client is None
        self._http11 = _Http11.for_url(self._base) if http_client is None else None
        self._client = http_client or (
            None if self._http11 else httpx.AsyncClient(timeout=httpx.Timeout(30.0)))
        self._liveness = liveness_seconds
        self._refused: dict[str, float] = {}  # claim field -> when a gateway refused it
        self._custody = Custody(lambda run_id, token: self._reporter.heartbeat(run_id, token),
                                ping=lambda: self._reporter.ping(),
                                liveness_seconds=liveness_seconds)
        self._reporter = Reporter(
            self._send_batch, worker_id=self.worker_id, on_heartbeat=self._custody.on_heartbeat
        )
        self._slot_freed = asyncio.Event()
        self._attempts = AttemptRunner(
            self._reporter, self._custody, concurrency=concurrency,
            on_slot_freed=self._slot_freed.set, capture_logs=capture_logs,
        )
        self._stop_requested = asyncio.Event()
        self._done = asyncio.Event()
        self._started = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Claim and run until ``stop()``; re-raises a fatal claim error (e.g. bad API key)."""
        if self._started:
            raise RuntimeError("Worker.run() may be called once")
        self._started = True
        self._attempts.open(needs_threads=any(not h.is_async for h in self._handlers.values()))
        self._reporter.start()
        heartbeats = asyncio.create_task(self._custody.heartbeat_loop(), name="ostinato-heartbeat")
        claims = asyncio.create_task(self._claim_loop(), name="ostinato-claim")
        stop_wait = asyncio.create_task(self._stop_requested.wait())
        log.info(
            "worker.started", worker_id=self.worker_id, tasks=self._versions,
            pools=self._pools, concurrency=self._concurrency,
        )
        error: BaseException | None = None
        try:
            await asyncio.wait({claims, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            if claims.done() and not claims.cancelled():
                error = claims.exception()
        finally:
            stop_wait.cancel()
            await self._shutdown(claims, heartbeats)
        if error is not None:
            raise error

    async def stop(self) -> None:
        """Stop claiming, let in-flight handlers finish (up to the grace), release the leases
        of those still running, flush, close; returns once all of that is done."""
        self._stop_requested.set()
        if not self._started:
            self._started = True  # a later run() must not start on a closed client
            await self._close_transport()
            self._done.set()
        await self._done.wait()

    async def run_until_signal(self) -> None:
        """``run()`` with SIGTERM/SIGINT mapped to a graceful ``stop()``."""
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT)
        for sig in signals:
            with suppress(NotImplementedError):  # not available on Windows event loops
                loop.add_signal_handler(sig, self._stop_requested.set)
        try:
            await self.run()
        finally:
            for sig in signals:
                with suppress(NotImplementedError):
                    loop.remove_signal_handler(sig)

    def run_forever(self) -> None:
        """Blocking entry point for a worker process: ``asyncio.run(run_until_signal())``, on
        uvloop when it is installed, with the process's heap settled as the services settle
        theirs (``ostinato.eventloop``): the worker owns the process, so it tunes its cyclic
        collector. ``run()`` inside your own loop leaves the collector alone."""
        eventloop.settle_heap()
        eventloop.run(self.run_until_signal())

    async def _shutdown(self, claims: asyncio.Task[None], heartbeats: asyncio.Task[None]) -> None:
        deadline = time.monotonic() + self._grace
        claims.cancel()
        with suppress(BaseException):
            await claims
        runners = set(self._attempts.runners)
        if runners:
            log.info("worker.draining", in_flight=len(runners), grace_s=self._grace)
            _, pending = await asyncio.wait(runners, timeout=self._grace)
            if pending:  # their runners cancel the handlers and release the leases
                log.warning("worker.grace_expired", releasing=len(pending))
                for runner in pending:
                    runner.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
        heartbeats.cancel()
        with suppress(BaseException):
            await heartbeats
        lost = await self._reporter.close(max(5.0, deadline - time.monotonic()))
        self._attempts.close()
        await self._goodbye()
        await self._close_transport()
        log.info("worker.stopped", worker_id=self.worker_id, unreported=len(lost))
        self._done.set()

    # -- claiming ------------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        # payload schemas first: a refused one (409) stops the worker before it claims
        await register(self._post, self.worker_id, self._handlers, self._stop_requested)
        failures = 0
        while not self._stop_requested.is_set():
            free = self._concurrency - len(self._custody) - self._attempts.orphaned_threads
            if free <= 0:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            sent_at = time.monotonic()
            try:
                runs = await self._claim(min(free, MAX_CLAIM_RUNS))
            except (GatewayError, httpx.HTTPError, msgspec.DecodeError) as exc:
                if isinstance(exc, GatewayError) and exc.status in _FATAL_CLAIM_STATUSES:
                    log.error("claim.refused", status=exc.status, error=str(exc))
                    raise
                failures += 1
                delay = max(backoff_delay(failures), retry_after_of(exc))
                log.warning("claim.retry", error=repr(exc), attempt=failures,
                            delay_s=round(delay, 3))
            else:
                failures = 0
                for run in runs:
                    self._accept(run, sent_at)
                if not runs and time.monotonic() - sent_at < 0.01:
                    await asyncio.sleep(0.05)  # a gateway answering empty at once: don't spin
                continue
            await asyncio.sleep(delay)

    async def _claim(self, max_runs: int) -> list[ClaimedRun]:
        request = ClaimRequest(
            worker_id=self.worker_id, pools=self._pools, max_runs=max_runs,
            wait_seconds=self._claim_wait, tasks=sorted(self._handlers), slots=self._concurrency,
            versions=self._versions, workflows=self._workflows,
            payload_versions=self._payload_versions, liveness_seconds=self._liveness,
        )
        tried: set[str] = set()  # fields refused while sending this claim
        while True:
            now = time.monotonic()
            left_out = {f: _CLAIM_OPTIONAL[f] for f, at in self._refused.items()
                        if f in tried or now - at < REFUSED_FIELD_SECONDS}
            sent = msgspec.structs.replace(request, **left_out) if left_out else request
            try:
                content = await self._post(CLAIM_PATH, _encoder.encode(sent),
                                           self._claim_wait + 10)
            except GatewayError as exc:
                field = refused_field(exc, _CLAIM_OPTIONAL)
                if field is None or field in left_out:
                    raise
                self._refused[field] = now
                tried.add(field)
                log.warning("claim.field_refused", field=field, again_in_s=REFUSED_FIELD_SECONDS,
                            reason="the gateway predates it (a rolling upgrade)")
                continue
            return _claim_decoder.decode(content).runs

    def _accept(self, run: ClaimedRun, sent_at: float) -> None:
        handler = self._handlers.get(run.task)
        if handler is None:
            log.error("run.unknown_task", run_id=run.run_id, task=run.task)
            message = f"no handler for task {run.task!r} on worker {self.worker_id}"
            error = sdk_error("unknown_task", message, retryable=False)
            self._reporter.fail(run.run_id, run.fencing_token, error)
            return
        hook = self._custody.heartbeat_now
        ctx = RunContext.from_claim(run, sent_at=sent_at, heartbeat_hook=hook, journal=self)
        ctx.bind_loop(asyncio.get_running_loop())
        self._custody.add(ctx)
        self._attempts.start(ctx, handler, run.payload, run.traceparent)

    async def _goodbye(self) -> None:
        """Best effort: a gateway that does not answer forgets the worker after its TTL."""
        body = _encoder.encode(GoodbyeRequest(worker_id=self.worker_id))
        try:
            await self._post(GOODBYE_PATH, body, 5.0)
        except Exception as exc:  # stopping must not fail on a courtesy call
            log.warning("worker.goodbye_failed", error=repr(exc))

    # -- workflow steps (the StepJournal of every context this worker starts) -----------------

    def record(self, item: StepItem) -> asyncio.Future[BatchItemResult]:
        return self._reporter.step(item)

    def started(self, ctx: RunContext, seq: int, name: str) -> None:
        self._reporter.started(ctx.run_id, ctx.fencing_token, seq, name)

    async def page(self, ctx: RunContext, after: int, limit: int) -> list[StepRecord]:
        body = _encoder.encode(StepsRequest(fencing_token=ctx.fencing_token, after=after,
                                            limit=limit))
        failures = 0
        while True:
            try:
                content = await self._post(run_path(ctx.run_id, "steps"), body, 30.0)
            except GatewayError as exc:
                if exc.status in (404, 409):
                    ctx.mark_lease_lost()
                    raise LeaseLost(ctx.run_id) from exc
                if exc.status != 503 or failures >= _PAGE_RETRIES:
                    raise
                failures += 1
                delay = max(backoff_delay(failures), retry_after_of(exc))
            except _RETRIED_TRANSPORT:  # a gateway restarting: a read, safe to repeat
                if failures >= _PAGE_RETRIES:
                    raise
                failures += 1
                delay = backoff_delay(failures)
            else:
                return _steps_decoder.decode(content).steps
            log.warning("steps.retry", run_id=ctx.run_id, attempt=failures,
                        delay_s=round(delay, 3))
            await asyncio.sleep(delay)

    # -- HTTP ----------------------------------------------------------------------------------

    async def _send_batch(self, request: BatchRequest) -> BatchResponse:
        return _batch_decoder.decode(await self._post(BATCH_PATH, _encoder.encode(request), 30.0))

    async def _post(self, path: str, body: bytes, read_seconds: float) -> bytes:
        """POST to the gateway; the body of a 200, else GatewayError (httpx's errors for a
        failed exchange)."""
        headers = dict(self._headers)
        propagate.inject(headers)  # W3C traceparent; a no-op without an OTel SDK
        if self._http11 is not None:
            status, reason, content = await self._http11.post(path, body, headers, read_seconds)
        else:
            assert self._client is not None
            response = await self._client.post(
                self._base + path, content=body, headers=headers, timeout=read_seconds
            )
            status, reason, content = (response.status_code, response.reason_phrase,
                                       response.content)
        if status != 200:
            after: float | None = None
            try:
                problem = _problem_decoder.decode(content)
                title, detail = problem.title or reason, problem.detail
                after = problem.retry_after_seconds
            except msgspec.DecodeError:
                title, detail = reason, content.decode(errors="replace")[:500] or None
            raise GatewayError(status, title, detail, after)
        return content

    async def _close_transport(self) -> None:
        if self._http11 is not None:
            self._http11.close()
        elif self._owns_client and self._client is not None:
            await self._client.aclose()


_MAX_CONNECTIONS = 100  # as httpx's default pool: more concurrent requests wait for one
_MAX_IDLE = 20  # kept-alive connections kept for reuse (httpx: 20)
_Answer = tuple[int, str, bytes]  # status, reason phrase, body


class _Http11:
    """POSTs to a plain-http gateway over kept-alive HTTP/1.1 connections (see the module doc).

    One request at a time per connection (no pipelining); a connection the gateway closed while
    idle (uvicorn's keep-alive timeout) is dropped, not reused. A request cancelled or timed out
    closes its connection, so the gateway sees the hang-up (a long-poll claim abandoned by a
    stopping worker leases it nothing). Failures raise httpx's exceptions, as httpx would:
    ConnectError, ConnectTimeout, ReadTimeout, ReadError, RemoteProtocolError. A request is not
    retried here; callers retry as they do with httpx (the reporter, the claim loop)."""

    def __init__(self, host: str, port: int, host_header: str, prefix: str) -> None:
        self._host = host
        self._port = port
        self._head = f"Host: {host_header}\r\nUser-Agent: ostinato-sdk\r\n"
        self._prefix = prefix
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(_MAX_CONNECTIONS)
        self._closed = False

    @classmethod
    def for_url(cls, base_url: str) -> _Http11 | None:
        """The transport for `base_url`, or None where httpx must do it: not plain http, a
        URL with credentials, a query or fragment, or a proxy configured in the environment."""
        url = urlsplit(base_url)
        if (url.scheme != "http" or not url.hostname or url.username is not None
                or url.password is not None or url.query or url.fragment):
            return None
        proxies = urllib.request.getproxies()
        if ((proxies.get("http") or proxies.get("all"))
                and not urllib.request.proxy_bypass_environment(url.hostname, proxies)):
            return None
        try:
            port = url.port or 80
        except ValueError:
            return None
        return cls(url.hostname, port, url.netloc, url.path.rstrip("/"))

    async def post(self, path: str, body: bytes, headers: Mapping[str, str],
                   read_seconds: float) -> _Answer:
        """One POST: (status, reason phrase, body)."""
        if self._closed:
            raise httpx.ConnectError("the worker's gateway connections are closed")
        lines = [f"POST {self._prefix}{path} HTTP/1.1\r\n", self._head,
                 f"Content-Length: {len(body)}\r\n"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise httpx.LocalProtocolError(f"invalid header {name!r}")
            lines.append(f"{name}: {value}\r\n")
        lines.append("\r\n")
        message = "".join(lines).encode("latin-1") + body
        conn: _Connection | None = None
        phase = "pool"
        try:
            async with asyncio.timeout(read_seconds), self._slots:
                conn = self._reuse()
                if conn is None:
                    phase = "connect"
                    conn = await self._connect()
                phase = "read"
                answer = await conn.exchange(message)
        except TimeoutError:
            if conn is not None:
                conn.close()
            error = {"pool": httpx.PoolTimeout, "connect": httpx.ConnectTimeout,
                     "read": httpx.ReadTimeout}[phase]
            raise error(f"no answer from the gateway within {read_seconds}s ({phase})") \
                from None
        except BaseException:  # cancelled, or the exchange failed: never reuse it
            if conn is not None:
                conn.close()
            raise
        if conn.reusable and not self._closed and len(self._idle) < _MAX_IDLE:
            self._idle.append(conn)
        else:
            conn.close()
        return answer

    def close(self) -> None:
        """Close the idle connections; requests in flight close theirs when they end."""
        self._closed = True
        for conn in self._idle:
            conn.close()
        self._idle.clear()

    def _reuse(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable:
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(_Connection, self._host, self._port)
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to the gateway at "
                                     f"{self._host}:{self._port}: {exc}") from exc
        return conn


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 client connection: `exchange` writes a request and waits for its response,
    fed to httptools' parser as bytes arrive (its callbacks are the on_* methods)."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._open = True
        self._waiter: asyncio.Future[_Answer] | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._reason: list[bytes] = []
        self._body: list[bytes] = []
        self._framed = False  # Content-Length or chunked: the message says where it ends
        self._headers_done = False
        self._keep_alive = False

    @property
    def reusable(self) -> bool:
        return (self._open and self._keep_alive and self._waiter is None
                and self._transport is not None and not self._transport.is_closing())

    async def exchange(self, message: bytes) -> _Answer:
        assert self._transport is not None and self._waiter is None
        self._waiter = asyncio.get_running_loop().create_future()
        self._parser = httptools.HttpResponseParser(self)
        self._reason, self._body = [], []
        self._framed = self._headers_done = self._keep_alive = False
        self._transport.write(message)  # head and body in one write: one wake-up over there
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        self._open = False
        if self._transport is not None:
            self._transport.close()

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # bytes nobody asked for: the connection is out of step
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed answer from the gateway: {exc}"))

    def eof_received(self) -> bool:
        self._open = False
        if self._waiter is not None and not self._waiter.done():
            if self._headers_done and not self._framed:  # a body delimited by the close
                self._answer()
            else:
                self._fail(httpx.RemoteProtocolError(
                    "the gateway closed the connection without a complete answer"))
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._open = False
        if self._waiter is not None and not self._waiter.done():
            self._fail(httpx.ReadError(f"connection to the gateway lost: {exc!r}") if exc
                       else httpx.RemoteProtocolError(
                           "the gateway closed the connection without a complete answer"))

    # -- httptools callbacks ------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._waiter is None or self._waiter.done():
            self._open = False  # a second answer to one request: never reuse this connection

    def on_status(self, status: bytes) -> None:
        self._reason.append(status)

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length" or (name == b"transfer-encoding"
                                         and b"chunked" in value.lower()):
            self._framed = True

    def on_headers_complete(self) -> None:
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self._parser.get_status_code() < 200:  # informational (103): the answer follows
            self._reason, self._body = [], []
            self._framed = self._headers_done = False
            return
        self._keep_alive = self._parser.should_keep_alive()
        self._answer()

    def _answer(self) -> None:
        if self._waiter is None or self._waiter.done():
            return
        status = self._parser.get_status_code()
        reason = b"".join(self._reason).decode("latin-1").strip()
        if not reason:
            try:
                reason = HTTPStatus(status).phrase
            except ValueError:
                reason = ""
        self._waiter.set_result((status, reason, b"".join(self._body)))
        if not self._keep_alive:
            self.close()

    def _fail(self, exc: Exception) -> None:
        self._keep_alive = False
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self.close()
