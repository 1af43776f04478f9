"""A schedule in words, for people reading a list of jobs: "every day at 02:30 Europe/Berlin",
"every 15 minutes", "at 09:00 UTC on Monday to Friday", "every 90 minutes", "once at
2026-12-01 10:00 Europe/Berlin".

Words only where they say exactly what the schedule does: the cron expression is read through
the scheduler's own parser (`compile_cron`, croniter's expansion of its fields), and every shape
this module does not put into words (a nearest weekday `W`, both day fields restricted with
AND, times that fill a long irregular list, ...) falls back to the expression itself, marked
`cron <expr> (<zone>)`: a description that hides a schedule's meaning is worse than none. Pure:
no clock, no I/O."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from croniter import croniter

from ostinato.domain.durations import parse_duration
from ostinato.schedules.cronexpr import CronSyntaxError, compile_cron
from ostinato.schedules.zones import load_zone

WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTHS = ("", "January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
MAX_TIMES = 6  # more times of day than this are not a readable list: the expression is shown

Field = list[Any]  # croniter's expansion of one field: ints, or ['*'], or ['l']


def describe(schedule: dict[str, Any]) -> str:
    """A job's schedule document (`ostinato.schedules.to_document`, or the first release's
    `{"at": ...}`) in words."""
    zone = str(schedule.get("timezone") or "UTC")
    if schedule.get("cron"):
        text = describe_cron(str(schedule["cron"]), zone)
    elif schedule.get("every"):
        try:
            text = describe_every(parse_duration(str(schedule["every"])))
        except ValueError:
            text = f"every {schedule['every']}"
    elif schedule.get("at"):
        text = describe_at(str(schedule["at"]), zone)
    else:
        text = "once"
    if schedule.get("calendar"):
        text += f", except the dates of calendar {schedule['calendar']}"
    return text


def fallback(expression: str, zone: str) -> str:
    """What an expression without words reads as: the expression itself."""
    return f"cron {expression} ({zone})"


def describe_every(every: timedelta) -> str:
    """An interval in the largest unit that divides it: "every 15 minutes", "every 90 minutes",
    "every day", "every 2 weeks"."""
    total = int(every.total_seconds())
    for unit, name in ((604800, "week"), (86400, "day"), (3600, "hour"), (60, "minute"),
                       (1, "second")):
        if total >= unit and total % unit == 0:
            n = total // unit
            return f"every {name}" if n == 1 else f"every {n} {name}s"
    return f"every {every}"


def describe_at(at: str, zone: str) -> str:
    """A one-off's instant in its zone: "once at 2026-12-01 10:00 Europe/Berlin"."""
    try:
        local = datetime.fromisoformat(at).astimezone(load_zone(zone))
    except (ValueError, KeyError):
        return f"once at {at}"
    clock = local.strftime("%Y-%m-%d %H:%M" + (":%S" if local.second else ""))
    return f"once at {clock} {zone}"


def describe_cron(expression: str, zone: str = "UTC") -> str:
    """A cron expression in words, or `fallback(expression, zone)` for a shape this module does
    not put into words (never an approximation)."""
    try:
        rule = compile_cron(expression)
        fields, nth = croniter.expand(rule.evaluated, second_at_beginning=rule.with_seconds)
    except (CronSyntaxError, ValueError, KeyError, TypeError, IndexError):
        return fallback(expression, zone)
    raw = rule.evaluated.split(" ")
    if rule.with_seconds:  # croniter gives the seconds last; our text has them first
        seconds, fields, raw = fields[5], fields[:5], raw[1:]
    else:
        seconds = [0]
    words = _words(seconds, *fields, nth=nth, days_and=rule.days_and, raw_dom=raw[2], zone=zone)
    return words or fallback(expression, zone)


def _words(seconds: Field, minute: Field, hour: Field, dom: Field, month: Field, dow: Field, *,
           nth: dict[int, set[Any]], days_and: bool, raw_dom: str, zone: str) -> str | None:
    if "w" in raw_dom.lower():
        return None  # the nearest weekday to a date: not put into words
    days = _days(dom, dow, nth, days_and)
    months = _months(month)
    if days is None or months is None:
        return None
    restricted = bool(days or months)
    if days and months and _any(dow) and len(dom) == 1 and len(month) == 1 \
            and isinstance(dom[0], int):  # 0 0 1 1 *: "on 1 January"
        days, months = f"on {dom[0]} {MONTHS[month[0]]}", ""
    tail = " ".join(p for p in (days, months) if p)
    if seconds != [0]:
        step = _step(seconds, 0, 59)
        if step and _any(minute) and _any(hour) and not restricted:
            return f"every {step} seconds"
        if len(seconds) != 1:
            return None
    second = seconds[0] if seconds != [0] else 0
    times = _times(minute, hour, second)
    if times is not None:  # at fixed times of day
        if not days:
            return " ".join(p for p in (f"every day at {times} {zone}", months) if p)
        return f"at {times} {zone} {tail}"
    often = _often(minute, hour, second)
    if often is None:
        return None
    text, zoned = often
    if zoned or restricted:
        text += f" {zone}"
    return f"{text} {tail}" if restricted else text


def _any(field: Field) -> bool:
    return field == ["*"]


def _step(values: Field, low: int, high: int) -> int | None:
    """n when the values are every nth of the whole cycle from its start (*/n), n dividing it."""
    if _any(values) or len(values) < 2 or not all(isinstance(v, int) for v in values):
        return None
    n = values[1] - values[0]
    if (high + 1 - low) % n or values != list(range(low, high + 1, n)):
        return None
    return n


def _clock(h: int, m: int, s: int = 0) -> str:
    return f"{h:02d}:{m:02d}" + (f":{s:02d}" if s else "")


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """Sorted values as (first, last) of each run of consecutive values."""
    out: list[tuple[int, int]] = []
    for v in values:
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def _spans(values: list[int], name: Any) -> str:
    """1,2,3,4,5 → "Monday to Friday"; 1,3 → "Monday and Wednesday" (a run of 3 or more is a
    range, of 2 two items)."""
    parts: list[str] = []
    for first, last in _runs(values):
        if last - first >= 2:
            parts.append(f"{name(first)} to {name(last)}")
        else:
            parts.extend(name(v) for v in range(first, last + 1))
    return _and(parts)


def _contiguous(values: Field) -> tuple[int, int] | None:
    if _any(values) or not all(isinstance(v, int) for v in values):
        return None
    runs = _runs(sorted(values))
    return runs[0] if len(runs) == 1 else None


def _times(minute: Field, hour: Field, second: int) -> str | None:
    """A short list of fixed times of day ("09:00 and 17:30"), or None."""
    if _any(minute) or _any(hour) or not all(isinstance(v, int) for v in minute + hour):
        return None
    if len(minute) * len(hour) > MAX_TIMES:
        return None
    if len(hour) > 1 and len(minute) == 1 and _contiguous(hour) and len(hour) > 2:
        return None  # 9-17 at :00 reads better as "every hour from 09:00 to 17:00"
    return _and([_clock(h, m, second) for h in sorted(hour) for m in sorted(minute)])


def _often(minute: Field, hour: Field, second: int) -> tuple[str, bool] | None:
    """A repeating time of day: the words, and whether they depend on the zone."""
    if second and not (len(minute) == 1 and not _any(minute)):
        return None
    every_minutes = _step(minute, 0, 59)
    if _any(hour):
        if _any(minute):
            return "every minute", False
        if every_minutes:
            return f"every {every_minutes} minutes", False
        if all(isinstance(m, int) for m in minute) and len(minute) <= MAX_TIMES:
            if minute == [0] and not second:
                return "every hour, on the hour", False
            at = _and([f":{m:02d}" + (f":{second:02d}" if second else "") for m in minute])
            return f"every hour at {at}", False
        return None
    every_hours = _step(hour, 0, 23)
    if every_hours and len(minute) == 1 and not _any(minute):
        return f"every {every_hours} hours from {_clock(0, minute[0], second)}", True
    span = _contiguous(hour)
    if span is None:
        return None
    first, last = span
    if _any(minute):
        return f"every minute from {_clock(first, 0)} to {_clock(last, 59)}", True
    if every_minutes:
        return (f"every {every_minutes} minutes from {_clock(first, 0)} to "
                f"{_clock(last, 60 - every_minutes)}"), True
    if len(minute) == 1 and isinstance(minute[0], int):
        m = minute[0]
        return f"every hour from {_clock(first, m, second)} to {_clock(last, m, second)}", True
    return None


def _weekday_name(v: int) -> str:
    return WEEKDAYS[v % 7]


def _month_name(v: int) -> str:
    return MONTHS[v]


def _weekdays(dow: Field, nth: dict[int, set[Any]]) -> str | None:
    if not all(isinstance(v, int) for v in dow):
        return None
    if nth:  # 1#2 (the second Monday), L5 (the last Friday): one weekday only
        if len(dow) != 1 or len(nth) != 1:
            return None
        (day, which), = nth.items()
        if len(which) != 1:
            return None
        (n,) = which
        order = "last" if n == "l" else ORDINALS.get(n) if isinstance(n, int) else None
        return f"on the {order} {_weekday_name(day)} of the month" if order else None
    monday_first = sorted({7 if v == 0 else v for v in dow})
    return "on " + _spans(monday_first, _weekday_name)


def _month_days(dom: Field) -> str | None:
    if dom == ["l"]:
        return "on the last day of the month"
    if not all(isinstance(v, int) for v in dom):
        return None
    if len(dom) == 1:
        return f"on day {dom[0]} of the month"
    if len(_runs(sorted(dom))) > MAX_TIMES:
        return None  # */2: sixteen days are no list to read
    return "on days " + _spans(sorted(dom), str) + " of the month"


def _days(dom: Field, dow: Field, nth: dict[int, set[Any]], days_and: bool) -> str | None:
    """The day part ("" for every day), or None when it is not put into words."""
    if _any(dom) and _any(dow):
        return ""
    if _any(dom):
        return _weekdays(dow, nth)
    if _any(dow):
        return _month_days(dom)
    if days_and:  # both restricted and both must hold (one starts with '*'): not put in words
        return None
    a, b = _month_days(dom), _weekdays(dow, nth)
    return f"{a} or {b}" if a and b else None


def _months(month: Field) -> str | None:
    if _any(month):
        return ""
    if not all(isinstance(v, int) for v in month):
        return None
    return "in " + _spans(sorted(month), _month_name)
