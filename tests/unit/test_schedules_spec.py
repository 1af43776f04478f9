"""The public schedule shape: validation names the field, documents round-trip, jitter, preview."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ostinato.domain.errors import InvalidInput
from ostinato.schedules import (
    Schedule,
    ScheduleSpec,
    format_duration,
    from_document,
    jitter_offset,
    next_occurrence,
    occurrences,
    parse_duration,
    parse_schedule,
    preview,
    to_document,
)

NOW = datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC)
JOB = uuid.UUID("6f1c2a64-3a51-4f53-9d0c-6f0b1d2a7e11")


def errors_of(**fields: object) -> dict[str, str]:
    with pytest.raises(InvalidInput) as err:
        parse_schedule(ScheduleSpec(**fields), now=NOW)  # type: ignore[arg-type]
    assert err.value.status == 422
    return {e["field"]: e["message"] for e in err.value.errors}


# ---- validation ------------------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "field", "fragment"), [
    ({"cron": "61 * * * *"}, "schedule.cron", "out of range"),
    ({"cron": "* * * *"}, "schedule.cron", "4 fields"),
    ({"cron": "0 0 * * * * 2030"}, "schedule.cron", "7 fields"),
    ({"cron": "H * * * *"}, "schedule.cron", "hashed"),
    ({"cron": "@reboot"}, "schedule.cron", "unknown alias"),
    ({"cron": "0 0 31 2 *"}, "schedule.cron", "never fires"),
    ({"cron": "0 0 1 * MON#2"}, "schedule.cron", "need '*' in the other day field"),
    ({"cron": "0 0 15W * MON"}, "schedule.cron", "need '*' in the other day field"),
    ({"cron": "0 0 28-3 * L5"}, "schedule.cron", "need '*' in the other day field"),
    ({"cron": "bogus x y z w"}, "schedule.cron", "not acceptable"),
    ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "schedule.timezone", "unknown IANA"),
    ({"cron": "0 9 * * *", "timezone": "../../etc/passwd"}, "schedule.timezone", "unknown"),
    ({"every": "5x"}, "schedule.every", "not a duration"),
    ({"every": "0s"}, "schedule.every", "at least 1s"),
    ({"every": "P1M"}, "schedule.every", "no fixed length"),
    ({"every": "1.5s"}, "schedule.every", "whole seconds"),
    ({"every": "5000d"}, "schedule.every", "maximum"),
    ({"every": "1m", "misfire_grace": "soon"}, "schedule.misfire_grace", "not a duration"),
    ({"every": "1m", "max_lateness": "30s"}, "schedule.max_lateness", "misfire_grace"),
    ({"every": "1m", "jitter": "1m"}, "schedule.jitter", "shorter than the interval"),
    ({"every": "1m", "catch_up_max": 0}, "schedule.catch_up_max", "1 to 1000"),
    ({"every": "1m", "auto_pause_after": 1001}, "schedule.auto_pause_after", "1 to 1000"),
    ({"every": "1m", "calendar": "no spaces"}, "schedule.calendar", "calendar name"),
    ({"every": "1m", "end_at": NOW - timedelta(days=1)}, "schedule.end_at", "after start_at"),
    ({"at": NOW, "start_at": NOW + timedelta(hours=1)}, "schedule.at", "before start_at"),
    ({"at": NOW, "end_at": NOW - timedelta(hours=1)}, "schedule.at", "after end_at"),
    ({"cron": "0 9 * * *", "start_at": NOW, "end_at": NOW + timedelta(hours=1)},
     "schedule.cron", "never fires between start_at and end_at"),
    ({"at": NOW, "cron": "* * * * *"}, "schedule", "at and cron"),
    ({}, "schedule", "exactly one of at, cron or every"),
    ({"every": "1m", "dst_gap": "later"}, "schedule.dst_gap", "one of"),
    ({"at": datetime(2026, 1, 1)}, "schedule.at", "offset"),  # noqa: DTZ001 — naive on purpose
])
def test_errors_name_the_field(fields: dict[str, object], field: str, fragment: str) -> None:
    found = errors_of(**fields)
    assert field in found, found
    assert fragment in found[field], found[field]


def test_a_one_off_may_end_where_it_starts() -> None:
    s = parse_schedule(ScheduleSpec(at=NOW, end_at=NOW), now=NOW)
    assert occurrences(s, None) == [NOW]


def test_all_problems_are_reported_at_once() -> None:
    found = errors_of(cron="99 * * * *", timezone="Nowhere/City", jitter="x")
    assert set(found) == {"schedule.cron", "schedule.timezone", "schedule.jitter"}


def test_json_decoding_rejects_unknown_fields_and_naive_instants() -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        msgspec.json.decode(b'{"cron": "* * * * *", "tz": "UTC"}', type=ScheduleSpec)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"at": "2026-12-01T09:00:00"}', type=ScheduleSpec)
    spec = msgspec.json.decode(b'{"cron": "30 2 * * *", "timezone": "Europe/Berlin"}',
                               type=ScheduleSpec)
    assert msgspec.json.encode(spec) == b'{"cron":"30 2 * * *","timezone":"Europe/Berlin"}'


# ---- normalisation ---------------------------------------------------------------------------

def test_no_schedule_is_one_off_now() -> None:
    s = parse_schedule(None, now=NOW)
    assert (s.kind, s.at, occurrences(s, None)) == ("at", NOW, [NOW])
    assert next_occurrence(s, NOW) is None


def test_defaults_are_explicit_and_start_is_now_to_the_second() -> None:
    s = parse_schedule(ScheduleSpec(every="15m"), now=NOW)
    assert s.start_at == s.anchor == NOW.replace(microsecond=0)
    assert (s.every, s.misfire_grace, s.catch_up_max) == (timedelta(minutes=15),
                                                          timedelta(seconds=60), 10)
    assert occurrences(s, None, limit=2) == [s.start_at, s.start_at + timedelta(minutes=15)]
    offset = parse_schedule(ScheduleSpec(at=datetime(2026, 12, 1, 10, tzinfo=timezone(
        timedelta(hours=1)))), now=NOW)
    assert offset.at == datetime(2026, 12, 1, 9, tzinfo=UTC) and offset.at.tzinfo is UTC


@pytest.mark.parametrize(("cron", "fold"), [
    ("30 2 * * *", "first"), ("0 9 * * 1", "first"), ("*/5 1 * * *", "first"),
    ("30 * * * *", "both"), ("0 */2 * * *", "both"), ("0 1,13 * * *", "both"),
    ("@daily", "first"), ("@hourly", "both"), ("0 30 2 * * *", "first"),
])
def test_auto_fold_resolves_by_the_hour_field(cron: str, fold: str) -> None:
    assert parse_schedule(ScheduleSpec(cron=cron), now=NOW).dst_fold == fold
    explicit = parse_schedule(ScheduleSpec(cron=cron, dst_fold="second"), now=NOW)
    assert explicit.dst_fold == "second"


def test_cron_syntax_conventions() -> None:
    def next3(cron: str) -> list[str]:
        s = parse_schedule(ScheduleSpec(cron=cron, start_at=datetime(2025, 1, 1, tzinfo=UTC)),
                           now=NOW)
        return [u.strftime("%a %d %H:%M:%S") for u in occurrences(s, None, limit=3)]

    assert next3("*/20 * * * * *") == ["Wed 01 00:00:00", "Wed 01 00:00:20", "Wed 01 00:00:40"]
    assert next3("0 3-3 * * *") == ["Wed 01 03:00:00", "Thu 02 03:00:00", "Fri 03 03:00:00"]
    assert next3("0 0 1 * 1") == ["Wed 01 00:00:00", "Mon 06 00:00:00", "Mon 13 00:00:00"]
    assert next3("0 0 */2 * 1") == ["Mon 13 00:00:00", "Mon 27 00:00:00", "Mon 03 00:00:00"]
    assert next3("0 0 * * MON") == ["Mon 06 00:00:00", "Mon 13 00:00:00", "Mon 20 00:00:00"]
    assert next3("  0   0 *  * mon ") == next3("0 0 * * MON")


# ---- documents -------------------------------------------------------------------------------

SPECS = [
    ScheduleSpec(at=datetime(2026, 12, 1, 9, tzinfo=UTC)),
    ScheduleSpec(cron="30 2 * * *", timezone="Europe/Berlin", dst_gap="skip"),
    ScheduleSpec(cron="15 30 * * * *", timezone="Australia/Lord_Howe", end_at=NOW
                 + timedelta(days=30), misfire="catch_up", catch_up_max=50, max_lateness="2h",
                 jitter="45s", calendar="au-holidays", overlap="queue", auto_pause_after=3),
    ScheduleSpec(every="PT1H30M", start_at=NOW - timedelta(days=2), misfire="skip",
                 misfire_grace="0s", overlap="skip"),
]


@pytest.mark.parametrize("spec", SPECS)
def test_document_round_trip_is_exact_and_json(spec: ScheduleSpec) -> None:
    s = parse_schedule(spec, now=NOW)
    doc = to_document(s)
    assert json.loads(json.dumps(doc)) == doc
    assert from_document(json.loads(json.dumps(doc))) == s
    assert doc["dst_fold"] != "auto"
    assert set(doc) >= {"kind", "timezone", "start_at", "anchor", "misfire", "misfire_grace",
                        "catch_up_max", "dst_gap", "dst_fold", "overlap", "version"}


def test_document_of_every_includes_the_anchor() -> None:
    doc = to_document(parse_schedule(ScheduleSpec(every="1h30m"), now=NOW))
    assert (doc["every"], doc["anchor"]) == ("1h30m", "2026-03-01T12:00:00Z")


def test_first_release_documents_still_read() -> None:
    s = from_document({"at": "2026-12-01T09:00:00+00:00"})
    assert s == Schedule(kind="at", tz_name="UTC", start_at=s.start_at,
                         at=datetime(2026, 12, 1, 9, tzinfo=UTC))
    with pytest.raises(ValueError):
        from_document({"cron": "* * * * *"})


@settings(max_examples=60, deadline=None)
@given(text=st.builds(lambda d, h, m, s: f"{d}d{h}h{m}m{s}s", st.integers(0, 400),
                      st.integers(0, 23), st.integers(0, 59), st.integers(0, 59)))
def test_durations_round_trip(text: str) -> None:
    value = parse_duration(text)
    assert parse_duration(format_duration(value)) == value


def test_duration_spellings() -> None:
    assert parse_duration("90s") == parse_duration("1m30s") == timedelta(seconds=90)
    assert parse_duration("PT15M") == parse_duration("15m") == timedelta(minutes=15)
    assert parse_duration("P1DT2H") == timedelta(days=1, hours=2)
    assert parse_duration("1w") == parse_duration("P1W") == timedelta(days=7)
    assert format_duration(timedelta(days=1, seconds=3723)) == "1d1h2m3s"


# ---- jitter and preview ----------------------------------------------------------------------

def test_jitter_is_deterministic_and_within_the_window() -> None:
    s = parse_schedule(ScheduleSpec(cron="*/5 * * * *", jitter="2m"), now=NOW)
    slots = occurrences(s, NOW, limit=300)
    offsets = [jitter_offset(s, JOB, u) for u in slots]
    assert offsets == [jitter_offset(s, JOB, u) for u in slots]
    assert all(timedelta(0) <= o < timedelta(minutes=2) for o in offsets)
    assert len(set(offsets)) > 250  # spread, not constant
    other = [jitter_offset(s, uuid.UUID(int=JOB.int + 1), u) for u in slots]
    assert other != offsets
    berlin = slots[0].astimezone(timezone(timedelta(hours=1)))
    assert jitter_offset(s, JOB, berlin) == offsets[0]  # the instant, not its spelling
    plain = parse_schedule(ScheduleSpec(cron="*/5 * * * *"), now=NOW)
    assert jitter_offset(plain, JOB, slots[0]) == timedelta(0)


def test_preview_shows_slots_and_due_instants_across_a_dst_change() -> None:
    s = parse_schedule(ScheduleSpec(cron="30 2 * * *", timezone="America/New_York",
                                    jitter="10m", start_at=datetime(2025, 1, 1, tzinfo=UTC)),
                       now=NOW)
    rows = preview(s, JOB, datetime(2025, 3, 8, tzinfo=UTC), 3)
    assert [slot for slot, _ in rows] == [datetime(2025, 3, 8, 7, 30, tzinfo=UTC),
                                          datetime(2025, 3, 9, 7, 0, tzinfo=UTC),
                                          datetime(2025, 3, 10, 6, 30, tzinfo=UTC)]
    assert all(due == slot + jitter_offset(s, JOB, slot) for slot, due in rows)
    assert preview(s, JOB, datetime(2025, 3, 8, tzinfo=UTC), 0) == []
