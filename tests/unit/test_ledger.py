"""The expected-occurrence ledger (`ostinato.ledger`): its independent enumeration (cronsim and
its own DST mapping) agrees with the scheduler's (croniter and `ostinato.schedules`) over every
DST case of the oracle tests and over random schedules; and its classification of each slot.

The two are compared slot for slot over the same window; the scheduler's code appears only
here, never in the ledger (the import-linter contract)."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ostinato import ledger
from ostinato.domain.errors import InvalidInput
from ostinato.ledger import Context, ExpectedSlot, RunFact, SkipFact, classify
from ostinato.schedules import ScheduleSpec, parse_schedule, to_document
from ostinato.schedules import expected_slots as scheduler_slots
from ostinato.schedules.cronexpr import CronSyntaxError
from ostinato.schedules.cronexpr import compile_cron as compile_scheduler_cron
from tests.helpers.schedules import EXAMPLES, POLICY, ZONES, cron_exprs, windows

EPOCH = datetime(1990, 1, 1, tzinfo=UTC)


def Z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def both(spec: ScheduleSpec, start: datetime, end: datetime) -> tuple[list[datetime],
                                                                      list[datetime]]:
    """(scheduler's, ledger's) slots in [start, end) of the schedule as it would be stored."""
    s = parse_schedule(spec, now=min(start, spec.start_at or start))
    theirs = scheduler_slots(s, start, end, limit=1_000_000)
    mine = list(ledger.slots(ledger.read_document(to_document(s)), start, end))
    return theirs, mine


def cron(expr: str, zone: str = "UTC", **policy: object) -> ScheduleSpec:
    return ScheduleSpec(cron=expr, timezone=zone, start_at=EPOCH, **policy)  # type: ignore[arg-type]


# ---- every DST case of tests/unit/test_schedules_dst.py (and the docs' worked examples) -----

DST_CASES = [
    ("30 2 * * *", "America/New_York", "2025-03-08 00:00", {}),
    ("30 2 * * *", "America/New_York", "2025-03-08 00:00", {"dst_gap": "skip"}),
    ("30 2 * * *", "America/New_York", "2025-11-01 00:00", {}),
    *[("30 1 * * *", "America/New_York", "2025-11-01 00:00", {"dst_fold": f})
      for f in ("auto", "first", "second", "both")],
    *[("30 * * * *", "America/New_York", "2025-03-09 05:00", {"dst_gap": g})
      for g in ("shift_forward", "skip")],
    *[("0 * * * *", "America/New_York", "2025-03-09 04:30", {"dst_gap": g})
      for g in ("shift_forward", "skip")],
    *[("30 * * * *", "America/New_York", "2025-11-02 04:00", {"dst_fold": f})
      for f in ("auto", "both", "first", "second")],
    ("0 * * * *", "America/New_York", "2025-11-02 03:30", {}),
    ("*/15 * * * *", "America/New_York", "2025-11-02 05:40", {}),
    *[("30 2 * * *", "Europe/Berlin", "2025-03-29 00:00", {"dst_gap": g})
      for g in ("shift_forward", "skip")],
    *[("30 2 * * *", "Europe/Berlin", "2025-10-25 00:00", {"dst_fold": f})
      for f in ("auto", "first", "second", "both")],
    ("30 1 * * *", "Europe/Berlin", "2025-10-25 00:00", {}),
    ("30 * * * *", "Europe/Berlin", "2025-03-30 00:00", {}),
    ("30 * * * *", "Europe/Berlin", "2025-03-30 00:00", {"dst_gap": "skip"}),
    ("0 * * * *", "Europe/Berlin", "2025-03-29 23:30", {}),
    ("30 * * * *", "Europe/Berlin", "2025-10-25 23:00", {}),
    ("30 * * * *", "Europe/Berlin", "2025-10-25 23:00", {"dst_fold": "second"}),
    ("30 2 * * *", "Europe/Berlin", "2026-03-28 00:00", {}),
    ("30 2 * * *", "Europe/Berlin", "2026-10-24 00:00", {"dst_fold": "both"}),
    ("15 2 * * *", "Australia/Lord_Howe", "2025-10-03 00:00", {}),
    ("15 2 * * *", "Australia/Lord_Howe", "2025-10-03 00:00", {"dst_gap": "skip"}),
    *[("45 1 * * *", "Australia/Lord_Howe", "2025-04-04 00:00", {"dst_fold": f})
      for f in ("first", "second", "both")],
    ("*/15 * * * *", "Australia/Lord_Howe", "2025-04-05 14:20", {}),
    ("30 2 * * *", "Europe/Moscow", "2011-03-25 12:00", {}),
    ("30 2 * * *", "Europe/Moscow", "2011-10-28 12:00", {}),
    ("30 1 * * *", "Europe/Moscow", "2014-10-24 12:00", {"dst_fold": "both"}),
    ("45 2 * * *", "America/Caracas", "2007-12-08 00:00", {"dst_fold": "both"}),
    ("45 2 * * *", "America/Caracas", "2016-04-30 00:00", {}),
    ("0 12 * * *", "Pacific/Apia", "2011-12-28 12:00", {}),
    ("0 12 * * *", "Pacific/Apia", "2011-12-28 12:00", {"dst_gap": "skip"}),
]


@pytest.mark.parametrize(("expr", "zone", "after", "policy"), DST_CASES)
def test_the_two_implementations_agree_on_every_dst_case(expr: str, zone: str, after: str,
                                                         policy: dict[str, str]) -> None:
    start = Z(after)
    theirs, mine = both(cron(expr, zone, **policy), start, start + timedelta(days=4))
    assert theirs, (expr, zone)
    assert mine == theirs, (expr, zone, policy)


def test_the_ledger_alone_gives_the_documented_instants() -> None:
    """Pinned by hand (docs/SCHEDULES.md), not by comparison: the ledger is right on its own."""
    def mine(spec: ScheduleSpec, start: str, hours: int) -> list[datetime]:
        s = parse_schedule(spec, now=EPOCH)
        return list(ledger.slots(ledger.read_document(to_document(s)), Z(start),
                                 Z(start) + timedelta(hours=hours)))
    assert mine(cron("30 2 * * *", "America/New_York"), "2025-03-08 00:00", 72) == [
        Z("2025-03-08 07:30"), Z("2025-03-09 07:00"), Z("2025-03-10 06:30")]
    assert mine(cron("30 * * * *", "America/New_York"), "2025-11-02 04:00", 4) == [
        Z("2025-11-02 04:30"), Z("2025-11-02 05:30"), Z("2025-11-02 06:30"),
        Z("2025-11-02 07:30")]
    assert mine(cron("0 * * * *", "America/New_York"), "2025-03-09 04:30", 5) == [
        Z(f"2025-03-09 {h:02d}:00") for h in (5, 6, 7, 8, 9)]  # never twice at one instant
    assert mine(cron("0 12 * * *", "Pacific/Apia"), "2011-12-28 12:00", 60) == [
        Z("2011-12-28 22:00"), Z("2011-12-29 22:00"), Z("2011-12-30 10:00"),
        Z("2011-12-30 22:00")]
    assert mine(cron("45 1 * * *", "Australia/Lord_Howe", dst_fold="both"),
                "2025-04-05 00:00", 24) == [Z("2025-04-05 14:45"), Z("2025-04-05 15:15")]


# ---- random schedules ------------------------------------------------------------------------

SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _parsed(spec: ScheduleSpec, start: datetime) -> None:
    try:
        parse_schedule(spec, now=start)
    except InvalidInput as exc:
        assume(False)  # e.g. never fires with dst_gap=skip
        raise AssertionError(exc.detail) from exc


@SETTINGS
@given(expr=cron_exprs(), window=windows(max_hours=50), policy=POLICY)
def test_random_cron_schedules_agree_around_transitions(
        expr: str, window: tuple[str, datetime, datetime], policy: tuple[str, str]) -> None:
    zone, start, end = window
    spec = cron(expr, zone, dst_gap=policy[0], dst_fold=policy[1])
    _parsed(spec, start)
    theirs, mine = both(spec, start, end)
    assert mine == theirs, (expr, zone, policy)


@settings(max_examples=max(10, EXAMPLES // 5), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(expr=cron_exprs(seconds=True), policy=POLICY,
       window=windows(max_hours=3, zones=tuple(z for z in ZONES if z != "Pacific/Apia")))
def test_random_seconds_first_schedules_agree(
        expr: str, window: tuple[str, datetime, datetime], policy: tuple[str, str]) -> None:
    zone, start, end = window
    spec = cron(expr, zone, dst_gap=policy[0], dst_fold=policy[1])
    _parsed(spec, start)
    theirs, mine = both(spec, start, end)
    assert mine == theirs, (expr, zone, policy)


DOM = st.sampled_from(["*", "?", "L", "1", "15", "1-15", "*/2", "10-20/3", "15W", "1W", "31W",
                       "28-3", "3-3", "1,15,31"])
DOW = st.sampled_from(["*", "?", "MON", "MON-FRI", "FRI-MON", "SAT,SUN", "7", "5-7", "0-6/2",
                       "L5", "FRI#2", "MON#5", "SUN#1", "6-1", "1-1", "FRI-MON/2", "6-1/2",
                       "7-2/2"])
MONTH = st.sampled_from(["*", "JAN", "FEB", "JAN-MAR", "NOV-FEB", "*/3", "2,8", "6-6/2",
                         "NOV-FEB/2"])
HOUR = st.sampled_from(["*", "0", "2", "1,13", "9-17", "22-2", "*/5", "3-3/2", "5/6", "23-1/2",
                        "22-2/3"])
MINUTE = st.sampled_from(["0", "30", "*/15", "0,30", "55-5", "7/20", "10-40/15", "45-15/10"])
ALIAS = st.sampled_from(["@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly",
                         "@annually"])


@st.composite
def rich_exprs(draw: st.DrawFn) -> str:
    """The documented syntax beyond plain numbers: names, L, W, #, ?, wrapped ranges, aliases."""
    if draw(st.integers(0, 9)) == 0:
        return draw(ALIAS)
    dom, dow = draw(DOM), draw(DOW)
    if "W" in dom and not dow.startswith(("*", "?")):
        dow = "*"  # W and # need '*' in the other day field
    if ("#" in dow or "L" in dow) and not dom.startswith(("*", "?")):
        dom = "*"  # '#' needs it; 'L' with a restricted day of month: see the test below
    return f"{draw(MINUTE)} {draw(HOUR)} {dom} {draw(MONTH)} {dow}"


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(expr=rich_exprs(), zone=st.sampled_from(ZONES), year=st.integers(2000, 2040),
       day=st.integers(0, 364), policy=POLICY)
def test_random_rich_syntax_agrees_over_three_weeks(expr: str, zone: str, year: int, day: int,
                                                     policy: tuple[str, str]) -> None:
    start = datetime(year, 1, 1, tzinfo=UTC) + timedelta(days=day)
    spec = cron(expr, zone, dst_gap=policy[0], dst_fold=policy[1])
    _parsed(spec, start)
    theirs, mine = both(spec, start, start + timedelta(days=21))
    assert mine == theirs, (expr, zone, policy)


@SETTINGS
@given(step=st.integers(1, 3 * 86400), anchor=st.integers(0, 10**9), offset=st.integers(
    -10**6, 10**7), span=st.integers(1, 10**6), bounded=st.booleans(),
       zone=st.sampled_from(ZONES))
def test_random_intervals_agree(step: int, anchor: int, offset: int, span: int, bounded: bool,
                                zone: str) -> None:
    begin = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(seconds=anchor)
    start = begin + timedelta(seconds=offset)
    end_at = max(start, begin) + timedelta(seconds=span // 2 + 1) if bounded else None
    spec = ScheduleSpec(every=f"{step}s", timezone=zone, start_at=begin, end_at=end_at)
    theirs, mine = both(spec, start, start + timedelta(seconds=span))
    assert mine == theirs


def test_bounds_are_inclusive_and_one_offs_are_slots() -> None:
    start, end = Z("2026-01-05 00:00"), Z("2026-01-05 03:00")
    theirs, mine = both(ScheduleSpec(cron="0 * * * *", start_at=start, end_at=end), start,
                        end + timedelta(hours=5))
    assert mine == theirs == [Z(f"2026-01-05 0{h}:00") for h in range(4)]
    theirs, mine = both(ScheduleSpec(at=start), start - timedelta(days=1), end)
    assert mine == theirs == [start]
    first_release = ledger.read_document({"at": "2026-01-05T00:00:00Z"})
    assert list(ledger.slots(first_release, start, end)) == [start]


def test_pauses_and_calendar_dates_mark_slots_without_removing_them() -> None:
    s = ledger.read_document(to_document(parse_schedule(
        ScheduleSpec(cron="30 0 * * *", timezone="Europe/Berlin", start_at=EPOCH), now=EPOCH)))
    got = ledger.expected_slots(
        s, Z("2026-12-22 00:00"), Z("2026-12-27 00:00"),
        paused=[(Z("2026-12-22 12:00"), Z("2026-12-23 12:00")), (Z("2026-12-25 12:00"), None)],
        excluded_dates=[date(2026, 12, 25)])
    assert [(e.slot, e.paused, e.excluded) for e in got] == [
        (Z("2026-12-22 23:30"), True, False),  # 23 December, inside the first pause
        (Z("2026-12-23 23:30"), False, False),
        (Z("2026-12-24 23:30"), False, True),  # local date 25 December: the calendar's
        (Z("2026-12-25 23:30"), True, False),  # still paused
        (Z("2026-12-26 23:30"), True, False),
    ]


# ---- classification --------------------------------------------------------------------------

NOW = Z("2026-01-05 12:00")
RUN = uuid.UUID(int=1)


def test_each_outcome() -> None:
    slots = [Z(f"2026-01-05 {h:02d}:00") for h in range(14)]
    expected = [ExpectedSlot(u, paused=(u == slots[6])) for u in slots]
    runs = {slots[0]: RunFact(RUN, "succeeded"), slots[1]: RunFact(RUN, "running"),
            slots[2]: RunFact(RUN, "dead_lettered"), slots[3]: RunFact(RUN, "cancelled"),
            slots[4]: RunFact(RUN, "retry_scheduled")}
    skips = [SkipFact(slots[5], slots[5], "misfire_run_once")]
    context = Context(now=NOW, due_within=timedelta(minutes=90), waiting_from=slots[9])
    got = classify(expected[:9] + expected[11:], runs, skips, context,
                   scheduler_slots=set(slots[:10]) | set(slots[11:]))
    outcome = {e.slot: (e.outcome, e.expected_by) for e in got}
    assert outcome == {
        slots[0]: ("completed", "both"), slots[1]: ("in_progress", "both"),
        slots[2]: ("failed", "both"), slots[3]: ("cancelled", "both"),
        slots[4]: ("in_progress", "both"), slots[5]: ("skipped", "both"),
        slots[6]: ("paused", "both"), slots[7]: ("missing", "both"),
        slots[8]: ("missing", "both"),
        slots[9]: ("waiting", "scheduler"),  # only the scheduler has it: a disagreement
        slots[11]: ("pending", "both"),  # 11:00, within 90 minutes of due
        slots[12]: ("pending", "both"), slots[13]: ("upcoming", "both"),
    }
    by_slot = {e.slot: e for e in got}
    assert by_slot[slots[5]].skip_reason == "misfire_run_once"
    assert by_slot[slots[0]].run_id == RUN and by_slot[slots[0]].state == "succeeded"
    assert [e.slot for e in got] == sorted(by_slot)


def test_a_skip_range_covers_each_slot_inside_it() -> None:
    slots = [Z("2026-01-05 00:00") + timedelta(minutes=m) for m in range(0, 600, 5)]
    skips = [SkipFact(slots[10], slots[99], "too_late"), SkipFact(slots[0], slots[1], "overlap")]
    got = classify([ExpectedSlot(u) for u in slots], {}, skips,
                   Context(now=NOW, due_within=timedelta(0)))
    reasons = [e.skip_reason for e in got]
    assert reasons[:2] == ["overlap"] * 2
    assert reasons[2:10] == [None] * 8 and {e.outcome for e in got[2:10]} == {"missing"}
    assert reasons[10:100] == ["too_late"] * 90 and reasons[100:] == [None] * 20


def test_wrapped_ranges_with_a_step_step_through_the_wrapped_sequence() -> None:
    """docs/SCHEDULES.md: a range may wrap (`55-5` is 55..59, 0..5); with a step both
    implementations step through the wrapped sequence (`45-15/10`: 45, 55, 5, 15), where croniter
    7 alone would wrap minutes modulo 59 (45, 55, 6) and drop `1` from `23-1/2`."""
    start = Z("2026-01-05 00:00")
    theirs, mine = both(cron("45-15/10 * * * *"), start, start + timedelta(hours=1))
    assert [u.minute for u in mine] == [u.minute for u in theirs] == [5, 15, 45, 55]
    theirs, mine = both(cron("0 23-1/2 * * *"), start, start + timedelta(days=1))
    assert [u.hour for u in mine] == [u.hour for u in theirs] == [1, 23]


def test_a_last_weekday_with_a_restricted_day_of_month_is_refused_by_the_scheduler() -> None:
    """docs/SCHEDULES.md: both day fields restricted means EITHER matches. croniter would read
    `0 0 28-3 * L5` as the last Friday only, so the scheduler refuses the form (as it does `#`
    and `W` there); the ledger's own reading is the documented OR."""
    with pytest.raises(CronSyntaxError, match="need '\\*' in the other day field"):
        compile_scheduler_cron("0 0 28-3 * L5")
    start = Z("2000-01-01 00:00")
    mine = list(ledger.slots(ledger.read_document(
        {**to_document(parse_schedule(cron("0 0 * * 5"), now=start)),
         "cron": "0 0 28-3 * L5"}), start,
        start + timedelta(days=366)))
    assert len(mine) == 83  # 12 last Fridays, plus each 28th..3rd that is not one


def test_an_unreadable_expression_is_an_error_not_a_guess() -> None:
    with pytest.raises(ledger.LedgerCronError):
        ledger.compile_cron("0 0 * *")


def test_the_reconciler_checks_about_the_newest_slots_of_a_dense_schedule() -> None:
    from services.reconciler.checks.ledger import window_start

    now = Z("2026-01-05 12:00")
    every_second = ledger.read_document(to_document(parse_schedule(
        ScheduleSpec(every="1s", start_at=EPOCH), now=EPOCH)))
    start = window_start(every_second, now - timedelta(days=1), now, 100)
    assert len(ledger.expected_slots(every_second, start, now)) <= 100
    assert now - start >= timedelta(seconds=90)
    office_hours = ledger.read_document(to_document(parse_schedule(
        ScheduleSpec(cron="*/5 * 9-17 * * *", start_at=EPOCH), now=EPOCH)))  # dense by day only
    start = window_start(office_hours, now - timedelta(days=1), now, 1000)
    assert 500 <= len(ledger.expected_slots(office_hours, start, now)) <= 1000
    daily = ledger.read_document(to_document(parse_schedule(
        ScheduleSpec(cron="0 9 * * *", start_at=EPOCH), now=EPOCH)))
    assert window_start(daily, now - timedelta(days=1), now, 100) == now - timedelta(days=1)


# ---- judged only once the scheduler has passed (issue 42) ------------------------------------

def test_a_late_slot_is_judged_only_once_the_scheduler_has_passed_it() -> None:
    """After an outage every slot is late by the clock, but the scheduler has not had its
    chance yet: a slot later than its shard's last completed pass is `pending`, not `missing`;
    the same slot once a pass went through it (jitter included: its latest due instant) is."""
    slots = [Z("2026-01-05 11:00") + timedelta(seconds=s) for s in range(0, 600, 60)]
    expected = [ExpectedSlot(u) for u in slots]
    held_back = Context(now=NOW, due_within=timedelta(seconds=30),
                        decided_through=Z("2026-01-05 11:04"))
    got = {e.slot: e.outcome for e in classify(expected, {}, [], held_back)}
    assert [got[u] for u in slots] == ["missing"] * 5 + ["pending"] * 5
    assert not ledger.decided(slots[5], held_back) and ledger.decided(slots[4], held_back)
    jittered = Context(now=NOW, due_within=timedelta(seconds=90), jitter=timedelta(seconds=60),
                       decided_through=Z("2026-01-05 11:04"))
    assert [e.outcome for e in classify(expected, {}, [], jittered)][3:5] == ["missing",
                                                                             "pending"]
    no_pass = Context(now=NOW, due_within=timedelta(0), decided_through=datetime.min.replace(
        tzinfo=UTC))
    assert {e.outcome for e in classify(expected, {}, [], no_pass)} == {"pending"}
    # what happened to a slot is shown whatever the pass: a run is a run
    ran = classify(expected[-1:], {slots[-1]: RunFact(RUN, "running")}, [], no_pass)
    assert [e.outcome for e in ran] == ["in_progress"]


def test_a_slot_recorded_missing_that_got_its_run_or_skip_is_resolved() -> None:
    from services.reconciler.checks.ledger import findings

    slots = [Z("2026-01-05 11:00") + timedelta(minutes=m) for m in range(4)]
    runs = {slots[0]: RunFact(RUN, "succeeded"), slots[1]: RunFact(RUN, "queued")}
    skips = [SkipFact(slots[2], slots[2], "missed")]
    got = classify([ExpectedSlot(u) for u in slots], runs, skips,
                   Context(now=NOW, due_within=timedelta(0), decided_through=NOW))
    found = [(f.kind, f.entry.slot) for f in findings(got, unresolved=set(slots[1:]))]
    # slot 0 was never recorded missing: nothing to resolve; slot 3 still has nothing
    assert found == [("resolved", slots[1]), ("resolved", slots[2]), ("missing", slots[3])]
    events = [f.event() for f in findings(got, unresolved={slots[1], slots[2]})]
    assert [(type(e).__name__, e.scheduled_for) for e in events] == [  # type: ignore[attr-defined]
        ("LedgerSlotResolved", slots[1]), ("LedgerSlotResolved", slots[2]),
        ("LedgerSlotMissing", slots[3])]
    assert [(e.outcome, e.run_id) for e in events[:2]] == [  # type: ignore[attr-defined]
        ("in_progress", RUN), ("skipped", None)]


def test_only_shards_not_passed_within_the_grace_are_said_not_deciding() -> None:
    from ostinato.leases.shard import ShardPass, taken_over
    from services.reconciler.checks.ledger import not_deciding
    from services.reconciler.checks.overdue import scope

    grace = timedelta(seconds=30)
    passes = {
        0: ShardPass(0, NOW - timedelta(seconds=5), live=True),  # deciding
        1: ShardPass(1, NOW - timedelta(seconds=81), live=True),  # held, catching up
        2: ShardPass(2, NOW - timedelta(seconds=81), live=False),  # nobody: taken over
        3: ShardPass(3, None, live=False),  # never passed, nobody holds it
        4: ShardPass(4, NOW - timedelta(seconds=5), live=False),  # passed just now, then left
    }
    assert [s for s, p in passes.items() if taken_over(p, NOW, grace)] == [2, 3]
    shards, taken = scope(passes, NOW, grace)
    assert shards == [0, 2, 3, 4] and taken == {2, 3}  # shard 1 is left to its scheduler
    # late slots on a shard nobody decides (2 has none late); a held one is catching up
    assert not_deciding({0: 3, 1: 3, 2: 0, 3: 1, 4: 2}, passes, NOW, grace) == [3]
