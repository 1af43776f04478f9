"""User input → `Schedule`: validation that names each bad field, and normalisation (every
default made explicit, so the stored document keeps its meaning when defaults change). A cron
schedule that can never fire between its bounds is refused here."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from ostinato.domain.durations import format_duration, parse_duration
from ostinato.domain.errors import InvalidInput
from ostinato.schedules.cronexpr import CronSyntaxError, compile_cron
from ostinato.schedules.model import Fold, Schedule
from ostinato.schedules.occurrences import next_occurrence
from ostinato.schedules.spec import ScheduleSpec
from ostinato.schedules.zones import floor_second, load_zone, to_utc

_CALENDAR = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,99}$")
_CHOICES = {"dst_gap": ("shift_forward", "skip"), "dst_fold": ("auto", "first", "second", "both"),
            "misfire": ("run_once", "catch_up", "skip"), "overlap": ("allow", "skip", "queue")}


class _Errors:
    """Collects every problem so one 422 lists them all."""

    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def add(self, field: str, message: str) -> None:
        self.items.append({"field": f"schedule{'.' + field if field else ''}", "message": message})

    def raise_if_any(self) -> None:
        if self.items:
            detail = "; ".join(f"{e['field']}: {e['message']}" for e in self.items)
            raise InvalidInput(f"invalid schedule: {detail}", errors=self.items)


def _duration(errors: _Errors, field: str, text: str | None,
              minimum: timedelta) -> timedelta | None:
    if text is None:
        return None
    try:
        value = parse_duration(text)
    except ValueError as exc:
        errors.add(field, str(exc))
        return None
    if value < minimum:
        errors.add(field, f"must be at least {format_duration(minimum)}")
        return None
    return value


def _int(errors: _Errors, field: str, value: int | None, low: int, high: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        errors.add(field, f"must be an integer from {low} to {high}")


# Instants a schedule may name: far enough from the ends of Python's calendar that a zone's
# offset, a jitter or the next occurrence never overflows it.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def _instant(errors: _Errors, field: str, value: datetime | None) -> datetime | None:
    if value is None:
        return None
    try:
        instant = to_utc(value)
    except ValueError:
        errors.add(field, "must be an RFC 3339 instant with an offset, e.g. 2026-12-01T09:00:00Z")
        return None
    if not EARLIEST <= instant < LATEST:
        errors.add(field, f"must be from {EARLIEST.date()} to before {LATEST.date()}")
        return None
    return instant


def parse_schedule(spec: ScheduleSpec | None, *, now: datetime) -> Schedule:
    """Validate user input; InvalidInput names each bad field. No spec: one-off, due `now`."""
    now = to_utc(now, "now")
    if spec is None:
        return Schedule(kind="at", tz_name="UTC", start_at=now, at=now)
    errors = _Errors()
    kinds = [k for k in ("at", "cron", "every") if getattr(spec, k) is not None]
    if len(kinds) != 1:
        errors.add("", "exactly one of at, cron or every is required"
                   + (f" (got {' and '.join(kinds)})" if kinds else ""))
    for field, allowed in _CHOICES.items():
        if getattr(spec, field) not in allowed:
            errors.add(field, f"must be one of {', '.join(allowed)}")
    try:
        load_zone(spec.timezone)
    except (KeyError, TypeError, ValueError, OSError):
        errors.add("timezone", f"unknown IANA time zone {spec.timezone!r}; "
                               "use a name such as \"Europe/Berlin\" or \"UTC\"")
    second = timedelta(seconds=1)
    every = _duration(errors, "every", spec.every, second)
    grace = _duration(errors, "misfire_grace", spec.misfire_grace, timedelta(0))
    lateness = _duration(errors, "max_lateness", spec.max_lateness, second)
    jitter = _duration(errors, "jitter", spec.jitter, second)
    if lateness is not None and grace is not None and lateness < grace:
        errors.add("max_lateness", "must be at least misfire_grace")
    if jitter is not None and every is not None and jitter >= every:
        errors.add("jitter", "must be shorter than the interval (every)")
    _int(errors, "catch_up_max", spec.catch_up_max, 1, 1000)
    _int(errors, "auto_pause_after", spec.auto_pause_after, 1, 1000)
    if spec.calendar is not None and not _CALENDAR.match(spec.calendar):
        errors.add("calendar", "must be a calendar name: letters, digits, _ . : - (1-100)")
    rule = None
    if spec.cron is not None:
        try:
            rule = compile_cron(spec.cron)
        except CronSyntaxError as exc:
            errors.add("cron", str(exc))
    at = _instant(errors, "at", spec.at)
    start = _instant(errors, "start_at", spec.start_at)
    end = _instant(errors, "end_at", spec.end_at)
    if at is not None:
        start = start if start is not None else at
        if at < start:
            errors.add("at", "is before start_at")
        if end is not None and at > end:
            errors.add("at", "is after end_at")
    start = start if start is not None else floor_second(now)
    if end is not None and end <= start and at is None:
        errors.add("end_at", "must be after start_at"
                   + ("" if spec.start_at is not None else " (default: now)"))
    errors.raise_if_any()
    fold: Fold = "first"
    if spec.dst_fold != "auto":
        fold = spec.dst_fold
    elif rule is not None and len(rule.hours) > 1:
        fold = "both"
    schedule = Schedule(
        kind=kinds[0], tz_name=spec.timezone, start_at=start, at=at,  # type: ignore[arg-type]
        cron=rule.expression if rule else None, every=every,
        anchor=start if every is not None else None, end_at=end, dst_gap=spec.dst_gap,
        dst_fold=fold, misfire=spec.misfire, misfire_grace=grace or timedelta(0),
        max_lateness=lateness, catch_up_max=spec.catch_up_max, jitter=jitter,
        calendar=spec.calendar, overlap=spec.overlap, auto_pause_after=spec.auto_pause_after,
    )
    if rule is not None:
        if next_occurrence(schedule, None) is None:
            errors.add("cron", "never fires between start_at and end_at"
                       + (" (with dst_gap=skip, times inside DST gaps do not count)"
                          if spec.dst_gap == "skip" else ""))
            errors.raise_if_any()
    return schedule
