"""Time zones and the mapping from local wall time to UTC instants (DST gaps and folds).

Zones are always loaded from the pinned `tzdata` package, never from the host's
/usr/share/zoneinfo: every process (and every test) then computes the same instants for the same
schedule, whatever the operating system ships (DESIGN invariant 6, one notion of time).

A wall time `w` in a zone is one of:
- unique: exactly one instant has that local time;
- fold: two instants have it (the clock was set back); the first is the earlier (DST) one;
- gap: no instant has it (the clock jumped forward); the transition instant T, the first instant
  after the gap, is where `shift_forward` puts it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from importlib import resources
from typing import Literal
from zoneinfo import ZoneInfo

_NAME = re.compile(r"^[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*$")
_HOUR = timedelta(hours=1)
SECOND = timedelta(seconds=1)
# UTC offsets span at most 26 hours (-12:00 .. +14:00): a bound for every "nearby" search below.
_SPAN_HOURS = 27

WallKind = Literal["unique", "fold", "gap"]


@cache
def load_zone(name: str) -> ZoneInfo:
    """The IANA zone `name` from the pinned tzdata package; KeyError when it does not exist."""
    if not _NAME.match(name) or ".." in name:
        raise KeyError(name)
    node = resources.files("tzdata").joinpath("zoneinfo", *name.split("/"))
    if not node.is_file():
        raise KeyError(name)
    with node.open("rb") as handle:
        return ZoneInfo.from_file(handle, key=name)


def to_utc(value: datetime, what: str = "instant") -> datetime:
    """Normalise an aware datetime to UTC; naive ones are refused (they are ambiguous)."""
    if value.tzinfo is UTC:  # as the database and the documents give them: nothing to do
        return value
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got naive {value.isoformat()}")
    return value.astimezone(UTC)


def _offset(tz: ZoneInfo, instant: datetime) -> timedelta:
    off = tz.utcoffset(instant.astimezone(tz))
    assert off is not None
    return off


@lru_cache(maxsize=4096)
def _transition(tz: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The first instant in (before, after] whose UTC offset differs from the one at `before`."""
    lo, hi = int(before.timestamp()), int(after.timestamp())
    base = _offset(tz, before)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset(tz, datetime.fromtimestamp(mid, UTC)) == base:
            lo = mid
        else:
            hi = mid
    return datetime.fromtimestamp(hi, UTC)


def classify(tz: ZoneInfo, wall: datetime) -> tuple[WallKind, datetime, datetime]:
    """(kind, earliest, latest) instants of a naive wall time; a gap gives the transition twice."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if first == second:
        return "unique", first, first
    if first < second:
        return "fold", first, second
    # In a gap, fold=0 reads the wall with the offset before the change and lands after it,
    # fold=1 with the offset after the change and lands before it: the change lies between.
    instant = _transition(tz, second, first)
    return "gap", instant, instant


@lru_cache(maxsize=8192)
def _offsets_near(tz: ZoneInfo, hour: datetime) -> tuple[timedelta, timedelta]:
    """(min, max) UTC offset sampled hourly within 27 hours either side of `hour`: shared by all
    schedules of a zone evaluated in the same hour."""
    found = [_offset(tz, hour + k * _HOUR) for k in range(-_SPAN_HOURS, _SPAN_HOURS + 2)]
    return min(found), max(found)


def steady(tz: ZoneInfo, instant: datetime) -> bool:
    """True when the offset is the same for 27 hours either side: wall time and UTC then map one
    to one in order, so an instant can be emitted without looking at the next wall time."""
    least, most = _offsets_near(tz, instant.replace(minute=0, second=0, microsecond=0))
    return least == most


def lowest_wall(tz: ZoneInfo, instant: datetime) -> datetime:
    """A wall time below which no wall time maps to an instant >= `instant` (naive).

    Wall time w maps to u only if w = u + offset(u), and for u beyond instant + 26 h that is more
    than any offset added to `instant`: the least offset of the next 26 hours bounds it."""
    least, _ = _offsets_near(tz, instant.replace(minute=0, second=0, microsecond=0))
    return (instant + least).replace(tzinfo=None)


def highest_wall(tz: ZoneInfo, instant: datetime) -> datetime:
    """A wall time above which no wall time maps to an instant <= `instant` (naive)."""
    _, most = _offsets_near(tz, instant.replace(minute=0, second=0, microsecond=0))
    return (instant + most).replace(tzinfo=None)


def floor_second(value: datetime) -> datetime:
    """Drop sub-second precision (croniter works in whole seconds)."""
    return value.replace(microsecond=0)

