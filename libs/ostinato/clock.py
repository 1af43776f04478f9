"""The one place that reads wall time.

Everything else receives a `Clock` and asks it. Lease expiry is not judged here: SQL uses
`coalesce($now, now())` with `Clock.db_now()`, so production trusts the database clock and tests
can pin it (DESIGN invariant 6).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


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
