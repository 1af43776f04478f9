"""Running one attempt: the handler under its time limit, cancel and lease loss, then the outcome.

Each claimed run gets a *runner* task (owned by the Worker) that runs the handler as a separate
task and decides what to report from how it ended. Keeping the handler in its own task is the
mechanism for stopping it: the runner (or a heartbeat answer, through the context's interrupt
hook) cancels that task, so an async handler receives ``asyncio.CancelledError`` at its next
``await``, exactly as any asyncio code is stopped. Libraries unwind correctly on it (an asyncpg
transaction rolls back, an httpx request is abandoned) and ``finally`` blocks run; the runner is
never cancelled by it and still reports. An arbitrary exception thrown into the handler instead
would not be understood by those libraries, which is why ``Cancelled`` itself is only raised at
the explicit safe points (``heartbeat()``, ``heartbeat_sync()``).

================================  ===========================================================
how the attempt ended             reported
================================  ===========================================================
payload not of the declared type  failure ``invalid_payload``, not retryable, classified,
(``@task(payload=...)``)          naming the field; the handler is not called
returned                          completion (also when a cancel was requested meanwhile: the
                                  gateway records the result and ignores it)
raised                            failure per ``errors.error_info`` (``LeaseLost``: nothing)
``timeout_seconds`` elapsed       handler task cancelled; failure ``attempt_timed_out``,
                                  retryable, classified
cancel requested (heartbeat)      handler task cancelled; when it ends by an exception,
                                  failure ``cancelled``, not retryable, classified
lease lost (heartbeat 409/404)    handler task cancelled; nothing reported
worker shutdown after the grace   handler task cancelled; the lease is *released* (the run is
                                  queued again at once, no attempt used)
================================  ===========================================================

An interrupted async handler gets ``unwind_seconds`` (5 s) to finish its cleanup; if it swallows
the cancellation and keeps running past that, the outcome is reported anyway and the task runs
on unobserved. A sync handler (in a thread) cannot be interrupted at all: at its deadline the
timeout is reported and the thread finishes unobserved, its result discarded; it keeps its
concurrency slot until it actually ends, so the worker does not claim runs it has no thread
for. Sync handlers learn about cancellation by polling ``is_cancelled()`` or
``heartbeat_sync()``. Either way the run's fencing token protects storage from the late writer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import structlog
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from ostinato.sdk.context import Custody, RunContext, enter_context
from ostinato.sdk.errors import LeaseLost, PermanentError, Suspended, error_info, sdk_error
from ostinato.sdk.logs import LogBuffer, capture_into, install_log_capture
from ostinato.sdk.reporter import Reporter
from ostinato.sdk.tasks import Registered, decode_payload
from ostinato.wire.worker import ErrorInfo, LogLine

__all__ = ["AttemptRunner"]

log = structlog.get_logger("ostinato.sdk")
tracer = trace.get_tracer("ostinato.sdk")
_encoder = msgspec.json.Encoder()


def _recording() -> bool:
    """Whether spans are recorded: a provider is installed, neither the API's placeholder nor
    its no-op one. Without one, a span per attempt would cost without recording anything."""
    return not isinstance(trace.get_tracer_provider(),
                          (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


async def _ended_within(task: asyncio.Future[Any], seconds: float | None) -> bool:
    """Wait until `task` is done or `seconds` elapsed; True when it is done. A cancelled waiter
    leaves the task running, as `asyncio.wait({task}, timeout=...)` does, with less work per
    attempt (no set, no counter, no second callback)."""
    if task.done():
        return True
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    task.add_done_callback(wake)
    timer = loop.call_later(seconds, wake) if seconds is not None else None
    try:
        await waiter
    finally:
        task.remove_done_callback(wake)
        if timer is not None:
            timer.cancel()
    return task.done()


@dataclass(slots=True)
class _Ended:
    kind: Literal["returned", "raised", "timed_out", "cancelled"]
    value: Any = None
    exc: BaseException | None = None


class AttemptRunner:
    """Starts and tracks one runner task per claimed run; see the module docstring."""

    unwind_seconds = 5.0  # how long an interrupted async handler may take to unwind

    def __init__(
        self,
        reporter: Reporter,
        custody: Custody,
        *,
        concurrency: int,
        on_slot_freed: Callable[[], None],
        capture_logs: bool = True,
    ) -> None:
        self._reporter = reporter
        self._custody = custody
        self._concurrency = concurrency
        self._sem = asyncio.Semaphore(concurrency)
        self._on_slot_freed = on_slot_freed
        self._capture_logs = capture_logs
        self._executor: ThreadPoolExecutor | None = None
        self._orphans = 0
        self.runners: set[asyncio.Task[None]] = set()

    @property
    def orphaned_threads(self) -> int:
        """Sync handlers given up on (timeout, shutdown) whose threads have not ended yet."""
        return self._orphans

    def open(self, needs_threads: bool) -> None:
        if needs_threads and self._executor is None:
            self._executor = ThreadPoolExecutor(self._concurrency, "ostinato-handler")
        if self._capture_logs:
            install_log_capture()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    def start(self, ctx: RunContext, handler: Registered, payload: Any,
              traceparent: str | None) -> None:
        runner = asyncio.create_task(self._attempt(ctx, handler, payload, traceparent),
                                     name=f"ostinato-run-{ctx.run_id}")
        self.runners.add(runner)
        runner.add_done_callback(self.runners.discard)

    # -- one attempt ---------------------------------------------------------------------------

    async def _attempt(self, ctx: RunContext, handler: Registered, payload: Any,
                       traceparent: str | None) -> None:
        # A runner is a task of its own (`start`), so what it binds lasts as long as its
        # attempt, the outcome's log lines included, and goes with it: no reset to make.
        fields = {"run_id": ctx.run_id, "tenant_id": ctx.tenant_id, "job_id": ctx.job_id,
                  "attempt": ctx.attempt, "task": ctx.task}
        enter_context(ctx)
        structlog.contextvars.bind_contextvars(**fields)
        buffer = LogBuffer(omit=fields) if self._capture_logs else None
        started = time.monotonic()
        try:
            async with self._sem:
                started = time.monotonic()
                if buffer is not None:
                    buffer.started = started
                    install_log_capture()  # again: a later structlog.configure() drops it
                if _recording():
                    ended = await self._traced(ctx, handler, payload, buffer, fields,
                                               traceparent)
                else:
                    if traceparent:  # the handler's own calls still carry the run's trace
                        otel_context.attach(propagate.extract({"traceparent": traceparent}))
                    ended = await self._run_handler(ctx, handler, payload, buffer)
        except asyncio.CancelledError:  # worker shutdown after the grace period
            self._release(ctx)
            raise
        finally:
            self._custody.discard(ctx)
            self._on_slot_freed()
        self._report(ctx, ended, buffer.lines() if buffer is not None else None, started)

    async def _traced(self, ctx: RunContext, handler: Registered, payload: Any,
                      buffer: LogBuffer | None, fields: dict[str, Any],
                      traceparent: str | None) -> _Ended:
        """The attempt in a CONSUMER span continuing the run's trace (a recording provider is
        installed)."""
        attributes = {f"ostinato.{k}": v for k, v in fields.items()}
        parent = propagate.extract({"traceparent": traceparent} if traceparent else {})
        with tracer.start_as_current_span(
            f"run {ctx.task}", context=parent, kind=trace.SpanKind.CONSUMER,
            attributes=attributes,
        ) as span:
            ended = await self._run_handler(ctx, handler, payload, buffer)
            if isinstance(ended.exc, Suspended):
                span.set_attribute("ostinato.suspended", ended.exc.reason)
            elif ended.exc is not None:
                span.record_exception(ended.exc)
            if ended.kind != "returned" and not isinstance(ended.exc, Suspended):
                span.set_status(trace.StatusCode.ERROR, ended.kind)
        return ended

    async def _run_handler(self, ctx: RunContext, handler: Registered, payload: Any,
                           buffer: LogBuffer | None) -> _Ended:
        try:
            if handler.payload is not None:  # the declared type, else no call
                payload = decode_payload(ctx.task, handler.payload, payload)
        except PermanentError as exc:
            return _Ended("raised", exc=exc)
        return await self._invoke(ctx, handler, payload, buffer)

    async def _invoke(self, ctx: RunContext, handler: Registered, payload: Any,
                      buffer: LogBuffer | None) -> _Ended:
        context = contextvars.copy_context()  # current(), log bindings, log capture
        if buffer is not None:
            capture_into(context, buffer)
        if handler.is_async:
            return await self._invoke_async(ctx, handler, payload, context)
        return await self._invoke_sync(ctx, handler, payload, context)

    async def _invoke_async(self, ctx: RunContext, handler: Registered, payload: Any,
                            context: contextvars.Context) -> _Ended:
        async def call() -> Any:
            return await handler.fn(payload)

        loop = asyncio.get_running_loop()
        task = loop.create_task(call(), context=context)
        interrupted: list[str] = []

        def interrupt(reason: str) -> None:
            if task.done():
                return
            interrupted.append(reason)
            message = f"ostinato: {reason} (run {ctx.run_id})"
            try:
                caller = asyncio.current_task()
            except RuntimeError:  # from another thread
                loop.call_soon_threadsafe(task.cancel, message)
                return
            if reason in ("cancel", "lease_lost") and (caller is task or ctx.in_heartbeat(task)):
                return  # the handler learns it from Cancelled / LeaseLost raised right there
            task.cancel(message)

        ctx.set_interrupt(interrupt)
        try:
            if not await _ended_within(task, ctx.timeout_seconds):  # the attempt's time limit
                interrupt("timeout")
                await _ended_within(task, self.unwind_seconds)
        except asyncio.CancelledError:  # the runner itself: worker shutdown
            interrupt("shutdown")
            with suppress(asyncio.CancelledError):
                await _ended_within(task, self.unwind_seconds)
            if task.done() and not task.cancelled() and task.exception() is None:
                return _Ended("returned", task.result())  # it finished after all: report it
            _abandon(task)
            raise
        finally:
            ctx.set_interrupt(None)
        if not task.done():  # only after a timeout: it ignored the cancellation
            log.warning("run.handler_ignored_cancellation", reasons=interrupted,
                        unwind_s=self.unwind_seconds)
            _abandon(task)
            return _Ended("timed_out")
        if "timeout" in interrupted:
            return _Ended("timed_out")
        if task.cancelled():
            if interrupted:  # "cancel" or "lease_lost" (then nothing is reported)
                return _Ended("cancelled")
            return _Ended("raised", exc=asyncio.CancelledError("the handler cancelled itself"))
        exc = task.exception()
        if exc is not None:
            if "cancel" in interrupted and not isinstance(exc, LeaseLost):
                return _Ended("cancelled", exc=exc)  # its cleanup failed: still a cancellation
            return _Ended("raised", exc=exc)
        return _Ended("returned", task.result())

    async def _invoke_sync(self, ctx: RunContext, handler: Registered, payload: Any,
                           context: contextvars.Context) -> _Ended:
        if self._executor is None:  # a handler registered after open(): cannot happen normally
            self.open(needs_threads=True)
        assert self._executor is not None
        thread_future = self._executor.submit(context.run, handler.fn, payload)
        future = asyncio.wrap_future(thread_future)
        try:
            done = await _ended_within(future, ctx.timeout_seconds)
        except asyncio.CancelledError:
            if future.done() and not future.cancelled() and future.exception() is None:
                return _Ended("returned", future.result())
            self._orphan(thread_future, future)
            raise
        if not done:
            self._orphan(thread_future, future)
            return _Ended("timed_out")
        exc = future.exception()
        if exc is not None:
            return _Ended("raised", exc=exc)
        return _Ended("returned", future.result())

    def _orphan(self, thread_future: concurrent.futures.Future[Any],
                future: asyncio.Future[Any]) -> None:
        """Give up on a sync handler's thread; its slot stays taken until the thread ends."""
        future.add_done_callback(_consume)
        if thread_future.cancel():  # still queued: it will never run
            return
        self._orphans += 1
        loop = asyncio.get_running_loop()

        def ended(_: concurrent.futures.Future[Any]) -> None:
            with suppress(RuntimeError):  # the loop is gone: nobody counts slots any more
                loop.call_soon_threadsafe(self._orphan_ended)

        thread_future.add_done_callback(ended)
        log.warning("run.thread_abandoned", detail="a sync handler cannot be interrupted")

    def _orphan_ended(self) -> None:
        self._orphans -= 1
        self._on_slot_freed()

    # -- outcomes ------------------------------------------------------------------------------

    def _report(self, ctx: RunContext, ended: _Ended, logs: list[LogLine] | None,
                started: float) -> None:
        duration_ms = round((time.monotonic() - started) * 1000, 2)
        if ended.kind == "returned":
            self._complete(ctx, ended.value, logs, duration_ms)
            return
        exc = ended.exc
        if isinstance(exc, Suspended):  # the gateway ended the attempt when it suspended the run
            log.info("run.suspended", reason=exc.reason, duration_ms=duration_ms)
            return
        if isinstance(exc, LeaseLost) or ctx.is_lease_lost():
            ctx.mark_lease_lost()
            log.warning("run.outcome_withheld", reason="lease lost")
            return
        if ended.kind == "timed_out":
            limit = ctx.timeout_seconds or 0.0
            info = sdk_error("attempt_timed_out",
                             f"the handler did not finish within its {limit:g} s timeout",
                             retryable=True)
        elif ended.kind == "cancelled":
            info = sdk_error("cancelled", f"cancel requested: run {ctx.run_id}", retryable=False)
        else:
            assert exc is not None
            info = error_info(exc)
        # a traceback in the worker's log only for what the handler did not classify itself
        self._fail(ctx, info, logs, duration_ms, None if info.classified else exc)

    def _complete(self, ctx: RunContext, result: Any, logs: list[LogLine] | None,
                  duration_ms: float) -> None:
        try:
            output = msgspec.Raw(_encoder.encode(result))
        except Exception as exc:
            message = f"handler output is not JSON-serialisable: {exc}"
            info = sdk_error("invalid_output", message, retryable=False)
            self._fail(ctx, info, logs, duration_ms)
            return
        if ctx.is_lease_lost():
            log.warning("run.outcome_withheld", reason="lease lost")
            return
        self._reporter.complete(ctx.run_id, ctx.fencing_token, output, logs=logs,
                                urgent=ctx.awaited)
        log.info("run.completed", duration_ms=duration_ms, cancel_requested=ctx.is_cancelled())

    def _fail(self, ctx: RunContext, info: ErrorInfo, logs: list[LogLine] | None,
              duration_ms: float, exc: BaseException | None = None) -> None:
        if ctx.is_lease_lost():
            log.warning("run.outcome_withheld", reason="lease lost", error_type=info.type)
            return
        self._reporter.fail(ctx.run_id, ctx.fencing_token, info, logs=logs, urgent=ctx.awaited)
        log.warning("run.failed", error_type=info.type, retryable=info.retryable,
                    classified=info.classified, error=info.message, duration_ms=duration_ms,
                    exc_info=exc)

    def _release(self, ctx: RunContext) -> None:
        if ctx.is_lease_lost():
            return
        self._reporter.release(ctx.run_id, ctx.fencing_token)
        log.info("run.released", reason="worker shutdown")


def _abandon(task: asyncio.Future[Any]) -> None:
    """Stop caring about a task that outlived its interruption (no "never retrieved" noise)."""
    task.add_done_callback(_consume)


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
