"""DST and legal offset changes: each policy gives the documented UTC instants (docs/SCHEDULES.md).

Every expected instant below is written out by hand from the zone's rules, not computed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ostinato.schedules import ScheduleSpec, occurrences, parse_schedule

EPOCH = datetime(1990, 1, 1, tzinfo=UTC)


def Z(text: str) -> datetime:
    """'2025-03-09 07:00' in UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def occ(cron: str, zone: str, after: str, count: int, **policy: str) -> list[datetime]:
    spec = ScheduleSpec(cron=cron, timezone=zone, start_at=EPOCH, **policy)  # type: ignore[arg-type]
    return occurrences(parse_schedule(spec, now=EPOCH), Z(after), limit=count)


# ---- America/New_York: 2025-03-09 02:00 EST -> 03:00 EDT (07:00Z);
#      2025-11-02 02:00 EDT -> 01:00 EST (06:00Z) -------------------------------------------------

def test_new_york_daily_0230_spring_forward_shifts_to_0300_edt() -> None:
    assert occ("30 2 * * *", "America/New_York", "2025-03-08 00:00", 3) == [
        Z("2025-03-08 07:30"),  # 02:30 EST
        Z("2025-03-09 07:00"),  # 02:30 does not exist: 03:00 EDT, the first instant after the gap
        Z("2025-03-10 06:30"),  # 02:30 EDT
    ]


def test_new_york_daily_0230_spring_forward_skip() -> None:
    assert occ("30 2 * * *", "America/New_York", "2025-03-08 00:00", 2, dst_gap="skip") == [
        Z("2025-03-08 07:30"), Z("2025-03-10 06:30")]


def test_new_york_daily_0230_fall_back_is_not_ambiguous() -> None:
    # The repeated hour is 01:00-01:59; 02:30 happens once, in EST.
    assert occ("30 2 * * *", "America/New_York", "2025-11-01 00:00", 3) == [
        Z("2025-11-01 06:30"), Z("2025-11-02 07:30"), Z("2025-11-03 07:30")]


@pytest.mark.parametrize(("fold", "expected"), [
    ("auto", ["2025-11-01 05:30", "2025-11-02 05:30", "2025-11-03 06:30"]),  # auto = first
    ("first", ["2025-11-01 05:30", "2025-11-02 05:30", "2025-11-03 06:30"]),
    ("second", ["2025-11-01 05:30", "2025-11-02 06:30", "2025-11-03 06:30"]),
    ("both", ["2025-11-01 05:30", "2025-11-02 05:30", "2025-11-02 06:30", "2025-11-03 06:30"]),
])
def test_new_york_daily_0130_fall_back(fold: str, expected: list[str]) -> None:
    got = occ("30 1 * * *", "America/New_York", "2025-11-01 00:00", len(expected), dst_fold=fold)
    assert got == [Z(t) for t in expected]


@pytest.mark.parametrize(("gap", "expected"), [
    # 00:30 EST, 01:30 EST, 02:30 -> 03:00 EDT, 03:30 EDT, 04:30 EDT
    ("shift_forward", ["05:30", "06:30", "07:00", "07:30", "08:30"]),
    ("skip", ["05:30", "06:30", "07:30", "08:30", "09:30"]),
])
def test_new_york_hourly_at_30_spring_forward(gap: str, expected: list[str]) -> None:
    got = occ("30 * * * *", "America/New_York", "2025-03-09 05:00", 5, dst_gap=gap)
    assert got == [Z(f"2025-03-09 {t}") for t in expected]


@pytest.mark.parametrize("gap", ["shift_forward", "skip"])
def test_new_york_hourly_on_the_hour_never_fires_twice_at_one_instant(gap: str) -> None:
    # 02:00 shifted forward is 03:00 EDT, which is also the 03:00 slot: one run, every real hour.
    got = occ("0 * * * *", "America/New_York", "2025-03-09 04:30", 5, dst_gap=gap)
    assert got == [Z(f"2025-03-09 {h:02d}:00") for h in (5, 6, 7, 8, 9)]


@pytest.mark.parametrize(("fold", "expected"), [
    ("auto", ["04:30", "05:30", "06:30", "07:30"]),  # auto = both: every real hour
    ("both", ["04:30", "05:30", "06:30", "07:30"]),
    ("first", ["04:30", "05:30", "07:30", "08:30"]),
    ("second", ["04:30", "06:30", "07:30", "08:30"]),
])
def test_new_york_hourly_fall_back(fold: str, expected: list[str]) -> None:
    got = occ("30 * * * *", "America/New_York", "2025-11-02 04:00", 4, dst_fold=fold)
    assert got == [Z(f"2025-11-02 {t}") for t in expected]


def test_new_york_hourly_on_the_hour_fall_back_runs_every_real_hour() -> None:
    got = occ("0 * * * *", "America/New_York", "2025-11-02 03:30", 5)
    assert got == [Z(f"2025-11-02 {h:02d}:00") for h in (4, 5, 6, 7, 8)]


def test_every_fifteen_minutes_in_a_fold_interleaves_both_passes_in_order() -> None:
    got = occ("*/15 * * * *", "America/New_York", "2025-11-02 05:40", 6)
    assert got == [Z(f"2025-11-02 {t}") for t in
                   ("05:45", "06:00", "06:15", "06:30", "06:45", "07:00")]


# ---- Europe/Berlin: 2025-03-30 02:00 CET -> 03:00 CEST (01:00Z);
#      2025-10-26 03:00 CEST -> 02:00 CET (01:00Z) ----------------------------------------------

@pytest.mark.parametrize(("gap", "expected"), [
    ("shift_forward", ["2025-03-29 01:30", "2025-03-30 01:00", "2025-03-31 00:30"]),
    ("skip", ["2025-03-29 01:30", "2025-03-31 00:30", "2025-04-01 00:30"]),
])
def test_berlin_daily_0230_spring_forward(gap: str, expected: list[str]) -> None:
    got = occ("30 2 * * *", "Europe/Berlin", "2025-03-29 00:00", 3, dst_gap=gap)
    assert got == [Z(t) for t in expected]


@pytest.mark.parametrize(("fold", "expected"), [
    ("auto", ["2025-10-25 00:30", "2025-10-26 00:30", "2025-10-27 01:30"]),
    ("first", ["2025-10-25 00:30", "2025-10-26 00:30", "2025-10-27 01:30"]),
    ("second", ["2025-10-25 00:30", "2025-10-26 01:30", "2025-10-27 01:30"]),
    ("both", ["2025-10-25 00:30", "2025-10-26 00:30", "2025-10-26 01:30", "2025-10-27 01:30"]),
])
def test_berlin_daily_0230_fall_back(fold: str, expected: list[str]) -> None:
    got = occ("30 2 * * *", "Europe/Berlin", "2025-10-25 00:00", len(expected), dst_fold=fold)
    assert got == [Z(t) for t in expected]


def test_berlin_daily_0130_fall_back_is_not_ambiguous() -> None:
    # The repeated hour is 02:00-02:59; 01:30 on the 26th is CEST (23:30Z the day before).
    assert occ("30 1 * * *", "Europe/Berlin", "2025-10-25 00:00", 2) == [
        Z("2025-10-25 23:30"), Z("2025-10-27 00:30")]


def test_berlin_hourly_spring_forward_and_fall_back() -> None:
    assert occ("30 * * * *", "Europe/Berlin", "2025-03-30 00:00", 3) == [
        Z("2025-03-30 00:30"), Z("2025-03-30 01:00"), Z("2025-03-30 01:30")]
    assert occ("30 * * * *", "Europe/Berlin", "2025-03-30 00:00", 3, dst_gap="skip") == [
        Z("2025-03-30 00:30"), Z("2025-03-30 01:30"), Z("2025-03-30 02:30")]
    assert occ("0 * * * *", "Europe/Berlin", "2025-03-29 23:30", 3) == [
        Z("2025-03-30 00:00"), Z("2025-03-30 01:00"), Z("2025-03-30 02:00")]
    assert occ("30 * * * *", "Europe/Berlin", "2025-10-25 23:00", 4) == [
        Z("2025-10-25 23:30"), Z("2025-10-26 00:30"), Z("2025-10-26 01:30"),
        Z("2025-10-26 02:30")]
    assert occ("30 * * * *", "Europe/Berlin", "2025-10-25 23:00", 3, dst_fold="second") == [
        Z("2025-10-25 23:30"), Z("2025-10-26 01:30"), Z("2025-10-26 02:30")]


# ---- Australia/Lord_Howe: half-hour DST. 2025-10-05 02:00 (+10:30) -> 02:30 (+11);
#      2025-04-06 02:00 (+11) -> 01:30 (+10:30) -------------------------------------------------

def test_lord_howe_half_hour_gap() -> None:
    assert occ("15 2 * * *", "Australia/Lord_Howe", "2025-10-03 00:00", 3) == [
        Z("2025-10-03 15:45"),  # 02:15 +10:30
        Z("2025-10-04 15:30"),  # 02:15 does not exist: 02:30 +11
        Z("2025-10-05 15:15"),  # 02:15 +11
    ]
    assert occ("15 2 * * *", "Australia/Lord_Howe", "2025-10-03 00:00", 2, dst_gap="skip") == [
        Z("2025-10-03 15:45"), Z("2025-10-05 15:15")]


@pytest.mark.parametrize(("fold", "expected"), [
    ("first", ["2025-04-04 14:45", "2025-04-05 14:45", "2025-04-06 15:15"]),
    ("second", ["2025-04-04 14:45", "2025-04-05 15:15", "2025-04-06 15:15"]),
    ("both", ["2025-04-04 14:45", "2025-04-05 14:45", "2025-04-05 15:15", "2025-04-06 15:15"]),
])
def test_lord_howe_half_hour_fold(fold: str, expected: list[str]) -> None:
    got = occ("45 1 * * *", "Australia/Lord_Howe", "2025-04-04 00:00", len(expected),
              dst_fold=fold)
    assert got == [Z(t) for t in expected]


def test_lord_howe_quarter_hourly_across_the_fold_runs_every_real_quarter() -> None:
    # auto = both; the wall half hour 01:30-02:00 repeats, real time is simply continuous.
    got = occ("*/15 * * * *", "Australia/Lord_Howe", "2025-04-05 14:20", 5)
    assert got == [Z(f"2025-04-05 {t}") for t in ("14:30", "14:45", "15:00", "15:15", "15:30")]


# ---- Offsets changed by law -----------------------------------------------------------------

def test_moscow_2011_permanent_summer_time_and_2014_return() -> None:
    # 2011-03-27 02:00 +03 -> 03:00 +04, and no fall-back that autumn.
    assert occ("30 2 * * *", "Europe/Moscow", "2011-03-25 12:00", 3) == [
        Z("2011-03-25 23:30"), Z("2011-03-26 23:00"), Z("2011-03-27 22:30")]
    assert occ("30 2 * * *", "Europe/Moscow", "2011-10-28 12:00", 3) == [
        Z("2011-10-28 22:30"), Z("2011-10-29 22:30"), Z("2011-10-30 22:30")]
    # 2014-10-26 02:00 +04 -> 01:00 +03: 01:30 happens twice.
    assert occ("30 1 * * *", "Europe/Moscow", "2014-10-24 12:00", 4, dst_fold="both") == [
        Z("2014-10-24 21:30"), Z("2014-10-25 21:30"), Z("2014-10-25 22:30"),
        Z("2014-10-26 22:30")]


def test_caracas_half_hour_changes_2007_and_2016() -> None:
    # 2007-12-09 03:00 -04 -> 02:30 -04:30: 02:45 happens twice.
    assert occ("45 2 * * *", "America/Caracas", "2007-12-08 00:00", 3, dst_fold="both") == [
        Z("2007-12-08 06:45"), Z("2007-12-09 06:45"), Z("2007-12-09 07:15")]
    # 2016-05-01 02:30 -04:30 -> 03:00 -04: 02:45 does not exist.
    assert occ("45 2 * * *", "America/Caracas", "2016-04-30 00:00", 3) == [
        Z("2016-04-30 07:15"), Z("2016-05-01 07:00"), Z("2016-05-02 06:45")]


def test_apia_skipped_30_december_2011() -> None:
    # 2011-12-29 23:59:59 -10 was followed by 2011-12-31 00:00 +14 (= 2011-12-30 10:00Z).
    assert occ("0 12 * * *", "Pacific/Apia", "2011-12-28 12:00", 3) == [
        Z("2011-12-28 22:00"), Z("2011-12-29 22:00"),
        Z("2011-12-30 10:00"),  # noon of the missing day: the first instant after it
    ]
    assert occ("0 12 * * *", "Pacific/Apia", "2011-12-29 12:00", 2, dst_gap="skip") == [
        Z("2011-12-29 22:00"), Z("2011-12-30 22:00")]  # then noon of the 31st (+14)


def test_hourly_across_the_apia_day_does_not_pile_up() -> None:
    # Every wall hour of the 30th maps to the same instant under shift_forward: it runs once.
    got = occ("0 * * * *", "Pacific/Apia", "2011-12-30 08:30", 4)
    assert got == [Z("2011-12-30 09:00"), Z("2011-12-30 10:00"), Z("2011-12-30 11:00"),
                   Z("2011-12-30 12:00")]


# ---- intervals ignore DST; seconds-first cron -------------------------------------------------

def test_every_is_utc_arithmetic_across_dst() -> None:
    spec = ScheduleSpec(every="1h", timezone="America/New_York", start_at=Z("2025-03-09 05:00"))
    s = parse_schedule(spec, now=EPOCH)
    assert occurrences(s, None, limit=4) == [Z("2025-03-09 05:00") + timedelta(hours=k)
                                             for k in range(4)]


def test_seconds_first_six_field_cron_in_a_gap() -> None:
    # second=30 minute=30 hour=2: 02:30:30 does not exist on 2025-03-09 in New York.
    assert occ("30 30 2 * * *", "America/New_York", "2025-03-08 00:00", 3) == [
        Z("2025-03-08 07:30:30"), Z("2025-03-09 07:00"), Z("2025-03-10 06:30:30")]
