"""When a schedule's occurrences fall: pure functions of the schedule and the instants given.

- `at`: the single instant.
- `every`: anchor + k * interval, computed in UTC: no drift, and DST never moves it (k < 0 only
  when start_at lies before the anchor, as for a backfill).
- `cron`: croniter lists matching local wall times; each is mapped to UTC by the DST policy
  (zones.py). Mapped instants are deduplicated (a shifted gap time that lands on a real slot, as
  02:00 -> 03:00 on a spring-forward day with an hourly cron, fires once) and sorted: with
  `dst_fold=both` the second pass of a fold interleaves with later wall times.
All instants returned are UTC-aware and lie within [start_at, end_at].
"""

from __future__ import annotations

import hashlib
import heapq
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

from ostinato.schedules.cronexpr import compile_cron
from ostinato.schedules.model import Schedule
from ostinato.schedules.zones import (
    SECOND,
    classify,
    highest_wall,
    lowest_wall,
    steady,
    to_utc,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The Gregorian calendar repeats every 400 years: a cron that matches nothing usable in that
# span (e.g. only DST-gap times with dst_gap=skip) never will.
_HORIZON_YEARS = 400
_TICK = timedelta(microseconds=1)


def _mapped(s: Schedule, wall: datetime) -> tuple[list[datetime], datetime, datetime]:
    """(instants under the policy, earliest possible, latest possible) for a matching wall."""
    kind, first, second = classify(s.tz, wall)
    if kind == "unique":
        return [first], first, first
    if kind == "gap":
        return ([first] if s.dst_gap == "shift_forward" else []), first, first
    chosen = {"first": [first], "second": [second]}.get(s.dst_fold, [first, second])
    return chosen, first, second


def _bounds_after(s: Schedule, lower: datetime | None, inclusive: bool,
                  stop: datetime | None) -> tuple[datetime, bool, datetime | None]:
    lower = None if lower is None else to_utc(lower, "after")
    if lower is None or lower < s.start_at:
        lower, inclusive = s.start_at, True
    high = s.end_at
    if stop is not None:
        stop = to_utc(stop, "until")
        high = stop if high is None else min(high, stop)
    return lower, inclusive, high


def iter_forward(s: Schedule, lower: datetime | None, *, inclusive: bool = False,
                 stop: datetime | None = None) -> Iterator[datetime]:
    """Occurrences ascending: after `lower` (or at it when inclusive), up to end_at and `stop`."""
    lower, inclusive, high = _bounds_after(s, lower, inclusive, stop)

    def wanted(u: datetime) -> bool:
        return (u >= lower if inclusive else u > lower) and (high is None or u <= high)

    if s.kind == "at":
        if s.at is not None and wanted(s.at):
            yield s.at
        return
    if s.kind == "every":
        yield from _every_forward(s, lower, inclusive, high)
        return
    rule = compile_cron(s.cron or "")
    heap: list[datetime] = []
    last: datetime | None = None
    for wall in rule.walls_after(lowest_wall(s.tz, lower) - SECOND):
        instants, earliest, latest = _mapped(s, wall)
        for u in instants:
            if wanted(u):
                heapq.heappush(heap, u)
        # No later wall maps before `earliest`; in a steady stretch, none maps before `latest`.
        ready = latest if earliest == latest and steady(s.tz, latest) else earliest - _TICK
        while heap and heap[0] <= ready:
            u = heapq.heappop(heap)
            if u != last:
                last = u
                yield u
                if high is not None and u >= high:
                    return
        if (high is not None and earliest > high) or wall.year > lower.year + _HORIZON_YEARS:
            break
    while heap:
        u = heapq.heappop(heap)
        if u != last:
            last = u
            yield u


def _every_forward(s: Schedule, lower: datetime, inclusive: bool,
                   high: datetime | None) -> Iterator[datetime]:
    anchor, step = s.anchor or s.start_at, s.every
    assert step is not None
    # The grid extends both ways from the anchor (k < 0 only when start_at was moved before
    # it, as a backfill does); `lower` is already clamped to start_at.
    k = (lower - anchor) // step
    if anchor + k * step < lower or (anchor + k * step == lower and not inclusive):
        k += 1
    while True:
        try:
            u = anchor + k * step
        except OverflowError:
            return
        if high is not None and u > high:
            return
        yield u
        k += 1


def iter_backward(s: Schedule, upper: datetime, *, inclusive: bool = True,
                  floor: datetime | None = None) -> Iterator[datetime]:
    """Occurrences descending: before `upper` (or at it when inclusive), down to start_at and
    `floor` (inclusive)."""
    upper = to_utc(upper, "upper")
    if s.end_at is not None and s.end_at < upper:
        upper, inclusive = s.end_at, True
    low = s.start_at if floor is None else max(s.start_at, to_utc(floor, "floor"))

    def wanted(u: datetime) -> bool:
        return (u <= upper if inclusive else u < upper) and u >= low

    if s.kind == "at":
        if s.at is not None and wanted(s.at):
            yield s.at
        return
    if s.kind == "every":
        anchor, step = s.anchor or s.start_at, s.every
        assert step is not None
        k = (upper - anchor) // step
        if anchor + k * step == upper and not inclusive:
            k -= 1
        while anchor + k * step >= low:
            yield anchor + k * step
            k -= 1
        return
    rule = compile_cron(s.cron or "")
    heap: list[timedelta] = []  # _EPOCH - instant: a max-heap of instants
    last: datetime | None = None
    for wall in rule.walls_before(highest_wall(s.tz, upper) + SECOND):
        instants, earliest, latest = _mapped(s, wall)
        for u in instants:
            if wanted(u):
                heapq.heappush(heap, _EPOCH - u)
        # No earlier wall maps after `latest`; in a steady stretch, none maps after `earliest`.
        ready = earliest if earliest == latest and steady(s.tz, earliest) else latest + _TICK
        while heap and _EPOCH - heap[0] >= ready:
            u = _EPOCH - heapq.heappop(heap)
            if u != last:
                last = u
                yield u
                if u <= low:
                    return
        if latest < low or wall.year < upper.year - _HORIZON_YEARS:
            break
    while heap:
        u = _EPOCH - heapq.heappop(heap)
        if u != last:
            last = u
            yield u


def occurrences(s: Schedule, after: datetime | None, *, until: datetime | None = None,
                limit: int = 1000) -> list[datetime]:
    """Up to `limit` occurrences strictly after `after` (None: from start_at) and <= `until`."""
    found: list[datetime] = []
    if limit <= 0:
        return found
    for u in iter_forward(s, after, stop=until):
        found.append(u)
        if len(found) >= limit:
            break
    return found


def next_occurrence(s: Schedule, after: datetime | None) -> datetime | None:
    """The first occurrence strictly after `after` (None: the first one); None when none is left."""
    return next(iter_forward(s, after), None)


def expected_slots(s: Schedule, start: datetime, end: datetime, *,
                   paused: Sequence[tuple[datetime, datetime | None]] = (),
                   limit: int = 10_000) -> list[datetime]:
    """Occurrences in [start, end) outside paused intervals [from, to) (to None: still paused):
    what the reconciler expects to find a run or a skip event for."""
    end = to_utc(end, "end")
    windows = sorted((to_utc(a, "paused from"), None if b is None else to_utc(b, "paused to"))
                     for a, b in paused)
    found: list[datetime] = []
    source = iter_forward(s, start, inclusive=True, stop=end)
    while len(found) < limit:
        u = next(source, None)
        if u is None or u >= end:
            break
        covering = next(((a, b) for a, b in windows if a <= u and (b is None or u < b)), None)
        if covering is None:
            found.append(u)
        elif covering[1] is None:
            break
        else:  # jump over the pause instead of stepping through it
            source = iter_forward(s, covering[1], inclusive=True, stop=end)
    return found


def jitter_offset(s: Schedule, job_id: uuid.UUID, slot: datetime) -> timedelta:
    """A deterministic delay in [0, jitter) for this occurrence (millisecond steps): the same
    occurrence always gets the same offset on every scheduler instance and after restarts."""
    if s.jitter is None or s.jitter <= timedelta(0):
        return timedelta(0)
    window_ms = s.jitter // timedelta(milliseconds=1)
    if window_ms <= 0:
        return timedelta(0)
    stamp = to_utc(slot, "slot").isoformat().encode()
    digest = hashlib.sha256(b"ostinato-jitter\x00" + job_id.bytes + b"\x00" + stamp).digest()
    return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % window_ms)


def preview(s: Schedule, job_id: uuid.UUID, after: datetime,
            count: int) -> list[tuple[datetime, datetime]]:
    """The next `count` (slot, due instant) pairs, due = slot + jitter: what users check."""
    return [(u, u + jitter_offset(s, job_id, u)) for u in occurrences(s, after, limit=count)]
