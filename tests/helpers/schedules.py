"""Generators of cron expressions, time zones and windows around DST transitions, shared by the
schedule oracle and the ledger's property tests."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from functools import cache

from hypothesis import strategies as st

from ostinato.schedules.zones import load_zone

ZONES = [
    "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Australia/Sydney",
    "America/Sao_Paulo", "America/Havana", "Pacific/Chatham", "Europe/London", "Europe/Dublin",
    "Asia/Kolkata", "UTC", "America/St_Johns", "Africa/Casablanca", "America/Santiago",
    "Asia/Tehran", "Europe/Moscow", "America/Caracas", "Pacific/Apia", "Antarctica/Troll",
]
RANGES = {"second": (0, 59), "minute": (0, 59), "hour": (0, 23), "dom": (1, 31),
          "month": (1, 12), "dow": (0, 6)}


@st.composite
def _element(draw: st.DrawFn, lo: int, hi: int) -> str:
    kind = draw(st.sampled_from(["value", "value", "range", "step", "range_step"]))
    a = draw(st.integers(lo, hi))
    if kind == "value":
        return str(a)
    b = draw(st.integers(a, hi))
    if kind == "range":
        return f"{a}-{b}"
    n = draw(st.integers(1, max(1, (hi - lo) // 2)))
    return f"*/{n}" if kind == "step" else f"{a}-{b}/{n}"


@st.composite
def _field(draw: st.DrawFn, name: str) -> str:
    lo, hi = RANGES[name]
    shape = draw(st.sampled_from(["star", "one", "one", "list"]))
    if shape == "star":
        return "*"
    if shape == "one":
        return draw(_element(lo, hi))
    return ",".join(draw(st.lists(_element(lo, hi), min_size=2, max_size=3)))


@st.composite
def cron_exprs(draw: st.DrawFn, seconds: bool = False) -> str:
    names = ["minute", "hour", "dom", "month", "dow"]
    fields = [draw(_field(n)) for n in names]
    if draw(st.booleans()):  # daily-ish schedules: one hour, the DST `auto` -> first case
        fields[1] = str(draw(st.integers(0, 23)))
    if draw(st.integers(0, 3)) > 0:  # keep most expressions firing near the window
        fields[2], fields[3] = "*", "*"
    if seconds:
        fields.insert(0, draw(_field("second")))
    return " ".join(fields)


@cache
def transitions(zone: str, year: int) -> tuple[datetime, ...]:
    tz = load_zone(zone)
    t = datetime(year, 1, 1, tzinfo=UTC)
    found, prev = [], t.astimezone(tz).utcoffset()
    while t.year == year:
        t2 = t + timedelta(hours=1)
        off = t2.astimezone(tz).utcoffset()
        if off != prev:
            found.append(t2)
            prev = off
        t = t2
    return tuple(found)


@st.composite
def windows(draw: st.DrawFn, max_hours: int,
            zones: tuple[str, ...] = tuple(ZONES)) -> tuple[str, datetime, datetime]:
    zone = draw(st.sampled_from(zones))
    year = draw(st.integers(2000, 2040))
    near = transitions(zone, year)
    if near and draw(st.integers(0, 4)) > 0:
        center = draw(st.sampled_from(near))
    else:
        center = datetime(year, 1, 1, tzinfo=UTC) + timedelta(days=draw(st.integers(0, 364)))
    start = center - timedelta(minutes=draw(st.integers(0, max_hours * 60)))
    length = timedelta(minutes=draw(st.integers(60, max_hours * 60)))
    return zone, start, start + length


POLICY = st.tuples(st.sampled_from(["shift_forward", "skip"]),
                   st.sampled_from(["auto", "first", "second", "both"]))
# OSTINATO_ORACLE_EXAMPLES=3000 for a deeper search (about a minute per 1000 examples).
EXAMPLES = int(os.environ.get("OSTINATO_ORACLE_EXAMPLES", "150"))
