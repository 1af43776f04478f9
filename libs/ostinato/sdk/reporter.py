"""Batching of heartbeats and outcomes into ``POST /v1/worker/batch`` requests.

Why: at thousands of runs per second a round trip per outcome would cost more than the runs
themselves (DESIGN "Performance shape"). Items are queued and flushed through ONE batch request
when ``max_items`` (200) are pending or ``linger_seconds`` (5 ms) after the first pending item,
whichever comes first. One request is in flight at a time; the next batch accumulates meanwhile,
so under load batches grow by themselves and at low rate the added latency stays ≤ 5 ms.

Workflow steps do not linger: a workflow waits for each step's answer before its next step, so
a lone workflow would pay the linger on every step. A pending step makes the batch due at once;
when a request is already in flight the step (and whatever else is pending) rides the next one,
so under load steps still share batches. An *urgent* outcome does the same: the outcome of a run
whose parent is told of its end (``ClaimedRun.awaited``: a fan-out chunk, whose end admits the
next chunk into the window, so the fan-out's rate is its window over this round trip).

A ping (``ping()``: the worker says it is alive, one a second while it holds runs) makes a
batch due like a heartbeat and rides whatever request goes next; alone, it is an empty batch,
sent once and never retried (the next ping follows within a second).

A step start (``started()``: a workflow step began executing) makes nothing due: it rides the
next request that goes anyway (another run's outcome, a heartbeat, the ping at the latest), so
showing a running step costs no round trip. The step's own report supersedes a start not sent
yet (the step is over); a start lost with a lone ping is kept for the next request.

Releases (a run given back at shutdown) travel in the same requests as outcomes. Captured logs
make outcomes large, so a request also stops taking outcomes once it carries ``max_log_bytes``
(4 MiB) of log lines; one outcome always fits, whatever its size.

Failure behaviour: a transport error or a non-200 answer for the whole batch (a 503 while the
gateway's database restarts waits at least its ``retry_after_seconds``) is retried with capped
exponential backoff and jitter, keeping every item. An item is dropped only once the
gateway answered *for that item* (200, 409 stale token, 404 unknown run, ...); items the
gateway left unanswered are sent again. Retrying a batch whose first answer was lost re-sends the
same (run, fencing token, outcome), which the gateway treats as a repeat of the same write.
What is still queued when ``close()`` times out is logged as an error with its run ids: those
runs will be retried after their leases expire (at-least-once, never silently lost).

Rejected: one flush task per item with a shared lock (many wakeups, unbounded request count
under bursts) and Nagle-style "flush when idle" (no latency bound while busy).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from ostinato.sdk.errors import retry_after_of
from ostinato.wire.worker import (
    MAX_BATCH_ITEMS,
    BatchItemResult,
    BatchRequest,
    BatchResponse,
    CompletionItem,
    ErrorInfo,
    FailureItem,
    HeartbeatItem,
    LogLine,
    ReleaseItem,
    StepItem,
    StepStartedItem,
)

__all__ = ["BatchTransport", "HeartbeatCallback", "Reporter", "backoff_delay"]

BatchTransport = Callable[[BatchRequest], Awaitable[BatchResponse]]
# (item, result, monotonic time the request carrying it was sent)
HeartbeatCallback = Callable[[HeartbeatItem, BatchItemResult, float], None]
_Outcome = CompletionItem | FailureItem | ReleaseItem
_HbKey = tuple[str, int]
# Items whose sender awaits the gateway's answer: heartbeats, and workflow steps (the workflow
# goes past a step only once its outcome is recorded).
_Awaited = tuple[HeartbeatItem | StepItem, "asyncio.Future[BatchItemResult]"]

log = structlog.get_logger("ostinato.sdk.reporter")


def backoff_delay(failures: int, initial: float = 0.05, cap: float = 5.0) -> float:
    """Capped exponential backoff with equal jitter (half fixed, half random), in seconds.

    Equal rather than full jitter so a retry never fires almost at once against a gateway that
    just failed, while still spreading a fleet of workers that saw the same outage.
    """
    ceiling = min(cap, initial * 2 ** max(0, failures - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


class Reporter:
    """Queues heartbeats and outcomes and delivers them in batches; see the module docstring."""

    def __init__(
        self,
        transport: BatchTransport,
        *,
        worker_id: str,
        on_heartbeat: HeartbeatCallback | None = None,
        max_items: int = 200,
        linger_seconds: float = 0.005,
        backoff_initial: float = 0.05,
        backoff_max: float = 5.0,
        max_log_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        if not 1 <= max_items <= MAX_BATCH_ITEMS:
            raise ValueError(f"max_items must be in 1..{MAX_BATCH_ITEMS}")
        self._transport = transport
        self._worker_id = worker_id
        self._on_heartbeat = on_heartbeat
        self._max_items = max_items
        self._linger = linger_seconds
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._max_log_bytes = max_log_bytes
        self._outcomes: deque[_Outcome] = deque()
        self._heartbeats: dict[_HbKey, asyncio.Future[BatchItemResult]] = {}
        self._steps: deque[_Awaited] = deque()
        self._ping = False  # a ping is pending
        self._urgent = False  # an outcome waits that must not linger
        # run id -> (token, seq, name, monotonic start): step starts riding the next request
        self._started: dict[str, tuple[int, int, str, float]] = {}
        self._inflight: list[_Outcome] = []
        self._first_at: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self.requests_sent = 0

    # -- producer side ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the flusher task on the running loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="ostinato-reporter"
            )

    def complete(
        self, run_id: str, fencing_token: int, output: Any, *, logs: list[LogLine] | None = None,
        urgent: bool = False,
    ) -> None:
        """Queue a completion; ``output`` may be a ``msgspec.Raw`` already encoded; ``urgent``:
        due at once, without the linger."""
        self._outcomes.append(
            CompletionItem(run_id=run_id, fencing_token=fencing_token, output=output, logs=logs)
        )
        self._enqueued(urgent)

    def fail(
        self, run_id: str, fencing_token: int, error: ErrorInfo, *,
        logs: list[LogLine] | None = None, urgent: bool = False,
    ) -> None:
        """Queue a failure (``urgent``: as for ``complete``)."""
        self._outcomes.append(
            FailureItem(run_id=run_id, fencing_token=fencing_token, error=error, logs=logs)
        )
        self._enqueued(urgent)

    def release(self, run_id: str, fencing_token: int) -> None:
        """Queue a release: the gateway re-queues the run at once, no attempt used."""
        self._outcomes.append(ReleaseItem(run_id=run_id, fencing_token=fencing_token))
        self._enqueued()

    def heartbeat(self, run_id: str, fencing_token: int) -> asyncio.Future[BatchItemResult]:
        """Queue a heartbeat (deduplicated per run and token); the future gets its result."""
        key = (run_id, fencing_token)
        fut = self._heartbeats.get(key)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            if self._closing:
                fut.cancel()
                return fut
            self._heartbeats[key] = fut
            self._enqueued()
        return fut

    def step(self, item: StepItem) -> asyncio.Future[BatchItemResult]:
        """Queue a workflow step's outcome; the future gets the gateway's answer for it."""
        fut: asyncio.Future[BatchItemResult] = asyncio.get_running_loop().create_future()
        if self._closing:
            fut.cancel()
            return fut
        start = self._started.get(item.run_id)
        if start is not None and start[1] <= item.seq:
            del self._started[item.run_id]  # not sent yet, and already over
        self._steps.append((item, fut))
        self._enqueued()
        self._wake.set()  # no linger: the workflow waits for this answer
        return fut

    def started(self, run_id: str, fencing_token: int, seq: int, name: str) -> None:
        """Say in the next request that a workflow step began (no request of its own)."""
        if not self._closing:
            self._started[run_id] = (fencing_token, seq, name, time.monotonic())

    def ping(self) -> None:
        """Say the worker is alive in the next request (an empty batch if nothing else goes)."""
        if self._closing or self._ping:
            return
        self._ping = True
        self._enqueued()

    @property
    def pending(self) -> int:
        """Outcomes not yet answered by the gateway (queued or in flight)."""
        return len(self._outcomes) + len(self._inflight)

    async def close(self, flush_seconds: float) -> list[str]:
        """Flush everything, waiting at most ``flush_seconds``; returns run ids left unreported."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, flush_seconds)
            except TimeoutError:
                pass
            except Exception:  # a bug in the flusher must not hide what stayed unreported
                log.exception("reporter.crashed")
        if self._timer is not None:
            self._timer.cancel()
        lost = [o.run_id for o in (*self._inflight, *self._outcomes)]
        if lost:
            log.error("outcomes.unreported", count=len(lost), run_ids=lost[:100])
        for fut in (*self._heartbeats.values(), *(f for _, f in self._steps)):
            fut.cancel()
        self._heartbeats.clear()
        self._steps.clear()
        return lost

    def _enqueued(self, urgent: bool = False) -> None:
        if urgent:
            self._urgent = True
            self._wake.set()
        if self._first_at is None:
            self._first_at = time.monotonic()
            self._timer = asyncio.get_running_loop().call_later(self._linger, self._wake.set)
        if self._count() >= self._max_items:
            self._wake.set()

    def _count(self) -> int:
        return len(self._outcomes) + len(self._heartbeats) + len(self._steps) + self._ping

    # -- flusher ----------------------------------------------------------------------------

    def _due(self, now: float) -> bool:
        count = self._count()
        if count == 0 or self._first_at is None:
            return False
        return (self._closing or bool(self._steps) or self._urgent or count >= self._max_items
                or now >= self._first_at + self._linger)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._due(time.monotonic()):
                ping = self._ping
                outcomes, heartbeats = self._take()
                started, self._started = self._started, {}
                await self._deliver(outcomes, heartbeats, ping=ping, started=started)
            if self._closing and not self._count():
                return
            self._rearm()

    def _rearm(self) -> None:
        """Items wait and their linger timer has fired (or was never set for them): wake again
        at their deadline. A timer may fire a little before `time.monotonic()` reaches it
        (uvloop keeps millisecond time); without this the items would wait for the next
        full batch, past their leases."""
        if self._first_at is None or self._closing:
            return
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, self._first_at + self._linger - time.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._wake.set)

    def _take(self) -> tuple[list[_Outcome], list[_Awaited]]:
        self._ping = False  # whatever request goes next carries it
        outcomes: list[_Outcome] = []
        log_bytes = 0
        while self._outcomes and len(outcomes) < self._max_items:
            weight = _log_weight(self._outcomes[0])
            if outcomes and log_bytes + weight > self._max_log_bytes:
                break
            outcomes.append(self._outcomes.popleft())
            log_bytes += weight
        self._urgent = self._urgent and bool(self._outcomes)  # some left: one may be urgent
        heartbeats: list[_Awaited] = []
        for key in list(self._heartbeats)[:MAX_BATCH_ITEMS]:
            fut = self._heartbeats.pop(key)
            heartbeats.append((HeartbeatItem(run_id=key[0], fencing_token=key[1]), fut))
        for _ in range(min(len(self._steps), MAX_BATCH_ITEMS)):
            heartbeats.append(self._steps.popleft())
        if not self._count():
            self._first_at = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        return outcomes, heartbeats

    async def _deliver(
        self,
        outcomes: list[_Outcome],
        heartbeats: list[_Awaited],
        *,
        ping: bool = False,
        started: dict[str, tuple[int, int, str, float]] | None = None,
    ) -> None:
        """Send until the gateway answered for every item; never drops an unanswered one.
        `heartbeats`: the awaited items, heartbeats and workflow steps; `ping`: send even
        with no item (once: a lone ping is not retried); `started`: step starts riding along
        (no answer; a lone ping's that failed are kept for the next request)."""
        started = started or {}
        self._inflight = outcomes
        failures = 0
        try:
            while outcomes or heartbeats or ping:
                request = BatchRequest(
                    worker_id=self._worker_id,
                    heartbeats=[i for i, _ in heartbeats if isinstance(i, HeartbeatItem)],
                    completions=[o for o in outcomes if isinstance(o, CompletionItem)],
                    failures=[o for o in outcomes if isinstance(o, FailureItem)],
                    releases=[o for o in outcomes if isinstance(o, ReleaseItem)],
                    steps=[i for i, _ in heartbeats if isinstance(i, StepItem)],
                    started=[StepStartedItem(run_id=run_id, fencing_token=token, seq=seq,
                                             name=name, age_ms=round(
                                                 (time.monotonic() - since) * 1000, 3))
                             for run_id, (token, seq, name, since) in started.items()],
                )
                sent_at = time.monotonic()
                self.requests_sent += 1
                try:
                    response = await self._transport(request)
                except Exception as exc:  # a 503 asks to wait (`retry_after`): at least that
                    if not (outcomes or heartbeats):
                        log.debug("ping.failed", error=repr(exc))
                        for run_id, start in started.items():  # ride the next request
                            self._started.setdefault(run_id, start)
                        return
                    started = {}  # advisory: the retry goes without (an older gateway refuses)
                    failures += 1
                    delay = max(self._backoff(failures), retry_after_of(exc))
                    log.warning(
                        "batch.retry", error=repr(exc), attempt=failures, delay_s=round(delay, 3),
                        items=len(outcomes) + len(heartbeats),
                    )
                    await asyncio.sleep(delay)
                    continue
                ping, started = False, {}
                outcomes, heartbeats = self._dispatch(request, response, sent_at, heartbeats)
                self._inflight = outcomes
                if outcomes or heartbeats:
                    failures += 1
                    log.error("batch.unanswered_items", count=len(outcomes) + len(heartbeats))
                    await asyncio.sleep(self._backoff(failures))
        finally:
            if self._inflight:  # cancelled mid-flight: keep them counted as unreported
                self._outcomes.extendleft(reversed(self._inflight))
                self._inflight = []
            for _, fut in heartbeats:
                fut.cancel()  # no-op for answered ones

    def _backoff(self, failures: int) -> float:
        return backoff_delay(failures, self._backoff_initial, self._backoff_max)

    def _dispatch(
        self,
        request: BatchRequest,
        response: BatchResponse,
        sent_at: float,
        heartbeats: list[_Awaited],
    ) -> tuple[list[_Outcome], list[_Awaited]]:
        """Apply results, matched by (kind, run_id) in order; return the unanswered items."""
        by_key: defaultdict[tuple[str, str], deque[BatchItemResult]] = defaultdict(deque)
        for result in response.results:
            by_key[(result.kind, result.run_id)].append(result)

        def take(kind: str, run_id: str) -> BatchItemResult | None:
            queue = by_key.get((kind, run_id))
            return queue.popleft() if queue else None

        unanswered_hb: list[_Awaited] = []
        for item, fut in heartbeats:
            is_heartbeat = isinstance(item, HeartbeatItem)
            result = take("heartbeat" if is_heartbeat else "step", item.run_id)
            if result is None:
                unanswered_hb.append((item, fut))
                continue
            if is_heartbeat and self._on_heartbeat is not None:
                try:
                    self._on_heartbeat(item, result, sent_at)
                except Exception:
                    log.exception("heartbeat.callback_failed", run_id=item.run_id)
            if not fut.done():
                fut.set_result(result)
        unanswered: list[_Outcome] = []
        kinds: tuple[tuple[str, list[Any]], ...] = (
            ("complete", request.completions), ("fail", request.failures),
            ("release", request.releases),
        )
        for kind, items in kinds:
            for outcome in items:
                result = take(kind, outcome.run_id)
                if result is None:
                    unanswered.append(outcome)
                elif result.status != 200:
                    level = log.warning if result.status in (404, 409) else log.error
                    level(
                        "outcome.rejected", run_id=outcome.run_id, kind=kind,
                        status=result.status, detail=result.detail,
                        fencing_token=outcome.fencing_token,
                    )
        return unanswered, unanswered_hb


def _log_weight(outcome: _Outcome) -> int:
    """Approximate wire size of an outcome's log lines (messages plus a per-line allowance)."""
    logs = getattr(outcome, "logs", None)
    if not logs:
        return 0
    return sum(len(line.message) + 32 * (1 + len(line.fields)) for line in logs)
