"""The expected slots of a schedule, enumerated independently of the scheduler.

Input is the schedule document stored in the job's `JobCreated` event (docs/SCHEDULES.md, "What
is stored"), read here by its own reader; the rules applied are the documented ones:

- `at`: the one instant, if within the bounds;
- `every`: `anchor + k × interval` in UTC (k may be negative when `start_at` precedes the anchor);
- `cron`: the wall times cronsim matches in the schedule's zone (`ledger.cron`), each mapped to UTC
  by `dst_gap`/`dst_fold` (`ledger.walls`); several wall times landing on one instant are one slot;
- bounds: from `start_at` (inclusive) to `end_at` (inclusive);
- pauses `[paused_at, resumed_at)` and calendar dates (the slot's local date) do not remove a
  slot: they mark it (`ExpectedSlot.paused`, `.excluded`) — the reconciler expects nothing for a
  paused slot and a `calendar` skip for an excluded one.

Pure: values in, values out; no clock, no I/O, nothing of `ostinato.schedules` nor croniter.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ostinato.domain.durations import parse_duration
from ostinato.ledger.cron import LedgerCron, compile_cron
from ostinato.ledger.walls import highest_offset, lowest_offset, to_instants, zone

_SECOND = timedelta(seconds=1)
_TICK = timedelta(microseconds=1)  # end_at is inclusive
_MARGIN = timedelta(hours=1)  # walls looked at beyond the window's offset bounds
_YEARS = 400  # a cron matching nothing usable in 400 years never will (the calendar repeats)


@dataclass(frozen=True)
class LedgerSchedule:
    """The parts of a stored schedule document that decide when slots fall."""

    kind: str  # at | cron | every
    timezone: str
    start_at: datetime
    end_at: datetime | None = None
    at: datetime | None = None
    cron: str | None = None
    every: timedelta | None = None
    anchor: datetime | None = None
    dst_gap: str = "shift_forward"
    dst_fold: str = "first"  # resolved in the document: first | second | both
    jitter: timedelta | None = None
    calendar: str | None = None
    overlap: str = "allow"

    @property
    def tz(self) -> ZoneInfo:
        return zone(self.timezone)


@dataclass(frozen=True)
class ExpectedSlot:
    slot: datetime
    paused: bool = False  # inside a pause: nothing is expected
    excluded: bool = False  # on a calendar date: a `calendar` skip is expected


def _instant(value: Any) -> datetime | None:
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"naive instant {value!r} in a schedule document")
    return parsed.astimezone(UTC)


def read_document(doc: dict[str, Any]) -> LedgerSchedule:
    """The stored document (version 1, or the first release's `{"at": ...}`)."""
    if "kind" not in doc:
        at = _instant(doc.get("at"))
        if at is None or set(doc) != {"at"}:
            raise ValueError(f"not a schedule document: {sorted(doc)}")
        return LedgerSchedule(kind="at", timezone="UTC", start_at=at, at=at)
    if doc.get("version") != 1:
        raise ValueError(f"unsupported schedule document version {doc.get('version')!r}")
    start = _instant(doc["start_at"])
    assert start is not None
    every = doc.get("every")
    jitter = doc.get("jitter")
    return LedgerSchedule(
        kind=doc["kind"], timezone=doc["timezone"], start_at=start,
        end_at=_instant(doc.get("end_at")), at=_instant(doc.get("at")), cron=doc.get("cron"),
        every=None if every is None else parse_duration(every),
        anchor=_instant(doc.get("anchor")), dst_gap=doc.get("dst_gap", "shift_forward"),
        dst_fold=doc.get("dst_fold", "first"),
        jitter=None if jitter is None else parse_duration(jitter),
        calendar=doc.get("calendar"), overlap=doc.get("overlap", "allow"))


def slots(s: LedgerSchedule, start: datetime, end: datetime) -> Iterator[datetime]:
    """The schedule's slots in [start, end), ascending, UTC."""
    lower, upper = max(start.astimezone(UTC), s.start_at), end.astimezone(UTC)
    last = upper if s.end_at is None else min(upper, s.end_at + _TICK)
    if lower >= last:
        return
    if s.kind == "at":
        if s.at is not None and lower <= s.at < last:
            yield s.at
    elif s.kind == "every":
        yield from _every(s, lower, last)
    elif s.kind == "cron":
        yield from _cron(s, compile_cron(s.cron or ""), lower, last)
    else:
        raise ValueError(f"unknown schedule kind {s.kind!r}")


def _every(s: LedgerSchedule, lower: datetime, last: datetime) -> Iterator[datetime]:
    step, anchor = s.every, s.anchor or s.start_at
    assert step is not None and step > timedelta(0)
    k = -((anchor - lower) // step)  # ceil((lower - anchor) / step)
    while (u := anchor + k * step) < last:
        yield u
        k += 1


def _cron(s: LedgerSchedule, rule: LedgerCron, lower: datetime,
          last: datetime) -> Iterator[datetime]:
    """Walk wall times ascending and release an instant once no later wall time can map before
    it: a wall time w maps to an instant of at least w − (the largest offset near w)."""
    tz = s.tz
    start_wall = (lower + lowest_offset(tz, lower)).replace(tzinfo=None) - _MARGIN
    held: list[datetime] = []
    previous: datetime | None = None
    for wall in rule.wall_times(start_wall - _SECOND):
        for u in to_instants(tz, wall, s.dst_gap, s.dst_fold):
            if lower <= u < last:
                heapq.heappush(held, u)
        safe = wall.replace(tzinfo=UTC) - highest_offset(tz, wall.replace(tzinfo=UTC)) - _MARGIN
        while held and held[0] < safe:
            u = heapq.heappop(held)
            if u != previous:
                previous = u
                yield u
        if safe >= last or wall.year > lower.year + _YEARS:
            break
    while held:
        u = heapq.heappop(held)
        if u != previous:
            previous = u
            yield u


def expected_slots(s: LedgerSchedule, start: datetime, end: datetime, *,
                   paused: Sequence[tuple[datetime, datetime | None]] = (),
                   excluded_dates: Iterable[date] = (), limit: int | None = None,
                   ) -> list[ExpectedSlot]:
    """The slots in [start, end), each marked paused (inside [paused_at, resumed_at), resumed_at
    None: still paused) and excluded (its local date is in the calendar); at most `limit`."""
    windows = [(a.astimezone(UTC), None if b is None else b.astimezone(UTC)) for a, b in paused]
    dates = frozenset(excluded_dates)
    tz = s.tz
    found: list[ExpectedSlot] = []
    for u in slots(s, start, end):
        if limit is not None and len(found) >= limit:
            break
        found.append(ExpectedSlot(
            slot=u, paused=any(a <= u and (b is None or u < b) for a, b in windows),
            excluded=bool(dates) and u.astimezone(tz).date() in dates))
    return found
