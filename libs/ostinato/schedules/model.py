"""The normalised schedule and its stored document.

In a `Schedule` nothing is implicit (`ostinato.schedules.parse` builds it from user input):
instants are UTC, durations are timedeltas, `dst_fold` is resolved (never "auto"), the `every`
anchor and the start are explicit. `to_document` writes exactly that into the event log, so a
schedule read back years later (with other defaults in the code) still fires at the same
instants.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from ostinato.domain.durations import format_duration, parse_duration
from ostinato.schedules.spec import DstGap, Misfire, Overlap
from ostinato.schedules.zones import load_zone, to_utc

Kind = Literal["at", "cron", "every"]
Fold = Literal["first", "second", "both"]
DOCUMENT_VERSION = 1
@dataclass(frozen=True)
class Schedule:
    """A schedule ready to evaluate. `tz` is derived from `tz_name` (loaded from tzdata)."""

    kind: Kind
    tz_name: str
    start_at: datetime
    at: datetime | None = None
    cron: str | None = None
    every: timedelta | None = None
    anchor: datetime | None = None
    end_at: datetime | None = None
    dst_gap: DstGap = "shift_forward"
    dst_fold: Fold = "first"
    misfire: Misfire = "run_once"
    misfire_grace: timedelta = timedelta(seconds=60)
    max_lateness: timedelta | None = None
    catch_up_max: int = 10
    jitter: timedelta | None = None
    calendar: str | None = None
    overlap: Overlap = "allow"
    auto_pause_after: int | None = None

    @property
    def tz(self) -> ZoneInfo:
        return load_zone(self.tz_name)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _dur(value: timedelta | None) -> str | None:
    return None if value is None else format_duration(value)


def to_document(s: Schedule) -> dict[str, Any]:
    """The complete JSON-able form stored in the log (every default explicit)."""
    return {
        "version": DOCUMENT_VERSION, "kind": s.kind, "at": _iso(s.at), "cron": s.cron,
        "every": _dur(s.every), "timezone": s.tz_name, "start_at": _iso(s.start_at),
        "end_at": _iso(s.end_at), "anchor": _iso(s.anchor), "dst_gap": s.dst_gap,
        "dst_fold": s.dst_fold, "misfire": s.misfire, "misfire_grace": _dur(s.misfire_grace),
        "max_lateness": _dur(s.max_lateness), "catch_up_max": s.catch_up_max,
        "jitter": _dur(s.jitter), "calendar": s.calendar, "overlap": s.overlap,
        "auto_pause_after": s.auto_pause_after,
    }


def _when(value: Any) -> datetime | None:
    return None if value is None else to_utc(datetime.fromisoformat(value))


def _span(value: Any) -> timedelta | None:
    return None if value is None else parse_duration(value)


def from_document(doc: dict[str, Any]) -> Schedule:
    """Inverse of to_document. Also reads the first release's one-off form {"at": "..."}."""
    if "kind" not in doc:
        if set(doc) != {"at"} or doc["at"] is None:
            raise ValueError(f"not a schedule document: {sorted(doc)}")
        at = _when(doc["at"])
        assert at is not None
        return Schedule(kind="at", tz_name="UTC", start_at=at, at=at)
    if doc.get("version") != DOCUMENT_VERSION:
        raise ValueError(f"unsupported schedule document version {doc.get('version')!r}")
    start = _when(doc["start_at"])
    assert start is not None
    return Schedule(
        kind=doc["kind"], tz_name=doc["timezone"], start_at=start, at=_when(doc["at"]),
        cron=doc["cron"], every=_span(doc["every"]), anchor=_when(doc["anchor"]),
        end_at=_when(doc["end_at"]), dst_gap=doc["dst_gap"], dst_fold=doc["dst_fold"],
        misfire=doc["misfire"], misfire_grace=_span(doc["misfire_grace"]) or timedelta(0),
        max_lateness=_span(doc["max_lateness"]), catch_up_max=doc["catch_up_max"],
        jitter=_span(doc["jitter"]), calendar=doc["calendar"], overlap=doc["overlap"],
        auto_pause_after=doc["auto_pause_after"],
    )
