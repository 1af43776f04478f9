"""Local wall time to UTC for the ledger, re-derived from zoneinfo alone (not from
`ostinato.schedules.zones`): a wall time is one of the instants `wall - offset` that reads back
as that wall time, for the offsets the zone uses around it. None is a gap (the clock jumped over
it; `shift_forward` takes the first instant whose wall time is later), two are a fold (the first
pass is the earlier instant).

Zones come from the pinned `tzdata` package, as everywhere in Ostinato (one notion of time):
the same data, read by other code.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from importlib import resources
from zoneinfo import ZoneInfo

_HOUR = timedelta(hours=1)
_REACH = 30  # hours either side sampled for the offsets a wall time may be read with


@cache
def zone(name: str) -> ZoneInfo:
    """The IANA zone from the tzdata package; KeyError when there is none."""
    if not name or ".." in name or name.startswith("/"):
        raise KeyError(name)
    node = resources.files("tzdata").joinpath("zoneinfo", *name.split("/"))
    if not node.is_file():
        raise KeyError(name)
    with node.open("rb") as handle:
        return ZoneInfo.from_file(handle, key=name)


def _naive(instant: datetime) -> datetime:
    return instant.astimezone(UTC).replace(tzinfo=None)


@lru_cache(maxsize=16384)
def offsets_near(tz: ZoneInfo, hour: datetime) -> tuple[timedelta, ...]:
    """The distinct UTC offsets in use within 30 hours of the naive UTC `hour`, ascending."""
    base = hour.replace(tzinfo=UTC)
    found = set()
    for k in range(-_REACH, _REACH + 1):
        offset = (base + k * _HOUR).astimezone(tz).utcoffset()
        assert offset is not None
        found.add(offset)
    return tuple(sorted(found))


def _hour_of(wall: datetime) -> datetime:
    return wall.replace(minute=0, second=0, microsecond=0)


def _local(tz: ZoneInfo, instant: datetime) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


def readings(tz: ZoneInfo, wall: datetime) -> list[datetime]:
    """The UTC instants whose local time in `tz` is the naive `wall`, ascending (0, 1 or 2)."""
    found = []
    for offset in offsets_near(tz, _hour_of(wall)):
        candidate = (wall - offset).replace(tzinfo=UTC)
        if _local(tz, candidate) == wall and candidate not in found:
            found.append(candidate)
    return sorted(found)


def after_gap(tz: ZoneInfo, wall: datetime) -> datetime:
    """For a wall time inside a gap: the first instant whose local time is later than it."""
    offsets = offsets_near(tz, _hour_of(wall))
    lo = int((wall - offsets[-1]).replace(tzinfo=UTC).timestamp())  # local time <= wall here
    hi = int((wall - offsets[0]).replace(tzinfo=UTC).timestamp())  # and later than wall here
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _local(tz, datetime.fromtimestamp(mid, UTC)) > wall:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, UTC)


def to_instants(tz: ZoneInfo, wall: datetime, gap: str, fold: str) -> list[datetime]:
    """The instants a matching wall time stands for under the DST policy."""
    found = readings(tz, wall)
    if len(found) == 1:
        return found
    if not found:
        return [after_gap(tz, wall)] if gap == "shift_forward" else []
    if fold == "first":
        return found[:1]
    if fold == "second":
        return found[-1:]
    return [found[0], found[-1]]


def lowest_offset(tz: ZoneInfo, instant: datetime) -> timedelta:
    return offsets_near(tz, _hour_of(_naive(instant)))[0]


def highest_offset(tz: ZoneInfo, instant: datetime) -> timedelta:
    return offsets_near(tz, _hour_of(_naive(instant)))[-1]
