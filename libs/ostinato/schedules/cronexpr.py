"""Cron expressions, evaluated by croniter on NAIVE local wall times.

croniter is only asked "which wall times match"; mapping a wall time to UTC (DST gaps and folds)
is Ostinato's own policy (zones.py). croniter given naive datetimes does plain calendar arithmetic,
with none of its own DST handling (which would shift gap times forward and fire fold times twice).

Accepted: 5 fields (minute hour day-of-month month day-of-week), or 6 fields with SECONDS FIRST
(Quartz/Spring style: second minute hour day-of-month month day-of-week). croniter's own 6-field
convention puts seconds LAST, so 6-field expressions are always given to it with
`second_at_beginning=True`. The @hourly/@daily/@weekly/@monthly/@yearly aliases, names (JAN,
MON), L, W, # and ? are croniter's. A wrapped range with a step (`45-15/10`) is rewritten into
its list first (croniter 7 wraps minutes modulo 59). Refused: 7 fields (a year field), H (hashed)
and R (random), and `#`, `W` or `L<weekday>` when the other day field is restricted too (croniter
reads `0 0 28-3 * L5` as the last Fridays only, not the documented OR).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from croniter import CroniterError, croniter

from ostinato.schedules.zones import SECOND, floor_second

_ALIASES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EQUAL = re.compile(r"^([0-9A-Za-z]+)-([0-9A-Za-z]+)(?:/\d+)?$")
_STEPPED_RANGE = re.compile(r"^([0-9A-Za-z]+)-([0-9A-Za-z]+)/(\d+)$")
_MONTHS = {m: i for i, m in enumerate(
    "jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)}
_WEEKDAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}
# (lowest, highest, names) per field, minute first; seconds share the minutes' cycle.
_CYCLES = ((0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, _MONTHS), (0, 6, _WEEKDAYS))
_HASHED = re.compile(r"^[hr](?:\(|/|$)", re.IGNORECASE)
# croniter never looks further than this for a match; a wall time beyond it is treated as none.
_MAX_YEAR = 9990


class CronSyntaxError(ValueError):
    """The expression is not acceptable; the message says why, for the user."""


@dataclass(frozen=True)
class CronRule:
    """A validated expression: the normalised text and what the DST `auto` rule needs."""

    expression: str  # as the user wrote it (whitespace normalised): what is stored
    evaluated: str  # what croniter is given (see _equal_range and _day_rule)
    with_seconds: bool
    days_and: bool  # day-of-month AND day-of-week (one of them starts with '*'), else OR
    hours: tuple[int, ...]  # the hours of the day it fires in (all 24 for '*')

    def walls_after(self, wall: datetime) -> Iterator[datetime]:
        """Matching naive wall times strictly after `wall`, ascending."""
        return self._walk(wall, backwards=False)

    def walls_before(self, wall: datetime) -> Iterator[datetime]:
        """Matching naive wall times strictly before `wall`, descending."""
        return self._walk(wall, backwards=True)

    def _walk(self, wall: datetime, *, backwards: bool) -> Iterator[datetime]:
        start = floor_second(wall)
        if backwards and start != wall:
            start += SECOND  # croniter steps back from whole seconds: keep 'strictly before' exact
        # Parsing is most of croniter's cost: copy a parsed prototype instead.
        cursor = copy.copy(_prototype(self.evaluated, self.with_seconds, self.days_and))
        cursor.set_current(start, force=True)
        step = cursor.get_prev if backwards else cursor.get_next
        previous = wall
        while True:
            try:
                found: datetime = step(datetime)
            except (CroniterError, OverflowError, ValueError):
                return
            if found.year > _MAX_YEAR or found.year < 2:
                return
            if (found <= previous) if not backwards else (found >= previous):
                continue  # never happens with croniter 7; guards against a loop if it did
            previous = found
            yield found


@lru_cache(maxsize=4096)
def _prototype(expression: str, with_seconds: bool, days_and: bool) -> croniter:
    naive_origin = datetime(2000, 1, 1)  # noqa: DTZ001 — croniter walks naive wall time
    return croniter(expression, naive_origin, second_at_beginning=with_seconds,
                    implement_cron_bug=days_and)


def compile_cron(text: str) -> CronRule:
    """Validate and normalise; CronSyntaxError names the problem."""
    if not isinstance(text, str):
        raise CronSyntaxError("must be a string")
    return _compile(" ".join(text.split()))


@lru_cache(maxsize=4096)
def _compile(expression: str) -> CronRule:
    if not expression:
        raise CronSyntaxError("empty expression; write e.g. \"30 2 * * *\"")
    body = _ALIASES.get(expression.lower(), expression)
    if body.startswith("@"):
        raise CronSyntaxError(
            f"unknown alias {expression!r}; known: {', '.join(sorted(_ALIASES))}")
    fields = body.split(" ")
    if len(fields) not in (5, 6):
        raise CronSyntaxError(
            f"{len(fields)} fields; write 5 (minute hour day-of-month month day-of-week) or 6 "
            "with seconds first (second minute hour day-of-month month day-of-week)")
    for field in fields:
        for part in field.split(","):
            if _HASHED.match(part):
                raise CronSyntaxError(
                    f"{part!r}: hashed (H) and random (R) values are not supported; "
                    "use explicit values (add `jitter` to spread load)")
    with_seconds = len(fields) == 6
    cycles = ((0, 59, {}), *_CYCLES) if with_seconds else _CYCLES
    fields = [",".join(_wrapped_step(_equal_range(p), cycle) for p in f.split(","))
              for f, cycle in zip(fields, cycles, strict=True)]
    try:
        expanded = _expand(" ".join(fields), with_seconds)
        days_and = _day_rule(fields, with_seconds)
    except CronSyntaxError:
        raise
    except CroniterError as exc:
        raise CronSyntaxError(_clean(str(exc), expression)) from exc
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise CronSyntaxError(f"{expression!r} is not a valid cron expression") from exc
    hour_values = expanded[1]
    hours = tuple(range(24)) if "*" in hour_values else tuple(sorted({int(h) for h in hour_values}))
    return CronRule(expression=expression, evaluated=" ".join(fields), with_seconds=with_seconds,
                    days_and=days_and, hours=hours)


def _expand(body: str, with_seconds: bool) -> list[list[int | str]]:
    expanded, _ = croniter.expand(body, second_at_beginning=with_seconds)
    return expanded


def _day_rule(fields: list[str], with_seconds: bool) -> bool:
    """Classic (Vixie) cron: when neither day field starts with '*' (or is '?'), a day matches
    if EITHER matches; otherwise both must. Returns True for AND. Edits `fields` in place so that
    croniter computes exactly that: croniter treats a full-range day field as '*' depending on
    whether the OTHER field merely contains a '*', which would turn "1-31" OR "1,*/3" into AND;
    a union with every day is every day, so both become '*'."""
    base = 1 if with_seconds else 0
    dom, dow = fields[base + 2], fields[base + 4]
    if dom.startswith(("*", "?")) or dow.startswith(("*", "?")):
        return True
    if "#" in dow or "w" in dom.lower() or "l" in dow.lower():
        raise CronSyntaxError(
            "'#' (nth weekday), 'W' (nearest weekday) and 'L' with a weekday (last Friday) "
            "need '*' in the other day field")
    if _expand(f"0 0 {dom} * *", False)[2] == ["*"] or _expand(f"0 0 * * {dow}", False)[4] == [
            "*"]:
        fields[base + 2] = fields[base + 4] = "*"
    return False


def _equal_range(part: str) -> str:
    """"3-3" means 3 in cron; croniter 7 deliberately reads an equal range as the whole cycle
    (every hour for "3-3"), so it is rewritten to the single value first ("3-3/2" too)."""
    match = _EQUAL.match(part)
    if match is None:
        return part
    low, high = match.group(1).lower(), match.group(2).lower()
    same = int(low) == int(high) if low.isdigit() and high.isdigit() else low == high
    return match.group(1) if same else part


def _wrapped_step(part: str, cycle: tuple[int, int, dict[str, int]]) -> str:
    """`45-15/10` steps through the wrapped sequence (45, 55, 5, 15), as docs/SCHEDULES.md says;
    croniter 7 gets these wrong (45, 55, 6), so they become the explicit list."""
    match = _STEPPED_RANGE.match(part)
    if match is None:
        return part
    low, high, names = cycle
    try:
        start, end = (_value(match.group(i), names) for i in (1, 2))
    except KeyError:
        return part  # not a value of this field: croniter's message names it
    if names is _WEEKDAYS and start == 7:
        start = 0  # Sunday either way
    if start <= end or not (low <= start <= high + 1 and low <= end <= high):
        return part
    sequence = [*range(start, high + 1), *range(low, end + 1)]
    return ",".join(str(v) for v in sequence[:: int(match.group(3)) or 1])


def _value(text: str, names: dict[str, int]) -> int:
    return int(text) if text.isdigit() else names[text.lower()]


def _clean(message: str, expression: str) -> str:
    """croniter's messages, minus tracebacks, for a user reading a 422."""
    first = message.strip().splitlines()[-1] if "Traceback" in message else message.strip()
    if "Exactly 5, 6 or 7" in first:
        return "wrong number of fields"
    return first.replace(f"[{expression}]", repr(expression)) or "invalid expression"
