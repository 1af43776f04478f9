"""The duty runner without servers: a fake clock and a recording `wait` stand in for time, so
every assertion is about order and counts, never about how long anything took."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from itertools import pairwise

import asyncpg
import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError
from litestar.testing import AsyncTestClient
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from ostinato.clock import FakeClock
from ostinato.objects import ObjectMissing, ObjectStoreUnavailable
from ostinato.runtime.duties import Duty, DutyRunner, readiness, transient
from ostinato.runtime.ops import ops_app

MISSING = asyncpg.exceptions.UndefinedTableError('relation "jobz" does not exist')


class Pauses:
    """The runner's `wait`: records each pause in `trace` and moves the fake clock by it; with
    `hold`, parks instead until the runner's event is set (a wake-up, or stop)."""

    def __init__(self, clock: FakeClock, trace: list[object]) -> None:
        self.clock = clock
        self.trace = trace
        self.hold = False
        self.parked = asyncio.Event()

    async def wait(self, event: asyncio.Event, seconds: float) -> None:
        self.trace.append(("wait", seconds))
        if not self.hold:
            self.clock.advance(seconds)
            await asyncio.sleep(0)
            return
        self.parked.set()
        await event.wait()
        self.parked.clear()


class Script:
    """A duty whose ticks return (or raise) the given outcomes in turn, then stop the runner.
    Each tick records `("tick", now)` first; `before` runs at the start of each tick."""

    def __init__(self, name: str, outcomes: list[int | Exception], *, interval: float = 1.0,
                 batch: int | None = None, before: Callable[[], None] = lambda: None) -> None:
        self.clock = FakeClock()
        self.trace: list[object] = []
        self.pauses = Pauses(self.clock, self.trace)
        self.outcomes = list(outcomes)
        self.before = before
        self.stops = 0
        self.runner = DutyRunner(
            Duty(name, interval, self.run_once, batch=batch, on_stop=self.on_stop), self.clock,
            wait=self.pauses.wait)

    async def run_once(self, now: datetime) -> int:
        self.trace.append(("tick", now))
        self.before()
        if not self.outcomes:
            self.runner.stop()
            return 0
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def on_stop(self) -> None:
        self.stops += 1
        self.trace.append("stopped")

    def waits(self) -> list[float]:
        return [e[1] for e in self.trace if isinstance(e, tuple) and e[0] == "wait"]

    def ticks(self) -> list[datetime]:
        return [e[1] for e in self.trace if isinstance(e, tuple) and e[0] == "tick"]


async def settled(condition: Callable[[], bool]) -> None:
    """Let the other tasks run until `condition` holds (a bounded number of turns, no clock)."""
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the runner never got there")


def errors(duty: str, kind: str) -> float:
    return REGISTRY.get_sample_value("ostinato_duty_errors_total",
                                     {"duty": duty, "kind": kind}) or 0.0


async def test_transient_errors_back_off_doubling_to_the_cap_and_reset_on_success() -> None:
    flaky = asyncpg.exceptions.SerializationError("could not serialize access")
    script = Script("flaky", [*[ConnectionResetError()] * 8, 1, flaky, 2])
    await script.runner.run()
    assert script.waits() == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 1.0, 0.1, 1.0]
    ticks = script.ticks()  # each tick's `now` is the fake clock after the pause before it
    assert [(b - a).total_seconds() for a, b in pairwise(ticks)] == \
        pytest.approx(script.waits())
    assert errors("flaky", "transient") == 9 and errors("flaky", "permanent") == 0
    assert script.runner.failing is None and script.stops == 1


async def test_the_same_failure_again_is_logged_once_per_interval_with_a_count() -> None:
    script = Script("outage", [*[ConnectionResetError()] * 8, 1])
    with capture_logs() as lines:
        await script.runner.run()
    failed = [x for x in lines if x["event"] == "duty tick failed; retrying"]
    # failures at 0, 0.1, 0.3, 0.7, 1.5, 3.1, 6.3 and 11.3 s: the first at once, the one past
    # 10 s with the six held back; the recovery line counts all eight
    assert [x.get("repeated") for x in failed] == [None, 6]
    (recovered,) = [x for x in lines if x["event"] == "duty recovered"]
    assert recovered["failed_ticks"] == 8


async def test_a_permanent_error_is_counted_shown_on_readyz_retried_at_the_cap() -> None:
    seen: list[dict[str, bool | str]] = []
    script = Script("broken", [MISSING, MISSING, MISSING, 1],
                    before=lambda: seen.append(readiness([script.runner])))
    await script.runner.run()
    failing = 'UndefinedTableError: relation "jobz" does not exist'
    assert seen == [{"duty:broken": True}, *[{"duty:broken": failing}] * 3, {"duty:broken": True}]
    assert script.waits() == [5.0, 5.0, 5.0, 1.0]
    assert errors("broken", "permanent") == 3 and errors("broken", "transient") == 0


async def test_readyz_reports_a_failing_duty_with_its_error_until_a_tick_succeeds() -> None:
    script = Script("readyz", [MISSING, 1])
    runner = script.runner

    async def checks() -> dict[str, bool | str]:
        return {"postgres": True, **readiness([runner])}

    async with AsyncTestClient(ops_app("scheduler", checks)) as client:
        assert await runner.tick() is None
        response = await client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["checks"] == {"postgres": True, "duty:readyz": False}
        assert response.json()["reasons"] == {"duty:readyz": runner.failing}
        assert await runner.tick() == 1
        response = await client.get("/readyz")
        assert response.status_code == 200 and "reasons" not in response.json()


async def test_wake_runs_a_sleeping_duty_now_and_a_wake_during_a_tick_runs_again() -> None:
    script = Script("sleepy", [0, 0, 0, 0], interval=3600.0)
    script.before = lambda: len(script.ticks()) == 2 and script.runner.wake()
    script.pauses.hold = True
    task = asyncio.create_task(script.runner.run())
    await script.pauses.parked.wait()
    assert len(script.ticks()) == 1
    script.runner.wake()
    await settled(lambda: len(script.ticks()) == 3 and script.pauses.parked.is_set())
    assert len(script.ticks()) == 3  # woken during the second tick: a third at once
    script.runner.stop()
    await task
    assert len(script.ticks()) == 3 and script.stops == 1
    assert script.clock.monotonic() == 0  # nobody waited out the hour


async def test_stop_lets_the_current_tick_finish_then_returns() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    script = Script("slow", [1, 1])

    async def slow_once(now: datetime) -> int:
        script.trace.append("tick started")
        entered.set()
        await release.wait()
        script.trace.append("tick finished")
        return 1

    runner = DutyRunner(Duty("slow", 1.0, slow_once, on_stop=script.on_stop), script.clock,
                        wait=script.pauses.wait)
    task = asyncio.create_task(runner.run())
    await entered.wait()
    runner.stop()
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()
    release.set()
    await task
    assert script.trace == ["tick started", "tick finished", "stopped"]


async def test_a_full_batch_runs_again_without_waiting() -> None:
    script = Script("batches", [10, 10, 3, 10, 0], interval=0.05, batch=10)
    await script.runner.run()
    steps = [e if e == "stopped" else e[0] if e[0] == "tick" else e for e in script.trace]
    assert steps == ["tick", "tick", "tick", ("wait", 0.05), "tick", "tick", ("wait", 0.05),
                     "tick", "stopped"]


async def test_duties_sharing_a_turn_never_tick_at_once() -> None:
    turn, inside, overlaps = asyncio.Lock(), [0], [0]
    clock = FakeClock()

    def duty(name: str) -> DutyRunner:
        async def run_once(now: datetime) -> int:
            inside[0] += 1
            overlaps[0] = max(overlaps[0], inside[0])
            await asyncio.sleep(0)
            inside[0] -= 1
            return 1

        return DutyRunner(Duty(name, 0.0, run_once, turn=turn), clock)

    a, b = duty("turn_a"), duty("turn_b")
    assert await asyncio.gather(*(r.tick() for r in (a, b, a, b))) == [1, 1, 1, 1]
    assert overlaps[0] == 1


@pytest.mark.parametrize(("exc", "expected"), [
    (ConnectionResetError(), True),
    (TimeoutError(), True),
    (OSError("network unreachable"), True),
    (asyncpg.InterfaceError("the underlying connection is closed"), True),
    (asyncpg.exceptions.InternalClientError("cannot switch to state 15"), True),
    (asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed"), True),  # 08003
    (asyncpg.exceptions.TooManyConnectionsError("too many clients"), True),  # 53300
    (asyncpg.exceptions.CannotConnectNowError("the database system is starting up"), True),
    (asyncpg.exceptions.SerializationError("could not serialize"), True),  # 40001
    (asyncpg.exceptions.DeadlockDetectedError("deadlock detected"), True),  # 40P01
    (KafkaConnectionError(), True),
    (KafkaTimeoutError(), True),
    (ObjectStoreUnavailable("put k: connection refused"), True),  # the archiver: no removal
    (ObjectMissing("k"), False),
    (MISSING, False),  # 42P01: a typo in a query fails again the same way
    (asyncpg.exceptions.PostgresSyntaxError("syntax error"), False),
    (asyncpg.exceptions.UniqueViolationError("duplicate key"), False),
    (ValueError("bad row"), False),
])
def test_one_classifier_decides_what_is_transient(exc: Exception, expected: bool) -> None:
    assert transient(exc) is expected


async def test_a_paced_duty_polls_every_interval_counted_from_each_ticks_start() -> None:
    script = Script("paced", [3, 3, 0], interval=0.05)
    script.runner = DutyRunner(Duty("paced", 0.05, script.run_once, paced=True), script.clock,
                               wait=script.pauses.wait)
    script.before = lambda: script.clock.advance(0.03)  # each tick takes 30 ms
    await script.runner.run()
    assert [round(w, 6) for w in script.waits()] == [0.02, 0.02, 0.02]
    slow = Script("slow", [3, 0], interval=0.05)
    slow.runner = DutyRunner(Duty("slow", 0.05, slow.run_once, paced=True), slow.clock,
                             wait=slow.pauses.wait)
    slow.before = lambda: slow.clock.advance(0.08)  # longer than the interval: no pause
    await slow.runner.run()
    assert slow.waits() == [0.0, 0.0]
    unpaced = Script("unpaced", [3, 0], interval=0.05,
                     before=lambda: unpaced.clock.advance(0.03))
    await unpaced.runner.run()
    assert unpaced.waits() == [0.05, 0.05]
