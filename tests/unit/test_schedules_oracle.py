"""Cron evaluation checked against an independent brute-force oracle.

The oracle does not use croniter nor Ostinato's mapping code: it parses the expression with its
own tiny matcher, steps minute by minute (or second by second) through LOCAL WALL TIME, and maps
each matching wall time to UTC with zoneinfo directly (a wall time exists when it round-trips;
two valid readings are a fold; none is a gap, whose first valid instant after it is found by
walking forward). Windows are biased to the zones' transition days.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, assume, given, settings

from ostinato.domain.errors import InvalidInput
from ostinato.schedules import ScheduleSpec, occurrences, parse_schedule
from ostinato.schedules.occurrences import iter_backward
from ostinato.schedules.zones import load_zone
from tests.helpers.schedules import EXAMPLES, POLICY, RANGES, ZONES, cron_exprs, windows

# ---- expression generator -------------------------------------------------------------------

# ---- the oracle ------------------------------------------------------------------------------

def _parse_field(text: str, lo: int, hi: int) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        rng, _, step = part.partition("/")
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            a, b = (int(x) for x in rng.split("-"))
        else:
            a = b = int(rng)
            if step:
                b = hi
        values.update(range(a, b + 1, int(step) if step else 1))
    return values


class Matcher:
    def __init__(self, expr: str) -> None:
        parts = expr.split()
        if len(parts) == 5:
            parts.insert(0, "0")
        names = ["second", "minute", "hour", "dom", "month", "dow"]
        self.sets = {n: _parse_field(p, *RANGES[n]) for n, p in zip(names, parts, strict=True)}
        # classic cron: a day field starting with '*' (as '*/2') does not restrict the day
        self.dom_star, self.dow_star = parts[3].startswith("*"), parts[5].startswith("*")

    def matches(self, w: datetime) -> bool:
        s = self.sets
        if w.second not in s["second"] or w.minute not in s["minute"]:
            return False
        if w.hour not in s["hour"] or w.month not in s["month"]:
            return False
        dom_ok, dow_ok = w.day in s["dom"], (w.isoweekday() % 7) in s["dow"]
        if not self.dom_star and not self.dow_star:
            return dom_ok or dow_ok  # cron's rule: both restricted -> either matches
        return dom_ok and dow_ok


def _valid(tz: object, w: datetime) -> list[datetime]:
    found = []
    for fold in (0, 1):
        u = w.replace(tzinfo=tz, fold=fold).astimezone(UTC)  # type: ignore[arg-type]
        if u.astimezone(tz).replace(tzinfo=None) == w and u not in found:  # type: ignore[arg-type]
            found.append(u)
    return sorted(found)


def oracle(expr: str, zone: str, gap: str, fold: str, start: datetime, end: datetime,
           step: timedelta, margin: timedelta = timedelta(hours=28)) -> list[datetime]:
    """Instants in (start, end] by brute force over local wall time. `margin` must exceed the
    largest clock jump in the zone near the window (28 h covers any zone)."""
    tz, m = load_zone(zone), Matcher(expr)
    if fold == "auto":
        fold = "first" if len(m.sets["hour"]) == 1 else "both"
    w = (start - margin).astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)
    stop = (end + margin).astimezone(tz).replace(tzinfo=None)
    out: set[datetime] = set()
    while w <= stop:
        if m.matches(w):
            valid = _valid(tz, w)
            if not valid and gap == "shift_forward":
                probe = w.replace(second=0)  # clocks change on whole minutes
                while not (valid := _valid(tz, probe)):
                    probe += timedelta(minutes=1)
                out.add(valid[0])
            elif len(valid) == 1:
                out.add(valid[0])
            elif len(valid) == 2:
                out.update({"first": valid[:1], "second": valid[1:], "both": valid}[fold])
        w += step
    return sorted(u for u in out if start < u <= end)


def _schedule(expr: str, zone: str, gap: str, fold: str, start: datetime):  # type: ignore[no-untyped-def]
    spec = ScheduleSpec(cron=expr, timezone=zone, dst_gap=gap, dst_fold=fold,  # type: ignore[arg-type]
                        start_at=datetime(1990, 1, 1, tzinfo=UTC))
    try:
        return parse_schedule(spec, now=start)
    except InvalidInput as exc:
        assert "never fires" in exc.detail, exc.detail
        assume(False)


SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@SETTINGS
@given(expr=cron_exprs(), window=windows(max_hours=50), policy=POLICY)
def test_cron_matches_brute_force_oracle(expr: str, window: tuple[str, datetime, datetime],
                                         policy: tuple[str, str]) -> None:
    zone, start, end = window
    gap, fold = policy
    s = _schedule(expr, zone, gap, fold, start)
    got = occurrences(s, start, until=end, limit=100_000)
    assert got == oracle(expr, zone, gap, fold, start, end, timedelta(minutes=1)), (expr, zone)
    assert all(u.tzinfo is UTC for u in got)
    backwards = [u for u in iter_backward(s, end, inclusive=True, floor=start) if u > start]
    assert backwards[::-1] == got


@settings(max_examples=max(10, EXAMPLES // 5), deadline=None,
          suppress_health_check=list(HealthCheck))


@given(expr=cron_exprs(seconds=True), policy=POLICY,
       window=windows(max_hours=3, zones=tuple(z for z in ZONES if z != "Pacific/Apia")))


def test_seconds_first_cron_matches_oracle(expr: str, window: tuple[str, datetime, datetime],
                                           policy: tuple[str, str]) -> None:
    zone, start, end = window
    gap, fold = policy
    s = _schedule(expr, zone, gap, fold, start)
    got = occurrences(s, start, until=end, limit=100_000)
    # second by second: a 4-hour margin (the largest jump outside Apia's day is 2 h, Troll's)
    assert got == oracle(expr, zone, gap, fold, start, end, timedelta(seconds=1),
                         margin=timedelta(hours=4)), (expr, zone)


def test_oracle_itself_knows_the_new_york_gap_and_fold() -> None:
    """The oracle is only useful if it is right: pin it on a hand-checked case."""
    start = datetime(2025, 3, 9, 5, tzinfo=UTC)
    assert oracle("30 * * * *", "America/New_York", "shift_forward", "auto", start,
                  start + timedelta(hours=3), timedelta(minutes=1)) == [
        datetime(2025, 3, 9, 5, 30, tzinfo=UTC), datetime(2025, 3, 9, 6, 30, tzinfo=UTC),
        datetime(2025, 3, 9, 7, 0, tzinfo=UTC), datetime(2025, 3, 9, 7, 30, tzinfo=UTC)]
    start = datetime(2025, 11, 2, 4, tzinfo=UTC)
    assert oracle("30 1 * * *", "America/New_York", "skip", "both", start,
                  start + timedelta(hours=3), timedelta(minutes=1)) == [
        datetime(2025, 11, 2, 5, 30, tzinfo=UTC), datetime(2025, 11, 2, 6, 30, tzinfo=UTC)]
