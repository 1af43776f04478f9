"""The pure rules of editing a job (`ostinato.jobs.edit`) and the CLI's schedule merge: where a
new schedule takes over, that an `every` keeps its phase across the switch, what If-Match
accepts, and when a schedule sent again is the job's own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ostinato import schedules
from ostinato.domain.errors import InvalidInput
from ostinato.jobs.edit import etag, parse_if_match, same_schedule, switch_instant, switched
from ostinato.schedules import ScheduleSpec
from ostinato.schedules.spec import edited_spec

NOW = datetime(2026, 3, 2, 9, 10, tzinfo=UTC)


def test_the_switch_is_the_edit_unless_a_slot_is_already_due_and_undecided() -> None:
    assert switch_instant(NOW, NOW + timedelta(minutes=50)) == NOW
    assert switch_instant(NOW, NOW - timedelta(minutes=10)) == NOW - timedelta(minutes=10)
    assert switch_instant(NOW, None) == NOW


def test_a_new_schedule_owns_only_its_occurrences_from_the_switch() -> None:
    cron = schedules.parse_schedule(ScheduleSpec(cron="30 * * * *",
                                                 start_at=NOW - timedelta(days=1)), now=NOW)
    assert schedules.next_occurrence(switched(cron, NOW), None) == datetime(
        2026, 3, 2, 9, 30, tzinfo=UTC)
    # an `every` keeps its anchor: its grid does not move to the switch instant
    every = schedules.parse_schedule(ScheduleSpec(every="15m", start_at=datetime(
        2026, 3, 1, 0, 5, tzinfo=UTC)), now=NOW)
    assert schedules.next_occurrence(switched(every, NOW), None) == datetime(
        2026, 3, 2, 9, 20, tzinfo=UTC)
    future = schedules.parse_schedule(ScheduleSpec(cron="0 * * * *",
                                                   start_at=NOW + timedelta(days=3)), now=NOW)
    assert switched(future, NOW) is future  # a later start stays


def test_if_match_takes_the_etag_forms_and_refuses_others() -> None:
    assert [parse_if_match(h) for h in ('"3"', 'W/"3"', "3", "*", None)] == [3, 3, 3, None, None]
    assert etag(3) == '"3"'
    for bad in ("three", '"-1"', '"1.5"', ""):
        with pytest.raises(InvalidInput):
            parse_if_match(bad)


def test_a_schedule_sent_again_is_the_jobs_own_whatever_its_default_start() -> None:
    old = schedules.to_document(schedules.parse_schedule(ScheduleSpec(cron="0 3 * * *"),
                                                         now=NOW - timedelta(days=9)))
    again = schedules.to_document(schedules.parse_schedule(ScheduleSpec(cron="0 3 * * *"),
                                                           now=NOW))
    other = schedules.to_document(schedules.parse_schedule(ScheduleSpec(cron="0 4 * * *"),
                                                           now=NOW))
    assert same_schedule(old, again, start_given=False)
    assert not same_schedule(old, again, start_given=True)
    assert not same_schedule(old, other, start_given=False)


def test_the_cli_and_ui_merge_changes_into_the_schedule_as_read() -> None:
    doc = schedules.to_document(schedules.parse_schedule(
        ScheduleSpec(cron="0 3 * * *", timezone="Europe/Berlin", misfire="skip"), now=NOW))
    assert edited_spec(doc, {"cron": "30 * * * *"}) == {
        "cron": "30 * * * *", "timezone": "Europe/Berlin", "dst_gap": "shift_forward",
        "misfire": "skip", "misfire_grace": "1m", "catch_up_max": 10, "overlap": "allow"}
    assert edited_spec(doc, {"timezone": "UTC"})["dst_fold"] == "first"  # kept as stored
    every = schedules.to_document(schedules.parse_schedule(
        ScheduleSpec(every="15m", start_at=datetime(2026, 3, 1, 0, 5, tzinfo=UTC)), now=NOW))
    assert edited_spec(every, {"jitter": "30s"})["start_at"] == "2026-03-01T00:05:00Z"
    assert "start_at" not in edited_spec(every, {"every": "20m"})
