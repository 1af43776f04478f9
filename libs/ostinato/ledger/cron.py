"""Cron expressions for the ledger: read with cronsim, never with croniter nor with
`ostinato.schedules` (the import-linter contract in pyproject.toml enforces it).

What is accepted and what it means is docs/SCHEDULES.md ("Cron syntax"), re-derived here from
the documented rules: 5 fields, or 6 with SECONDS FIRST (cronsim's own convention); the @-aliases;
names; `?` as `*`; a range may wrap (`22-2` is 22, 23, 0, 1, 2); `3-3` (and `3-3/2`) is 3;
classic day-of-month/day-of-week OR when neither starts with `*`/`?`; `L` in either day field;
`15W` (nearest weekday, never leaving the month; a day the month lacks counts as its last)
and `MON#2` (`L5` is the last Friday).

cronsim reads everything except `W`, wrapped ranges and `L<dow>`; wrapped ranges become lists,
`L5` becomes cronsim's `5L`, and a `W` day-of-month is matched here (cronsim then walks every
day, and `wall_times` keeps the days the rule names).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

from cronsim import CronSim, CronSimError

_ALIASES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {n: i + 1 for i, n in enumerate(
    "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split())}
_DAYS = {n: i for i, n in enumerate("SUN MON TUE WED THU FRI SAT".split())}
# (low, high, names) per field of the 6-field form: second minute hour dom month dow
_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}), (0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, _MONTHS), (0, 7, _DAYS))
_RANGE = re.compile(r"^([0-9A-Z]+)-([0-9A-Z]+)(?:/(\d+))?$")
_NEAREST = re.compile(r"^(\d+)W$")


class LedgerCronError(ValueError):
    """An expression the ledger cannot read (a stored schedule always should be readable)."""


@dataclass(frozen=True)
class LedgerCron:
    expression: str  # as stored
    cronsim_form: str  # what cronsim is given (6 fields, seconds first)
    nearest: frozenset[int]  # `nW` days of month (cronsim walks every day; `matches_day` filters)

    def wall_times(self, after: datetime) -> Iterator[datetime]:
        """Matching naive local wall times strictly after `after`, ascending."""
        try:
            walker = CronSim(self.cronsim_form, after.replace(microsecond=0))
        except CronSimError as exc:  # pragma: no cover - compile_cron already built it
            raise LedgerCronError(str(exc)) from exc
        while True:
            try:
                wall = next(walker)
            except (StopIteration, OverflowError, ValueError):
                return
            if self.nearest and not _is_nearest_weekday(wall.date(), self.nearest):
                continue
            yield wall


def _number(text: str, names: dict[str, int]) -> int:
    if text in names:
        return names[text]
    if not text.isdigit():
        raise LedgerCronError(f"{text!r} is not a value")
    return int(text)


def _part(part: str, low: int, high: int, names: dict[str, int], dow: bool) -> str:
    """One comma part rewritten into what cronsim reads the way the docs say."""
    if dow and part.startswith("L") and len(part) > 1:
        return f"{_number(part[1:], names)}L"  # croniter's "L5" = cronsim's "5L": last Friday
    match = _RANGE.match(part)
    if match is None:
        return part
    a, b = _number(match.group(1), names), _number(match.group(2), names)
    step = int(match.group(3) or 1)
    if dow and a == 7:
        a = 0  # Sunday either way
    if a == b:
        return str(a)  # "3-3" and "3-3/2" are 3
    if a < b:
        return f"{a}-{b}" + (f"/{step}" if step != 1 else "")
    top = 6 if dow else high  # a wrapped day-of-week range cycles through Sunday = 0
    cycle = [*range(a, top + 1), *range(low if not dow else 0, b + 1)]
    return ",".join(str(v) for v in cycle[::step])


@lru_cache(maxsize=4096)
def compile_cron(expression: str) -> LedgerCron:
    text = " ".join(expression.split())
    body = _ALIASES.get(text.lower(), text).upper()
    fields = body.split(" ")
    if len(fields) == 5:
        fields.insert(0, "0")
    if len(fields) != 6:
        raise LedgerCronError(f"{len(fields)} fields")
    fields = ["*" if f == "?" else f for f in fields]
    out: list[str] = []
    for i, field in enumerate(fields):
        low, high, names = _FIELDS[i]
        parts = [_part(p, low, high, names, dow=(i == 5)) for p in field.split(",")]
        out.append(",".join(parts))
    nearest: set[int] = set()
    dom_parts = out[3].split(",")
    if any(_NEAREST.match(p) for p in dom_parts):
        if len(dom_parts) != 1:
            raise LedgerCronError("W takes a single day")
        nearest.add(int(dom_parts[0][:-1]))
        out[3] = "*"  # every day; the nearest-weekday rule is applied to what cronsim yields
    form = " ".join(out)
    try:
        CronSim(form, datetime(2000, 1, 1))  # noqa: DTZ001 - naive wall time, by design
    except (CronSimError, ValueError, IndexError) as exc:
        raise LedgerCronError(f"{expression!r}: {exc}") from exc
    return LedgerCron(expression=text, cronsim_form=form, nearest=frozenset(nearest))


def _is_nearest_weekday(d: date, days: frozenset[int]) -> bool:
    """`nW`: the weekday nearest to day n of the month, never leaving the month."""
    last = calendar.monthrange(d.year, d.month)[1]
    for n in days:
        target = date(d.year, d.month, min(n, last))  # "31W" in April: nearest to the 30th
        weekday = target.weekday()  # Monday 0 .. Sunday 6
        if weekday == 5:  # Saturday: the Friday before, or Monday after on the 1st
            target = target - timedelta(days=1) if target.day > 1 else target + timedelta(days=2)
        elif weekday == 6:  # Sunday: the Monday after, or the Friday before at month's end
            target = (target + timedelta(days=1) if target.day < last
                      else target - timedelta(days=2))
        if target == d:
            return True
    return False
