"""The running attempt's context, reachable from anywhere in the handler via ``current()``.

A ``contextvars.ContextVar`` (as Temporal's ``activity.info()``) keeps handler signatures plain:
a handler takes the payload and nothing else, and helpers deep in the call stack can still read
the idempotency key or heartbeat. The context is copied into the thread that runs a sync handler,
so ``current()`` works there too (use ``heartbeat_sync()`` from threads).

Rejected: an explicit ``ctx`` parameter (Hatchet) forces every handler to accept an argument it
rarely needs, and injection by annotation (pgqueuer) makes the call signature magic.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog

from ostinato.sdk.errors import Cancelled, LeaseLost, OstinatoWorkerError
from ostinato.wire.worker import (
    BatchItemResult,
    ClaimedRun,
    HeartbeatItem,
    StepItem,
    StepRecord,
)

__all__ = ["Custody", "HeartbeatHook", "InterruptHook", "RunContext", "StepJournal", "current",
           "use_context"]

HeartbeatHook = Callable[["RunContext"], Awaitable[None]]
# Called on the event loop when the attempt must stop: "cancel" (cancel requested) or
# "lease_lost"; the Worker cancels an async handler's task with it.
InterruptHook = Callable[[str], None]
SendHeartbeat = Callable[[str, int], "asyncio.Future[BatchItemResult]"]
log = structlog.get_logger("ostinato.sdk")

_current: contextvars.ContextVar[RunContext] = contextvars.ContextVar("ostinato_run_context")


class StepJournal(Protocol):
    """Where a workflow's steps are recorded and read back (the Worker: the gateway)."""

    def record(self, item: StepItem) -> asyncio.Future[BatchItemResult]: ...

    def started(self, ctx: RunContext, seq: int, name: str) -> None:
        """Step ``seq`` began executing (shown as the run's running step; best effort)."""

    async def page(self, ctx: RunContext, after: int, limit: int) -> list[StepRecord]: ...


class RunContext:
    """What a handler may know about its attempt, plus the lease it runs under.

    Identity fields are fixed for the attempt. ``lease_expires_at`` (the gateway's view) and the
    cancelled / lease-lost flags change as heartbeats are answered. ``idempotency_key`` is the
    same for every attempt of the run: pass it to external APIs (and ``effects.apply_once``) so
    a repeated attempt does not repeat an effect. ``fencing_token`` grows with every attempt:
    ``effects.fence`` makes your own database refuse writes from an older attempt.
    """

    __slots__ = (
        "_cancel_at_claim",
        "_cancelled",
        "_heartbeat_hook",
        "_heartbeating",
        "_interrupt",
        "_journal",
        "_lease_deadline",
        "_lease_expires_at",
        "_lease_lost",
        "_loop",
        "_step_starts",
        "attempt",
        "awaited",
        "fencing_token",
        "final_attempt",
        "idempotency_key",
        "job_id",
        "lease_ttl_seconds",
        "run_id",
        "scheduled_for",
        "steps_done",
        "task",
        "tenant_id",
        "timeout_seconds",
    )

    def __init__(
        self,
        *,
        run_id: str,
        job_id: str,
        tenant_id: str,
        task: str,
        attempt: int,
        fencing_token: int,
        idempotency_key: str,
        scheduled_for: datetime,
        lease_expires_at: datetime,
        lease_ttl_seconds: float,
        lease_deadline: float | None = None,
        heartbeat_hook: HeartbeatHook | None = None,
        timeout_seconds: float | None = None,
        steps_done: int = 0,
        journal: StepJournal | None = None,
        cancel_requested: bool = False,
        final_attempt: bool = False,
        step_starts: bool = False,
        awaited: bool = False,
    ) -> None:
        self.run_id = run_id
        self.job_id = job_id
        self.tenant_id = tenant_id
        self.task = task
        self.attempt = attempt
        self.fencing_token = fencing_token
        self.idempotency_key = idempotency_key
        self.scheduled_for = scheduled_for
        self.lease_ttl_seconds = lease_ttl_seconds
        self.timeout_seconds = timeout_seconds  # the attempt's time limit; None: no limit
        self.steps_done = steps_done  # workflow steps the run has recorded (ostinato.sdk.workflow)
        # A retryable failure now would dead-letter the run: a workflow compensates first.
        self.final_attempt = final_attempt
        # A parent is told of this run's end (ClaimedRun.awaited): its outcome does not linger.
        self.awaited = awaited
        self._journal = journal
        self._step_starts = step_starts  # the gateway takes step starts (ClaimedRun.step_starts)
        self._lease_expires_at = lease_expires_at
        # Monotonic instant by which the lease has surely not yet expired on the gateway:
        # (time the claim/heartbeat request was *sent*) + ttl is a lower bound of the expiry.
        self._lease_deadline = (
            lease_deadline if lease_deadline is not None else time.monotonic() + lease_ttl_seconds
        )
        self._heartbeat_hook = heartbeat_hook
        self._cancelled = False
        # Claimed with its cancel requested already (a workflow woken to compensate): seen by
        # is_cancelled(), but it interrupts nothing, so the handler gets to run.
        self._cancel_at_claim = cancel_requested
        self._lease_lost = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._interrupt: InterruptHook | None = None
        self._heartbeating: set[asyncio.Task[Any]] = set()  # tasks awaiting heartbeat()

    @classmethod
    def from_claim(
        cls, run: ClaimedRun, *, sent_at: float, heartbeat_hook: HeartbeatHook | None = None,
        journal: StepJournal | None = None,
    ) -> RunContext:
        """Build the context of a claimed run; ``sent_at`` is the claim request's monotonic time."""
        return cls(
            run_id=run.run_id,
            job_id=run.job_id,
            tenant_id=run.tenant_id,
            task=run.task,
            attempt=run.attempt,
            fencing_token=run.fencing_token,
            idempotency_key=run.idempotency_key,
            scheduled_for=run.scheduled_for,
            lease_expires_at=run.lease_expires_at,
            lease_ttl_seconds=run.lease_ttl_seconds,
            lease_deadline=sent_at + run.lease_ttl_seconds,
            heartbeat_hook=heartbeat_hook,
            timeout_seconds=run.timeout_seconds,
            steps_done=run.steps_done,
            journal=journal,
            cancel_requested=run.cancel_requested,
            final_attempt=run.final_attempt,
            step_starts=run.step_starts,
            awaited=run.awaited,
        )

    @property
    def retries(self) -> int:
        """Attempts before this one (0-based, Celery's ``request.retries``)."""
        return self.attempt - 1

    @property
    def lease_expires_at(self) -> datetime:
        return self._lease_expires_at

    @property
    def lease_deadline(self) -> float:
        return self._lease_deadline

    def database_now(self) -> datetime:
        """This worker's estimate of the database clock: the lease's expiry (the database's
        time) less what is left of it by this process's monotonic clock."""
        return self._lease_expires_at - timedelta(seconds=self._lease_deadline - time.monotonic())

    def is_cancelled(self) -> bool:
        """True once the gateway relayed a cancel request; sync handlers should poll this."""
        return self._cancelled or self._cancel_at_claim

    def take_cancel(self, on_cancel: Callable[[], None]) -> None:
        """From now on a cancel request calls `on_cancel` instead of interrupting the whole
        handler (a workflow stops its running step and compensates); lease loss, the time
        limit and shutdown still interrupt it."""
        original = self._interrupt

        def hook(reason: str) -> None:
            if reason == "cancel":
                on_cancel()
            elif original is not None:
                original(reason)

        self._interrupt = hook

    def is_lease_lost(self) -> bool:
        """True once the gateway fenced this attempt off; its outcome will not be reported."""
        return self._lease_lost

    async def heartbeat(self) -> None:
        """Renew the lease now and learn about cancellation.

        Raises ``LeaseLost`` if the gateway rejects the fencing token (or the lease could not be
        renewed before it surely expired), and ``Cancelled`` if a cancel was requested.
        Periodic heartbeats happen anyway; call this before an effect you must not duplicate.
        """
        if self._lease_lost:
            raise LeaseLost(self.run_id)
        if self._heartbeat_hook is not None:
            task = asyncio.current_task()
            if task is not None:
                self._heartbeating.add(task)
            try:
                await self._heartbeat_hook(self)
            finally:
                if task is not None:
                    self._heartbeating.discard(task)
        if self._lease_lost:
            raise LeaseLost(self.run_id)
        if self._cancelled:
            raise Cancelled(self.run_id)

    def heartbeat_sync(self) -> None:
        """``heartbeat()`` for sync handlers running in a worker thread."""
        loop = self._loop
        if loop is None:
            raise OstinatoWorkerError("heartbeat_sync() needs a context started by a Worker")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise OstinatoWorkerError("heartbeat_sync() on the event loop; use await heartbeat()")
        asyncio.run_coroutine_threadsafe(self.heartbeat(), loop).result()

    async def record_step(self, item: StepItem) -> BatchItemResult:
        """Record a workflow step's outcome; the answer says whether the lease still holds."""
        return await self._step_journal().record(item)

    def step_started(self, seq: int, name: str) -> None:
        """A workflow step began executing: said in the worker's next request (no request of
        its own), where the gateway takes it (`GET /v1/runs/{id}` shows it until recorded)."""
        if self._step_starts and self._journal is not None:
            self._journal.started(self, seq, name)

    async def steps_page(self, *, after: int, limit: int) -> list[StepRecord]:
        """The run's recorded steps after position ``after``, in order."""
        return await self._step_journal().page(self, after, limit)

    def _step_journal(self) -> StepJournal:
        if self._journal is None:
            raise OstinatoWorkerError("workflow steps need a context started by a Worker (or "
                                      "ostinato.testing.handlers.HandlerEnvironment)")
        return self._journal

    # -- used by the Worker (and test harnesses) to apply what the gateway said -------------

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def record_renewal(self, lease_expires_at: datetime | None, lease_deadline: float) -> None:
        if lease_expires_at is not None:
            self._lease_expires_at = lease_expires_at
        self._lease_deadline = max(self._lease_deadline, lease_deadline)

    def in_heartbeat(self, task: asyncio.Task[Any]) -> bool:
        """True while ``task`` awaits ``heartbeat()``, which raises ``LeaseLost``/``Cancelled``
        itself: the answer is then delivered there rather than by cancelling the task."""
        return task in self._heartbeating

    def set_interrupt(self, hook: InterruptHook | None) -> None:
        """Install the hook that stops the handler; it runs at once if a flag is already set."""
        self._interrupt = hook
        if hook is not None and (self._lease_lost or self._cancelled):
            hook("lease_lost" if self._lease_lost else "cancel")

    def mark_lease_lost(self) -> None:
        first = not self._lease_lost
        self._lease_lost = True
        if first and self._interrupt is not None:
            self._interrupt("lease_lost")

    def request_cancel(self) -> None:
        first = not self._cancelled
        self._cancelled = True
        if first and self._interrupt is not None:
            self._interrupt("cancel")

    def __repr__(self) -> str:
        return (
            f"RunContext(run_id={self.run_id!r}, task={self.task!r}, attempt={self.attempt}, "
            f"fencing_token={self.fencing_token})"
        )


def current() -> RunContext:
    """The context of the attempt this code runs in; raises outside a handler."""
    try:
        return _current.get()
    except LookupError:
        raise OstinatoWorkerError("current() called outside a running handler") from None


def enter_context(ctx: RunContext) -> None:
    """Make ``ctx`` what ``current()`` returns for the rest of the calling task: for a task
    that runs one attempt and ends with it (the worker's runners), where a reset is no use."""
    _current.set(ctx)


@contextmanager
def use_context(ctx: RunContext) -> Iterator[RunContext]:
    """Make ``ctx`` what ``current()`` returns inside the block (worker and test harnesses)."""
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)


class Custody:
    """The runs a worker holds leases on, kept alive by heartbeats until their handlers end.

    Periodic heartbeats go out every ``lease_ttl/3`` for every run in custody (they share one
    batch request), and in between a ping every ``liveness_seconds`` (one small request for
    the whole worker, not a write per run): the gateway records it, and a worker silent for a
    few seconds is judged dead and its runs are taken back (``ostinato.policy.liveness``).
    Answers are applied here: 200 renews the lease (and relays cancel requests), 409/404 mark
    the context lease-lost so no outcome is reported for it.
    """

    def __init__(self, send_heartbeat: SendHeartbeat, *,
                 ping: Callable[[], None] | None = None,
                 liveness_seconds: float | None = None) -> None:
        self._send = send_heartbeat
        self._ping = ping
        self._liveness = liveness_seconds if ping is not None else None
        self._runs: dict[str, RunContext] = {}
        self._nonempty = asyncio.Event()

    def __len__(self) -> int:
        return len(self._runs)

    def add(self, ctx: RunContext) -> None:
        previous = self._runs.get(ctx.run_id)
        if previous is not None:  # a newer fencing token fences our older attempt off
            previous.mark_lease_lost()
        self._runs[ctx.run_id] = ctx
        self._nonempty.set()

    def discard(self, ctx: RunContext) -> None:
        if self._runs.get(ctx.run_id) is ctx:
            del self._runs[ctx.run_id]
            if not self._runs:
                self._nonempty.clear()

    async def heartbeat_loop(self) -> None:
        """Heartbeat every run in custody each ``min(lease_ttl)/3`` seconds, and ping every
        ``liveness_seconds`` in between, forever."""
        while True:
            await self._nonempty.wait()
            ttl = min((c.lease_ttl_seconds for c in self._runs.values()), default=3.0)
            due = time.monotonic() + ttl / 3
            while self._liveness is not None and self._ping is not None \
                    and due - time.monotonic() > self._liveness:
                self._ping()
                await asyncio.sleep(self._liveness)
                if not self._runs:
                    break
            else:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
            for ctx in list(self._runs.values()):
                if not ctx.is_lease_lost():
                    self._send(ctx.run_id, ctx.fencing_token)

    async def heartbeat_now(self, ctx: RunContext) -> None:
        """The ``RunContext.heartbeat()`` hook: wait for the answer, at most until the lease
        has surely expired (then ownership cannot be confirmed and the lease counts as lost)."""
        fut = self._send(ctx.run_id, ctx.fencing_token)
        try:
            remaining = max(0.0, ctx.lease_deadline - time.monotonic())
            await asyncio.wait_for(asyncio.shield(fut), timeout=remaining)
        except TimeoutError:
            ctx.mark_lease_lost()
            log.warning("run.lease_lost", run_id=ctx.run_id, reason="not renewed in time")
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not fut.cancelled() or (task is not None and task.cancelling()):
                raise
            ctx.mark_lease_lost()  # reporter closed: ownership can no longer be confirmed

    def on_heartbeat(self, item: HeartbeatItem, result: BatchItemResult, sent_at: float) -> None:
        """Apply one heartbeat answer; ``sent_at`` bounds the renewed lease from below."""
        ctx = self._runs.get(item.run_id)
        if ctx is None or ctx.fencing_token != item.fencing_token:
            return
        if result.status == 200:
            ctx.record_renewal(result.lease_expires_at, sent_at + ctx.lease_ttl_seconds)
            if result.cancel_requested and not ctx.is_cancelled():
                ctx.request_cancel()
                log.info("run.cancel_requested", run_id=ctx.run_id)
        elif result.status in (404, 409):
            ctx.mark_lease_lost()
            log.warning(
                "run.lease_lost", run_id=ctx.run_id, status=result.status, detail=result.detail
            )
        else:
            log.error(
                "heartbeat.rejected", run_id=ctx.run_id, status=result.status, detail=result.detail
            )
