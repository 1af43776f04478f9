"""The database clock between readings: it never goes back, and never keeps an old reading long
enough for the monotonic clock's drift to matter. Readings come from a stand-in connection
(the real one is in tests/integration/test_event_times.py); the monotonic clock is set by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ostinato import clock as clock_module
from ostinato.clock import DatabaseClock

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


class _Readings:
    """Answers `SELECT clock_timestamp()` with the next instant given."""

    def __init__(self, *instants: datetime) -> None:
        self.instants = list(instants)

    async def fetchval(self, query: str) -> datetime:
        assert query == "SELECT clock_timestamp()"
        return self.instants.pop(0)


@pytest.fixture
def mono(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(clock_module.time, "monotonic", lambda: now[0])
    return now


async def test_a_reading_whose_answer_waited_longer_does_not_turn_the_clock_back(
        mono: list[float]) -> None:
    clock = DatabaseClock()
    # read at T0, answered at once; 5 s later a reading taken 5 s after T0 but answered 40 ms
    # late (its process waited for a core): it lands 40 ms behind what the clock tells
    conn = _Readings(T0, T0 + timedelta(seconds=5) - timedelta(milliseconds=40))
    await clock.sync(conn)
    mono[0] += 5
    before = clock.now()
    await clock.sync(conn)
    assert clock.now() == before == T0 + timedelta(seconds=5)


async def test_a_reading_ahead_of_the_clock_moves_it_on(mono: list[float]) -> None:
    clock = DatabaseClock()
    await clock.sync(_Readings(T0))
    mono[0] += 5
    await clock.sync(_Readings(T0 + timedelta(seconds=5, milliseconds=3)))
    assert clock.now() == T0 + timedelta(seconds=5, milliseconds=3)


async def test_an_old_reading_gives_way_to_a_later_one_even_behind_it(mono: list[float]) -> None:
    clock = DatabaseClock()
    await clock.sync(_Readings(T0))
    mono[0] += DatabaseClock.KEEP_SECONDS
    behind = T0 + timedelta(seconds=DatabaseClock.KEEP_SECONDS) - timedelta(milliseconds=2)
    await clock.sync(_Readings(behind))
    assert clock.now() == behind  # the drift of a long-kept reading is not carried further
