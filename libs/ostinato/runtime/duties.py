"""Background duties: one shape and one life for every loop a service runs.

A `Duty` is work done again and again: `run_once(now)` handles one batch and returns how many
items it handled; `interval` is the pause between ticks, and a count reaching `batch` means more
is waiting, so the next tick starts at once. A `DutyRunner` gives every duty the same life:

- `wake()` starts the next tick now (a wake-up during a tick starts another right after it);
- `stop()` lets the current tick finish, runs the duty's `on_stop` (hand leases back, drain the
  outbox), and `run()` returns;
- one error policy: a transient error (`transient`: a broken connection, SQLSTATE classes 08, 53,
  57, 40001, 40P01 by `sqlstate.classify`, Kafka unreachable) is a warning, retried after a delay
  doubling from 0.1 s to the duty's `max_backoff` (5 s), reset by a success; anything else is an
  error line with its traceback, counted, shown on /readyz (`readiness`) until a tick succeeds,
  and retried every `max_backoff`. The same failure again is logged once per 10 s with
  `repeated` (`RateLimitedLogger`); the recovery line counts every failed tick. Never a silent
  forever-loop, never a dead service;
- per tick: one span (`duty <name>`, when tracing is on), one observation of
  `ostinato_duty_tick_seconds{duty}`, one log line (info if it handled something, else debug).

Duties sharing a `turn` (an asyncio.Lock) never tick at the same time: the scheduler's duties
take turns, and so do the reconciler's checks, as when each service ran one loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from aiokafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError

from ostinato.clock import Clock, SystemClock
from ostinato.db.sqlstate import is_transient
from ostinato.eventlog.outbox import OutboxRelay
from ostinato.objects import ObjectStoreUnavailable
from ostinato.telemetry import metrics, tracing
from ostinato.telemetry.logging import RateLimitedLogger, get_logger

FIRST_BACKOFF = 0.1
MAX_BACKOFF = 5.0
Wait = Callable[[asyncio.Event, float], Awaitable[None]]
_ALONE = contextlib.nullcontext()


@dataclass(frozen=True, slots=True)
class Duty:
    name: str  # the `duty` label of its metrics, `duty:<name>` on /readyz
    interval: float  # seconds between ticks that handled less than a batch
    run_once: Callable[[datetime], Awaitable[int]]  # one batch at `now`: items handled
    batch: int | None = None  # a count this high means "go again at once"
    max_backoff: float = MAX_BACKOFF  # the cap of the retry delay after an error
    turn: asyncio.Lock | None = None  # duties sharing one never tick at the same time
    on_stop: Callable[[], Awaitable[None]] | None = None  # once, after the last tick
    # `interval` counts from the start of the previous tick, not its end: a poll every
    # `interval` however long ticks take under load (the scheduler's due poll: a 30 ms tick
    # followed by a 50 ms pause made every due job wait 80 ms for the next poll at worst).
    paced: bool = False


def transient(exc: BaseException) -> bool:
    """The error policy's one question: retry with backoff (True), or report and retry at the
    cap (False). Database and connection errors are `sqlstate.is_transient`'s to judge."""
    if isinstance(exc, KafkaError):
        return isinstance(exc, KafkaConnectionError | KafkaTimeoutError) or exc.retriable
    if isinstance(exc, ObjectStoreUnavailable):  # refused, timed out, 5xx (the archiver)
        return True
    return is_transient(exc)


async def wait_for_event(event: asyncio.Event, seconds: float) -> None:
    """Return once `event` is set or `seconds` have passed, whichever comes first."""
    if event.is_set() or seconds <= 0:
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


class DutyRunner:
    """Runs one duty until stopped (the module docstring tells its life). `wait` is how it
    pauses (a fake in tests); `clock` gives each tick its `now` and measures it."""

    def __init__(self, duty: Duty, clock: Clock | None = None, *,
                 wait: Wait = wait_for_event) -> None:
        self.duty = duty
        self.clock = clock or SystemClock()
        self.failing: str | None = None  # the last permanent error, until a tick succeeds
        self.retry_in = 0.0  # the delay after the last failed tick
        self._wait = wait
        self._wake = asyncio.Event()
        self._stopped = asyncio.Event()
        self._backoff = FIRST_BACKOFF
        self._errors = 0  # consecutive failed ticks
        self._seconds = metrics.DUTY_TICK_SECONDS.labels(duty=duty.name)
        self._failures = RateLimitedLogger("ostinato.duties", clock=self.clock.monotonic)
        # the runner's own logger, like `_failures`'s: bound at its first line, not at the first
        # line of any duty in the process (the module's would be cached then, by the logging
        # configuration of that moment)
        self._log = get_logger("ostinato.duties")

    @property
    def name(self) -> str:
        return self.duty.name

    def wake(self) -> None:
        """Tick now, or right after the tick under way."""
        self._wake.set()

    def stop(self) -> None:
        """Let the tick under way finish; then `run` calls the duty's `on_stop` and returns."""
        self._stopped.set()
        self._wake.set()

    async def run(self) -> None:
        """Tick until stopped: again at once after a full batch or a wake-up, else after
        `interval` (from the tick's start when `paced`); after a failed tick, after `retry_in`
        (a wake-up does not cut it short)."""
        while not self._stopped.is_set():
            self._wake.clear()
            began = self.clock.monotonic()
            count = await self.tick()
            if self._stopped.is_set():
                break
            if count is None:
                await self._wait(self._stopped, self.retry_in)
            elif self.duty.batch is None or count < self.duty.batch:
                pause = self.duty.interval
                if self.duty.paced:
                    pause = max(0.0, pause - (self.clock.monotonic() - began))
                await self._wait(self._wake, pause)
        if self.duty.on_stop is not None:
            try:
                await self.duty.on_stop()
            except Exception as exc:
                self._log.warning("duty stop failed", duty=self.name, error=repr(exc))

    async def tick(self) -> int | None:
        """One `run_once` under the error policy: the count it returned, or None if it raised."""
        async with self.duty.turn or _ALONE:
            started = self.clock.monotonic()
            try:
                with tracing.duty_span(self.name):
                    count = await self.duty.run_once(self.clock.now())
            except Exception as exc:
                self._seconds.observe(self.clock.monotonic() - started)
                self._failed(exc)
                return None
            seconds = self.clock.monotonic() - started
        self._seconds.observe(seconds)
        self._succeeded(count, seconds)
        return count

    def _succeeded(self, count: int, seconds: float) -> None:
        if self._errors:
            self._log.info("duty recovered", duty=self.name, failed_ticks=self._errors,
                     error=self.failing)
            self._errors, self._backoff, self.failing = 0, FIRST_BACKOFF, None
        if count:
            self._log.info("duty tick", duty=self.name, count=count, seconds=round(seconds, 4))
        else:
            self._log.debug("duty tick", duty=self.name, count=0)

    def _failed(self, exc: Exception) -> None:
        self._errors += 1
        cap = self.duty.max_backoff
        if transient(exc):
            self.retry_in = min(self._backoff, cap)
            self._backoff = min(self._backoff * 2, cap)
            metrics.DUTY_ERRORS.labels(duty=self.name, kind="transient").inc()
            self._failures.warning("duty tick failed; retrying", exc, duty=self.name,
                                   retry_in=self.retry_in)
            return
        self.retry_in = cap
        self.failing = f"{type(exc).__name__}: {exc}"[:300]
        metrics.DUTY_ERRORS.labels(duty=self.name, kind="permanent").inc()
        self._failures.error("duty tick failed", exc, duty=self.name, retry_in=cap, exc_info=exc)


def readiness(runners: Iterable[DutyRunner]) -> dict[str, bool | str]:
    """/readyz entries: `duty:<name>` True, or its last permanent error until a tick succeeds."""
    return {f"duty:{r.name}": r.failing or True for r in runners}


def outbox_relay(relay: OutboxRelay,
                 connect: Callable[[], Awaitable[None]] | None = None) -> Duty:
    """The relay as a duty: a batch of outbox rows per tick, every `idle_poll_seconds` unless
    a batch was full or a writer woke it; on stop it publishes what it can (`drain`).
    `connect` (the api, which serves without Kafka): start the relay's producer at the first
    tick, and again at each tick until the broker answers (a transient failure, so the
    service stays ready; the rows wait in the outbox meanwhile)."""
    connected = connect is None

    async def publish(now: datetime) -> int:
        nonlocal connected
        if not connected:
            assert connect is not None
            await connect()
            connected = True
        return await relay.publish_batch()

    async def drain() -> None:
        if connected:
            await relay.drain()

    return Duty("outbox_relay", relay.idle_poll_seconds, publish, batch=relay.batch_size,
                on_stop=drain)


class Polled(Protocol):
    """A Kafka consumer under the one loop (`ostinato.bus.consumer`)."""

    async def poll_once(self) -> int: ...

    async def close(self) -> None: ...


def kafka_consumer(name: str, consumer: Polled) -> Duty:
    """A Kafka consumer as a duty: one poll per tick, the next at once (the poll itself waits
    for messages); the loop's error policy handles what a message meets, the runner's what
    the poll meets (the broker away: retried; anything else shown on /readyz as
    `duty:<name>`). On stop it commits what it settled and leaves its group (`close`)."""

    async def poll(now: datetime) -> int:
        return await consumer.poll_once()

    return Duty(name, 0.0, poll, on_stop=consumer.close)
