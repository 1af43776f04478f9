"""The one place that reads wall time.

Everything else receives a `Clock` and asks it. Lease expiry is not judged here: SQL uses
`coalesce($now, now())` with `Clock.db_now()`, so production trusts the database clock and tests
can pin it (DESIGN invariant 6). The services' own clock is `DatabaseClock`: wall time as the
database tells it, so one host's skewed clock cannot fire a job early, record a false misfire
skip or misdate an event.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Current UTC-aware instant."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, for durations."""
        ...

    def db_now(self) -> datetime | None:
        """The instant SQL should use for lease maths; None means the database's own now()."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def db_now(self) -> datetime | None:
        return None


class FakeClock:
    """A clock that moves only when told; `db_now` follows it so SQL sees the same time."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def db_now(self) -> datetime | None:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds

    def set(self, instant: datetime) -> None:
        if instant.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._now = instant


class DatabaseClock:
    """Wall time read from PostgreSQL (`clock_timestamp()`), carried forward between reads by
    the monotonic clock, so the host's wall clock is never consulted once synced.

    `sync` maps the database's instant to the moment its answer arrived: `now()` may trail the
    database by at most one round trip, never lead it, so an event's `occurred_at` is never
    after the `recorded_at` PostgreSQL gives it. Nor does it go back: a reading whose answer
    waited longer than the last one's (a busy loop, a process the OS left waiting) lands behind
    the time already told, and both are lower bounds of the database's time, so the later one
    is kept, for at most KEEP_SECONDS since its reading (past that the monotonic clock's drift
    could add up to a lead). Services sync at start and every few seconds
    (`runtime.service.Service`); before the first sync it is the host's clock."""

    KEEP_SECONDS = 30.0

    def __init__(self) -> None:
        self._base: datetime | None = None
        self._base_mono = 0.0

    async def sync(self, conn: Any) -> timedelta:
        """Read the database's time; returns how far the host's wall clock is from it."""
        instant: datetime = await conn.fetchval("SELECT clock_timestamp()")
        arrived = time.monotonic()
        told = self._told(arrived)
        if told is None or instant >= told or arrived - self._base_mono >= self.KEEP_SECONDS:
            self._base, self._base_mono = instant, arrived
        return datetime.now(UTC) - instant

    @property
    def synced(self) -> bool:
        return self._base is not None

    def now(self) -> datetime:
        return self._told(time.monotonic()) or datetime.now(UTC)

    def _told(self, mono: float) -> datetime | None:
        if self._base is None:
            return None
        return self._base + timedelta(seconds=mono - self._base_mono)

    def monotonic(self) -> float:
        return time.monotonic()

    def db_now(self) -> datetime | None:
        return None
