"""Misfire handling: the scheduler was down (or the job paused) over N slots, then `plan_due` runs
at restart with the stored next slot and the clock's now. No sleeping: instants are given."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ostinato.domain.errors import InvalidInput
from ostinato.schedules import (
    Plan,
    Schedule,
    ScheduleSpec,
    SkipRange,
    expected_slots,
    occurrences,
    parse_duration,
    parse_schedule,
    plan_due,
)

T0 = datetime(2026, 1, 5, tzinfo=UTC)


def H(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def hourly(**options: object) -> Schedule:
    return parse_schedule(ScheduleSpec(cron="0 * * * *", start_at=T0, **options), now=T0)  # type: ignore[arg-type]


def check_accounting(s: Schedule, next_slot: datetime, now: datetime, plan: Plan) -> None:
    """Every due slot is in exactly one of fire or a SkipRange; ranges are contiguous."""
    due = occurrences(s, next_slot - timedelta(microseconds=1), until=now, limit=10**7)
    covered: list[datetime] = list(plan.fire)
    for r in plan.skipped:
        inside = [u for u in due if r.first <= u <= r.last]
        assert r.count is None or r.count == len(inside), r
        covered.extend(inside)
    assert sorted(covered) == due
    assert len(set(covered)) == len(covered)
    assert plan.fire == sorted(plan.fire)


# ---- an hourly job, the scheduler down from 00:30 to 05:10: slots 01:00 .. 05:00 are due ------

def test_run_once_fires_the_latest_and_records_the_rest() -> None:
    s = hourly()
    plan = plan_due(s, H(1), H(5 + 10 / 60))
    assert plan == Plan(fire=[H(5)], skipped=[SkipRange(H(1), H(4), 4, "misfire_run_once")],
                        next_slot=H(6))
    check_accounting(s, H(1), H(5 + 10 / 60), plan)


def test_catch_up_fires_every_missed_slot_oldest_first() -> None:
    s = hourly(misfire="catch_up")
    plan = plan_due(s, H(1), H(5 + 10 / 60))
    assert plan == Plan(fire=[H(1), H(2), H(3), H(4), H(5)], skipped=[], next_slot=H(6))


def test_catch_up_is_bounded_by_count() -> None:
    s = hourly(misfire="catch_up", catch_up_max=3)
    plan = plan_due(s, H(1), H(5 + 10 / 60))
    assert plan.fire == [H(1), H(2), H(3)]
    assert plan.skipped == [SkipRange(H(4), H(5), 2, "catch_up_limit")]


def test_skip_records_every_missed_slot() -> None:
    s = hourly(misfire="skip")
    plan = plan_due(s, H(1), H(5 + 10 / 60))
    assert plan == Plan(fire=[], skipped=[SkipRange(H(1), H(5), 5, "misfire_skip")],
                        next_slot=H(6))


def test_skip_still_fires_a_latest_slot_within_grace() -> None:
    s = hourly(misfire="skip")
    now = H(5) + timedelta(seconds=30)
    plan = plan_due(s, H(1), now)
    assert plan.fire == [H(5)]
    assert plan.skipped == [SkipRange(H(1), H(4), 4, "misfire_skip")]


@pytest.mark.parametrize("policy", ["run_once", "catch_up", "skip"])
def test_one_slot_on_time_fires_under_every_policy(policy: str) -> None:
    s = hourly(misfire=policy)
    assert plan_due(s, H(5), H(5) + timedelta(seconds=59)) == Plan([H(5)], [], H(6))


def test_one_slot_late_beyond_grace() -> None:
    now = H(5) + timedelta(minutes=5)
    assert plan_due(hourly(), H(5), now).fire == [H(5)]
    assert plan_due(hourly(misfire="skip"), H(5), now).skipped == [
        SkipRange(H(5), H(5), 1, "misfire_skip")]
    assert plan_due(hourly(misfire_grace="10m", misfire="skip"), H(5), now).fire == [H(5)]


def test_nothing_due_yet() -> None:
    assert plan_due(hourly(), H(6), H(5.5)) == Plan([], [], H(6))


def test_policy_argument_overrides_the_schedule_for_resume() -> None:
    s = hourly(misfire="catch_up")
    assert plan_due(s, H(1), H(5.2), policy="skip").fire == []
    with pytest.raises(InvalidInput) as err:
        plan_due(s, H(1), H(5.2), policy="later")
    assert err.value.errors[0]["field"] == "misfire"


# ---- age bound -------------------------------------------------------------------------------

def test_max_lateness_run_once() -> None:
    s = hourly(max_lateness="2h")
    plan = plan_due(s, H(1), H(5 + 10 / 60))  # cutoff 03:10: 01, 02, 03 are too late
    assert plan.fire == [H(5)]
    assert plan.skipped == [SkipRange(H(1), H(3), 3, "too_late"),
                            SkipRange(H(4), H(4), 1, "misfire_run_once")]


def test_max_lateness_catch_up() -> None:
    s = hourly(max_lateness="2h", misfire="catch_up")
    plan = plan_due(s, H(1), H(5 + 10 / 60))
    assert plan.fire == [H(4), H(5)]
    assert plan.skipped == [SkipRange(H(1), H(3), 3, "too_late")]


def test_everything_too_late_fires_nothing() -> None:
    s = hourly(max_lateness="20m")
    plan = plan_due(s, H(1), H(5.5))
    assert plan == Plan([], [SkipRange(H(1), H(5), 5, "too_late")], H(6))


# ---- calendars: exclusion dates are LOCAL dates ----------------------------------------------

def test_calendar_dates_are_skipped_and_recorded() -> None:
    s = parse_schedule(ScheduleSpec(cron="0 9 * * *", timezone="Europe/Berlin",
                                    misfire="catch_up", calendar="de-holidays",
                                    start_at=T0), now=T0)
    holidays = frozenset({date(2026, 12, 25), date(2026, 12, 26)})
    day = datetime(2026, 12, 24, 8, tzinfo=UTC)  # 09:00 CET
    now = day + timedelta(days=3, seconds=20)
    plan = plan_due(s, day, now, excluded_dates=holidays)
    assert plan.fire == [day, day + timedelta(days=3)]
    assert plan.skipped == [SkipRange(day + timedelta(days=1), day + timedelta(days=2), 2,
                                      "calendar")]
    check_accounting(s, day, now, plan)
    once = plan_due(s, day, now, excluded_dates=holidays, policy="run_once")
    assert once.fire == [day + timedelta(days=3)]
    assert once.skipped == [SkipRange(day, day, 1, "misfire_run_once"),
                            SkipRange(day + timedelta(days=1), day + timedelta(days=2), 2,
                                      "calendar")]


def test_calendar_on_time_slot_is_skipped() -> None:
    s = parse_schedule(ScheduleSpec(cron="0 9 * * *", timezone="Europe/Berlin", start_at=T0),
                       now=T0)
    slot = datetime(2026, 12, 25, 8, tzinfo=UTC)
    plan = plan_due(s, slot, slot + timedelta(seconds=1),
                    excluded_dates=frozenset({date(2026, 12, 25)}))
    assert plan == Plan([], [SkipRange(slot, slot, 1, "calendar")], slot + timedelta(days=1))


def test_calendar_uses_the_schedule_zone_date() -> None:
    # 00:30 in Berlin on 25 December is 23:30Z on the 24th: the 25th is what is excluded.
    s = parse_schedule(ScheduleSpec(cron="30 0 * * *", timezone="Europe/Berlin", start_at=T0),
                       now=T0)
    slot = datetime(2026, 12, 24, 23, 30, tzinfo=UTC)
    plan = plan_due(s, slot, slot, excluded_dates=frozenset({date(2026, 12, 25)}))
    assert plan.skipped == [SkipRange(slot, slot, 1, "calendar")]
    assert plan_due(s, slot, slot, excluded_dates=frozenset({date(2026, 12, 24)})).fire == [slot]


# ---- intervals, one-offs, end bounds ---------------------------------------------------------

def test_every_interval_down_for_an_hour() -> None:
    s = parse_schedule(ScheduleSpec(every="15m", start_at=T0 + timedelta(minutes=7)), now=T0)
    m = lambda minutes: T0 + timedelta(minutes=minutes)  # noqa: E731
    plan = plan_due(s, m(22), m(90))
    assert plan == Plan([m(82)], [SkipRange(m(22), m(67), 4, "misfire_run_once")], m(97))


def test_one_off_in_the_past_fires_once() -> None:
    at = T0 - timedelta(days=3)
    s = parse_schedule(ScheduleSpec(at=at), now=T0)
    assert plan_due(s, at, T0) == Plan([at], [], None)
    assert plan_due(s, at, T0, policy="catch_up") == Plan([at], [], None)
    assert plan_due(s, at, T0, policy="skip") == Plan([], [SkipRange(at, at, 1, "misfire_skip")],
                                                      None)
    late = parse_schedule(ScheduleSpec(at=at, max_lateness="1d"), now=T0)
    assert plan_due(late, at, T0).skipped == [SkipRange(at, at, 1, "too_late")]


def test_no_schedule_means_due_now() -> None:
    s = parse_schedule(None, now=T0)
    assert plan_due(s, T0, T0) == Plan([T0], [], None)


def test_end_at_bounds_due_slots_and_ends_the_schedule() -> None:
    s = hourly(end_at=H(3))
    plan = plan_due(s, H(1), H(5.2))
    assert plan == Plan([H(3)], [SkipRange(H(1), H(2), 2, "misfire_run_once")], None)


def test_fall_back_hour_is_caught_up_twice_when_both() -> None:
    s = parse_schedule(ScheduleSpec(cron="30 * * * *", timezone="America/New_York",
                                    misfire="catch_up", start_at=T0 - timedelta(days=365)),
                       now=T0)
    first = datetime(2025, 11, 2, 4, 30, tzinfo=UTC)
    plan = plan_due(s, first, datetime(2025, 11, 2, 7, 31, tzinfo=UTC))
    assert plan.fire == [first + timedelta(hours=k) for k in range(4)]  # 00:30, 01:30 x2, 02:30


# ---- the flood that cannot happen ------------------------------------------------------------

def test_two_weeks_down_every_second_is_bounded_with_exact_counts() -> None:
    s = parse_schedule(ScheduleSpec(every="1s", misfire="catch_up", start_at=T0), now=T0)
    now = T0 + timedelta(days=14)
    plan = plan_due(s, T0, now)
    assert len(plan.fire) == 10
    total = 14 * 86400 + 1
    assert sum(r.count or 0 for r in plan.skipped) + len(plan.fire) == total
    assert plan.skipped[0].reason == "too_late"
    assert plan.skipped[0].first == T0
    assert plan.skipped[-1] == SkipRange(plan.fire[-1] + timedelta(seconds=1), now, 9990,
                                         "catch_up_limit")
    assert plan.next_slot == now + timedelta(seconds=1)


def test_two_weeks_down_every_second_cron_is_bounded() -> None:
    s = parse_schedule(ScheduleSpec(cron="* * * * * *", start_at=T0), now=T0)
    now = T0 + timedelta(days=14)
    plan = plan_due(s, T0, now)
    assert plan.fire == [now]
    assert plan.skipped[0] == SkipRange(T0, now - timedelta(seconds=10_000), None, "too_late")
    assert plan.skipped[1] == SkipRange(now - timedelta(seconds=9_999), now - timedelta(seconds=1),
                                        9_999, "misfire_run_once")


def test_enumeration_bound_merges_with_too_late_slots() -> None:
    s = hourly(max_lateness="3h")
    plan = plan_due(s, H(1), H(10.5), max_enumerated=5)  # slots 06..10 enumerated
    assert plan.skipped == [SkipRange(H(1), H(7), None, "too_late"),
                            SkipRange(H(8), H(9), 2, "misfire_run_once")]
    assert plan.fire == [H(10)]


# ---- what the reconciler expects -------------------------------------------------------------

def test_expected_slots_leave_out_paused_intervals() -> None:
    s = hourly()
    assert expected_slots(s, H(0), H(6)) == [H(k) for k in range(6)]
    assert expected_slots(s, H(0), H(10), paused=[(H(2), H(4)), (H(7), None)]) == [
        H(0), H(1), H(4), H(5), H(6)]
    assert expected_slots(s, H(0), H(10), limit=3) == [H(0), H(1), H(2)]
    assert expected_slots(hourly(end_at=H(2)), H(0), H(10)) == [H(0), H(1), H(2)]


# ---- the accounting invariant, for random schedules, outages and options ----------------------

@settings(max_examples=120, deadline=None)
@given(
    kind=st.sampled_from(["*/7 * * * *", "30 */3 * * *", "0 1,2,3 * * *", "15m", "50m"]),
    zone=st.sampled_from(["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"]),
    down_minutes=st.integers(0, 3000), start_day=st.integers(0, 364),
    policy=st.sampled_from(["run_once", "catch_up", "skip"]),
    lateness=st.sampled_from([None, "90m", "10h"]), catch_up_max=st.integers(1, 20),
    holidays=st.sets(st.integers(0, 3), max_size=2), bound=st.sampled_from([3, 50, 10_000]),
)
def test_every_due_slot_is_fired_or_skipped_exactly_once(
        kind: str, zone: str, down_minutes: int, start_day: int, policy: str,
        lateness: str | None, catch_up_max: int, holidays: set[int], bound: int) -> None:
    origin = datetime(2025, 1, 1, tzinfo=UTC)
    shape = {"cron": kind} if " " in kind else {"every": kind}
    s = parse_schedule(ScheduleSpec(**shape, timezone=zone, start_at=origin,  # type: ignore[arg-type]
                                    misfire=policy, max_lateness=lateness,  # type: ignore[arg-type]
                                    catch_up_max=catch_up_max), now=origin)
    first = occurrences(s, origin + timedelta(days=start_day), limit=1)[0]
    now = first + timedelta(minutes=down_minutes)
    local = first.astimezone(s.tz).date()
    excluded = frozenset(local + timedelta(days=d) for d in holidays)
    plan = plan_due(s, first, now, excluded_dates=excluded, max_enumerated=bound)
    check_accounting(s, first, now, plan)
    assert len(plan.fire) <= (catch_up_max if policy == "catch_up" else 1)
    assert all(u.astimezone(s.tz).date() not in excluded for u in plan.fire)
    assert plan.next_slot == occurrences(s, now, limit=1)[0]
    if lateness is not None:
        assert all(now - u <= parse_duration(lateness) for u in plan.fire)


_instants = st.integers(min_value=-200, max_value=200).map(lambda m: T0 + timedelta(minutes=m))


@settings(max_examples=600, deadline=None)
@given(at=_instants, start_shift=st.integers(min_value=-60, max_value=60),
       end=st.none() | _instants, next_slot=_instants, now=_instants,
       policy=st.sampled_from(("run_once", "catch_up", "skip")),
       grace=st.integers(min_value=0, max_value=90),
       lateness=st.none() | st.integers(min_value=0, max_value=120),
       excluded=st.booleans())
def test_a_one_off_plan_is_what_enumerating_its_slots_plans(
        at: datetime, start_shift: int, end: datetime | None, next_slot: datetime,
        now: datetime, policy: str, grace: int, lateness: int | None, excluded: bool) -> None:
    """`plan_one_off` (the scheduler's fast path for one-off jobs) plans exactly what the
    general enumeration plans, over the slot's place against next_slot, now and end_at, the
    misfire policy, its grace and lateness bound, and a calendar excluding its date."""
    from ostinato.schedules.misfire import plan_enumerated, plan_one_off

    if next_slot > now:
        return  # plan_due answers that case before either
    s = Schedule(kind="at", tz_name="Europe/Paris", start_at=at + timedelta(minutes=start_shift),
                 at=at, end_at=end, misfire_grace=timedelta(minutes=grace),
                 max_lateness=None if lateness is None else timedelta(minutes=lateness))
    dates = frozenset({at.astimezone(s.tz).date()}) if excluded else frozenset()
    fast = plan_one_off(s, next_slot, now, dates, policy)
    general = plan_enumerated(s, next_slot, now, dates, policy, 10_000)
    assert (fast.fire, fast.skipped, fast.next_slot) == (general.fire, general.skipped,
                                                         general.next_slot)
