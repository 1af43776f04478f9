"""A schedule in words (ostinato.schedules.describe, the jobs list of issue 41): the shapes
people write read as a person would say them, every other shape falls back to the expression
itself, and no two schedules that fire differently ever read alike. Pure."""

from __future__ import annotations

import itertools
from datetime import datetime

import pytest

from ostinato.schedules.cronexpr import compile_cron
from ostinato.schedules.describe import describe, describe_cron, fallback

BERLIN = "Europe/Berlin"

WORDS = {
    "30 2 * * *": "every day at 02:30 Europe/Berlin",
    "*/15 * * * *": "every 15 minutes",
    "0,30 * * * *": "every 30 minutes",
    "* * * * *": "every minute",
    "0 * * * *": "every hour, on the hour",
    "5 * * * *": "every hour at :05",
    "0 9 * * 1-5": "at 09:00 Europe/Berlin on Monday to Friday",
    "0 9 * * MON-FRI": "at 09:00 Europe/Berlin on Monday to Friday",
    "0 9 * * 1,3,5": "at 09:00 Europe/Berlin on Monday, Wednesday and Friday",
    "0 0 * * 6,0": "at 00:00 Europe/Berlin on Saturday and Sunday",
    "0 0 * * 7": "at 00:00 Europe/Berlin on Sunday",
    "0 9,17 * * *": "every day at 09:00 and 17:00 Europe/Berlin",
    "30 */6 * * *": "every day at 00:30, 06:30, 12:30 and 18:30 Europe/Berlin",
    "0 */2 * * *": "every 2 hours from 00:00 Europe/Berlin",
    "0 9-17 * * 1-5": "every hour from 09:00 to 17:00 Europe/Berlin on Monday to Friday",
    "*/10 9-17 * * *": "every 10 minutes from 09:00 to 17:50 Europe/Berlin",
    "* 9 * * *": "every minute from 09:00 to 09:59 Europe/Berlin",
    "0 0 1 * *": "at 00:00 Europe/Berlin on day 1 of the month",
    "0 0 1,15 * *": "at 00:00 Europe/Berlin on days 1 and 15 of the month",
    "0 0 1-5 * *": "at 00:00 Europe/Berlin on days 1 to 5 of the month",
    "0 0 L * *": "at 00:00 Europe/Berlin on the last day of the month",
    "0 0 * * L5": "at 00:00 Europe/Berlin on the last Friday of the month",
    "0 0 * * 1#2": "at 00:00 Europe/Berlin on the second Monday of the month",
    "0 0 1 1 *": "at 00:00 Europe/Berlin on 1 January",
    "0 0 29 2 *": "at 00:00 Europe/Berlin on 29 February",
    "0 0 * 1,7 *": "every day at 00:00 Europe/Berlin in January and July",
    "0 12 * 1-3 *": "every day at 12:00 Europe/Berlin in January to March",
    # classic cron: both day fields restricted, either may match
    "0 0 1,15 * 1": "at 00:00 Europe/Berlin on days 1 and 15 of the month or on Monday",
    "@daily": "every day at 00:00 Europe/Berlin",
    "@hourly": "every hour, on the hour",
    "@weekly": "at 00:00 Europe/Berlin on Sunday",
    "@monthly": "at 00:00 Europe/Berlin on day 1 of the month",
    "@yearly": "at 00:00 Europe/Berlin on 1 January",
    # seconds first (6 fields)
    "*/10 * * * * *": "every 10 seconds",
    "15 30 9 * * *": "every day at 09:30:15 Europe/Berlin",
    # a wrapped stepped range, as the scheduler reads it (45, 55, 5, 15)
    "45-15/10 * * * *": "every hour at :05, :15, :45 and :55",
}


@pytest.mark.parametrize(("expression", "words"), WORDS.items())
def test_the_shapes_people_write_read_as_they_would_say_them(expression: str,
                                                             words: str) -> None:
    assert describe_cron(expression, BERLIN) == words


@pytest.mark.parametrize("expression", [
    "0 0 1W * *",  # the weekday nearest the 1st
    "0 0 */2 * 1",  # odd days that are Mondays (AND: a day field starts with '*')
    "0 0 */2 * *",  # sixteen days of the month are no list
    "*/7 * * * *",  # nine minutes an hour, not evenly across it
    "0 1,3,8,13,17,19,23 * * *",  # seven times a day
    "*/15 */2 * * *",
    "not cron",  # refused by the parser: shown as written
    "0 0 31 2 *",
])
def test_other_shapes_fall_back_to_the_expression(expression: str) -> None:
    shown = describe_cron(expression, BERLIN)
    if expression == "0 0 31 2 *":  # never fires, but it is what it says
        assert shown == "at 00:00 Europe/Berlin on 31 February"
        return
    assert shown == fallback(expression, BERLIN) == f"cron {expression} (Europe/Berlin)"


def test_intervals_one_offs_and_calendars() -> None:
    assert describe({"every": "15m"}) == "every 15 minutes"
    assert describe({"every": "1h30m"}) == "every 90 minutes"
    assert describe({"every": "90s"}) == "every 90 seconds"
    assert describe({"every": "1d"}) == "every day"
    assert describe({"every": "14d"}) == "every 2 weeks"
    assert describe({"every": "2h"}) == "every 2 hours"
    assert describe({"at": "2026-12-01T09:00:00+00:00", "timezone": BERLIN}) == \
        "once at 2026-12-01 10:00 Europe/Berlin"
    assert describe({"at": "2026-12-01T09:00:00Z"}) == "once at 2026-12-01 09:00 UTC"
    assert describe({"cron": "0 3 * * *", "timezone": "UTC", "calendar": "holidays"}) == \
        "every day at 03:00 UTC, except the dates of calendar holidays"
    assert describe({"cron": "30 2 * * *"}) == "every day at 02:30 UTC"  # no zone: UTC


MINUTES = ["*", "0", "5", "0,30", "*/15", "*/7", "10-20", "0/20", "45-15/10"]
HOURS = ["*", "9", "9,17", "9-17", "*/2", "*/5", "1,3,8,13,17,19,23"]
DAYS = ["*", "1", "1,15", "1-5", "L", "*/2", "1W"]
MONTHS = ["*", "1,7", "1-3"]
WEEKDAYS = ["*", "1", "1-5", "0,6", "L5", "1#2", "7"]


def _fires(expression: str) -> tuple[datetime, ...]:
    """The first 24 wall times the scheduler's own parser would fire at, from a fixed start."""
    walls = compile_cron(expression).walls_after(datetime(2026, 1, 1))  # noqa: DTZ001 (wall)
    return tuple(itertools.islice(walls, 24))


def test_no_two_schedules_that_fire_differently_read_alike() -> None:
    """Every combination of the field shapes above: the words are the expression (fallback) or
    words no schedule with other firing times reads as."""
    seen: dict[str, tuple[str, tuple[datetime, ...]]] = {}
    words = 0
    for m, h, dom, mon, dow in itertools.product(MINUTES, HOURS, DAYS, MONTHS, WEEKDAYS):
        if (dow in ("L5", "1#2") and dom != "*") or (dom == "1W" and dow != "*"):
            continue  # refused by the parser (cronexpr: '#', 'W', 'L' need '*' opposite)
        expression = f"{m} {h} {dom} {mon} {dow}"
        text = describe_cron(expression, BERLIN)
        assert text and "None" not in text and "[" not in text, expression
        if text == fallback(expression, BERLIN):
            continue
        words += 1
        fires = _fires(expression)
        if text in seen:
            other, other_fires = seen[text]
            assert other_fires == fires, f"{expression!r} and {other!r} both read {text!r}"
        else:
            seen[text] = (expression, fires)
    assert words > 800  # most shapes are put into words
