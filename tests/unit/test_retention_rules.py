"""The retention rules (`ostinato.domain.retention`, docs/RETENTION.md): every reason a run is
kept, the instant its retention ends, the checks' window, and the parsing of a policy."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ostinato.domain.errors import InvalidInput
from ostinato.domain.retention import (
    DEFAULT_CHECKS_WINDOW,
    DEFAULT_KEEP_SECONDS,
    DEFAULT_POLICY,
    MAX_KEEP_SECONDS,
    MAX_REASON_CHARS,
    MIN_KEEP_SECONDS,
    Kept,
    RetentionPolicy,
    RunFacts,
    check_reason,
    expires_at,
    format_keep,
    parse_keep,
    removable,
)
from ostinato.domain.states import FINAL, RunState

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
HOUR = RetentionPolicy(keep_seconds=3600)
# A run that ended long ago, with nothing else keeping it: removable under every policy.
GONE = RunFacts(state="succeeded", ended_at=NOW - timedelta(days=400))


def kept(facts: RunFacts, policy: RetentionPolicy = HOUR, now: datetime = NOW) -> tuple[Kept, ...]:
    return removable(facts, policy, now).kept


def test_a_finished_run_past_its_retention_with_nothing_else_is_removable() -> None:
    decision = removable(GONE, HOUR, NOW)
    assert decision.removable and decision.kept == () and decision.reason is None
    assert decision.archive is True
    assert decision.expires_at == GONE.ended_at + timedelta(hours=1)  # type: ignore[operator]


@pytest.mark.parametrize("state", sorted(set(RunState) - FINAL))
def test_a_run_not_final_is_kept_whatever_its_age(state: str) -> None:
    facts = RunFacts(state=state, ended_at=None)
    decision = removable(facts, HOUR, NOW)
    assert not decision.removable and decision.kept == (Kept.NOT_FINAL,)
    assert decision.expires_at is None


def test_a_failed_attempt_with_a_finish_time_is_not_final() -> None:
    """`failed` is followed by a retry or a dead letter: a finished_at does not make it final."""
    assert kept(RunFacts(state="failed", ended_at=NOW - timedelta(days=90))) == (Kept.NOT_FINAL,)


@pytest.mark.parametrize("state", sorted(FINAL))
def test_every_final_state_is_removable_once_its_retention_ended(state: str) -> None:
    triage = "fixed" if state == "dead_lettered" else None
    facts = RunFacts(state=state, ended_at=NOW - timedelta(hours=2), dead_letter_triage=triage)
    assert removable(facts, HOUR, NOW).removable


def test_the_retention_ends_at_its_instant_exactly() -> None:
    ended = NOW - timedelta(hours=1)
    facts = RunFacts(state="succeeded", ended_at=ended)
    assert removable(facts, HOUR, ended + timedelta(hours=1)).removable
    just_before = ended + timedelta(hours=1) - timedelta(microseconds=1)
    assert removable(facts, HOUR, just_before).kept == (Kept.INSIDE_RETENTION,)
    assert removable(facts, HOUR, just_before).expires_at == ended + timedelta(hours=1)


def test_the_default_policy_keeps_thirty_days_and_archives() -> None:
    ended = NOW - timedelta(days=30)
    facts = RunFacts(state="cancelled", ended_at=ended)
    assert DEFAULT_POLICY.keep_seconds == DEFAULT_KEEP_SECONDS == 30 * 86400
    assert DEFAULT_POLICY.archive and DEFAULT_POLICY.is_default
    assert removable(facts, DEFAULT_POLICY, NOW).removable
    later = NOW - timedelta(microseconds=1)
    assert removable(facts, DEFAULT_POLICY, later).kept == (Kept.INSIDE_RETENTION,)


def test_archive_follows_the_policy() -> None:
    assert removable(GONE, RetentionPolicy(keep_seconds=3600, archive=False), NOW).archive is False
    assert removable(GONE, RetentionPolicy(keep_seconds=3600, archive=True), NOW).archive is True


def test_a_held_run_is_kept_even_past_its_retention() -> None:
    assert kept(replace(GONE, held=True)) == (Kept.HELD,)


def test_a_held_run_not_final_names_both_reasons_not_final_first() -> None:
    facts = RunFacts(state="running", ended_at=None, held=True)
    decision = removable(facts, HOUR, NOW)
    assert decision.kept == (Kept.NOT_FINAL, Kept.HELD) and decision.reason is Kept.NOT_FINAL


def test_a_dead_letter_not_triaged_is_kept_and_a_triaged_one_goes() -> None:
    letter = RunFacts(state="dead_lettered", ended_at=NOW - timedelta(days=60),
                      dead_letter_triage="new")
    assert kept(letter) == (Kept.DEAD_LETTER_UNTRIAGED,)
    for state in ("acknowledged", "fixed", "wont_fix"):
        done = replace(letter, dead_letter_triage=state, triaged_at=NOW - timedelta(days=59))
        assert removable(done, HOUR, NOW).removable, state


def test_a_dead_lettered_run_without_its_letter_row_counts_as_untriaged() -> None:
    facts = RunFacts(state="dead_lettered", ended_at=NOW - timedelta(days=60))
    assert kept(facts) == (Kept.DEAD_LETTER_UNTRIAGED,)


def test_a_dead_letter_triaged_late_gets_its_retention_from_the_triage() -> None:
    triaged = NOW - timedelta(minutes=30)
    letter = RunFacts(state="dead_lettered", ended_at=NOW - timedelta(days=60),
                      dead_letter_triage="wont_fix", triaged_at=triaged)
    decision = removable(letter, HOUR, NOW)
    assert decision.kept == (Kept.INSIDE_RETENTION,)
    assert decision.expires_at == triaged + timedelta(hours=1)
    assert removable(letter, HOUR, triaged + timedelta(hours=1)).removable
    assert expires_at(replace(letter, triaged_at=letter.ended_at - timedelta(days=1)),  # type: ignore[operator]
                      HOUR) == letter.ended_at + timedelta(hours=1)  # type: ignore[operator]


def test_a_parent_with_a_child_not_final_is_kept() -> None:
    assert kept(replace(GONE, children_not_final=True)) == (Kept.CHILD_NOT_FINAL,)


@pytest.mark.parametrize("parent", sorted(set(RunState) - FINAL))
def test_a_child_of_a_parent_not_final_is_kept(parent: str) -> None:
    assert kept(replace(GONE, parent_state=parent)) == (Kept.PARENT_NOT_FINAL,)


@pytest.mark.parametrize("parent", sorted(FINAL))
def test_a_told_child_of_a_final_parent_goes(parent: str) -> None:
    assert removable(replace(GONE, parent_state=parent, parent_notified=True), HOUR,
                     NOW).removable


def test_a_final_child_whose_parent_was_not_told_is_kept() -> None:
    facts = replace(GONE, parent_state="succeeded", parent_notified=False)
    assert kept(facts) == (Kept.PARENT_NOT_TOLD,)


@pytest.mark.parametrize("dag_state", ["pending", "running"])
def test_a_node_run_of_a_dag_run_not_finished_is_kept(dag_state: str) -> None:
    assert kept(replace(GONE, dag_run_state=dag_state)) == (Kept.DAG_RUN_NOT_FINAL,)


@pytest.mark.parametrize("dag_state", ["succeeded", "failed", "cancelled"])
def test_a_node_run_of_a_finished_dag_run_goes(dag_state: str) -> None:
    assert removable(replace(GONE, dag_run_state=dag_state), HOUR, NOW).removable


def test_a_slot_inside_the_checks_window_is_kept_up_to_its_edge() -> None:
    edge = NOW - DEFAULT_CHECKS_WINDOW
    assert kept(replace(GONE, checked_slot=edge)) == (Kept.SLOT_IN_CHECKS_WINDOW,)
    assert kept(replace(GONE, checked_slot=NOW - timedelta(minutes=5))) == (
        Kept.SLOT_IN_CHECKS_WINDOW,)
    out = replace(GONE, checked_slot=edge - timedelta(microseconds=1))
    assert removable(out, HOUR, NOW).removable


def test_the_checks_window_is_the_callers() -> None:
    facts = replace(GONE, checked_slot=NOW - timedelta(hours=3))
    assert removable(facts, HOUR, NOW, checks_window=timedelta(hours=2)).removable
    assert removable(facts, HOUR, NOW, checks_window=timedelta(hours=3)).kept == (
        Kept.SLOT_IN_CHECKS_WINDOW,)


def test_a_completion_deadline_inside_the_checks_window_is_kept() -> None:
    edge = NOW - DEFAULT_CHECKS_WINDOW
    assert kept(replace(GONE, deadline=edge)) == (Kept.DEADLINE_IN_CHECKS_WINDOW,)
    assert kept(replace(GONE, deadline=NOW + timedelta(days=2))) == (
        Kept.DEADLINE_IN_CHECKS_WINDOW,)
    assert removable(replace(GONE, deadline=edge - timedelta(seconds=1)), HOUR, NOW).removable


def test_the_latest_success_of_its_job_is_kept() -> None:
    assert kept(replace(GONE, latest_success_of_job=True)) == (Kept.LATEST_SUCCESS_OF_JOB,)


def test_every_reason_is_reported_in_order() -> None:
    facts = RunFacts(state="dead_lettered", ended_at=NOW - timedelta(minutes=1), held=True,
                     dead_letter_triage="new", children_not_final=True,
                     parent_state="suspended", parent_notified=False, dag_run_state="running",
                     checked_slot=NOW, deadline=NOW, latest_success_of_job=True)
    assert kept(facts) == tuple(k for k in Kept if k is not Kept.NOT_FINAL)
    assert kept(replace(facts, state="running", ended_at=None)) == tuple(
        k for k in Kept if k is not Kept.INSIDE_RETENTION)


# -- the policy's input --------------------------------------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [
    ("30d", 30 * 86400), ("1h", 3600), ("12h", 43200), ("2w", 14 * 86400),
    ("1d12h", 36 * 3600), ("P30D", 30 * 86400), ("PT1H", 3600), (" 7d ", 7 * 86400),
    (3600, 3600), ("86400", 86400), (MAX_KEEP_SECONDS, MAX_KEEP_SECONDS), ("3650d", 3650 * 86400),
])
def test_keep_takes_seconds_or_a_duration(value: str | int, seconds: int) -> None:
    assert parse_keep(value) == seconds


@pytest.mark.parametrize(("value", "says"), [
    (3599, "at least 3600 seconds"), ("59m", "at least 3600 seconds"), (0, "at least"),
    (-5, "at least"), ("0s", "at least"),
    (MAX_KEEP_SECONDS + 1, "at most 315360000 seconds"), ("3651d", "at most"),
    ("30x", "not a duration"), ("30 days", "not a duration"), ("", "empty duration"),
    ("1y", "not a duration"), ("P1M", "years and months"), ("1.5d", "whole seconds"),
    ("\u00b2", "not a duration"), ("\u0663\u0666\u0660\u0660", "not a duration"),
    ("30d\x00", "NUL"), (True, "a number of seconds"), (3600.0, "a number of seconds"),
    (None, "a number of seconds"),
])
def test_a_bad_keep_is_refused_saying_why(value: object, says: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_keep(value)  # type: ignore[arg-type]
    assert caught.value.status == 422
    assert caught.value.errors[0]["field"] == "keep"
    assert says in caught.value.detail


def test_the_bounds_are_inclusive() -> None:
    assert parse_keep(MIN_KEEP_SECONDS) == 3600
    assert parse_keep(MAX_KEEP_SECONDS) == MAX_KEEP_SECONDS


def test_an_operators_lower_floor_lets_minutes_through_and_still_names_the_floor() -> None:
    """OSTINATO_RETENTION_FLOOR_SECONDS (a soak benchmark's minutes): the floor passed in is
    the bound, inclusive, and the refusal names it; the default floor stays an hour."""
    assert parse_keep("2m", floor=60) == 120
    assert parse_keep(60, floor=60) == 60
    with pytest.raises(InvalidInput) as caught:
        parse_keep("59s", floor=60)
    assert caught.value.errors[0]["field"] == "keep"
    assert "at least 60 seconds (1m, the retention floor)" in caught.value.detail
    with pytest.raises(InvalidInput) as caught:
        parse_keep("2m")
    assert "at least 3600 seconds (1h, the retention floor); got 120" in caught.value.detail


@pytest.mark.parametrize("seconds", [3600, 86400, 30 * 86400, 36 * 3600 + 61, MAX_KEEP_SECONDS])
def test_keep_is_shown_in_a_form_read_back_to_the_same_value(seconds: int) -> None:
    assert parse_keep(format_keep(seconds)) == seconds
    assert format_keep(30 * 86400) == "30d"


def test_a_reason_is_stripped_and_optional_unless_required() -> None:
    assert check_reason("  legal hold  ", required=True) == "legal hold"
    assert check_reason(None, required=False) is None
    assert check_reason("  ", required=False) is None
    assert check_reason("line one\nline two\ttab", required=True) == "line one\nline two\ttab"
    assert check_reason("x" * MAX_REASON_CHARS, required=True) == "x" * MAX_REASON_CHARS


@pytest.mark.parametrize(("reason", "says"), [
    (None, "required"), ("", "required"), ("   ", "required"),
    ("bad\x00", "control character"), ("bell\x07", "control character"),
    ("x" * (MAX_REASON_CHARS + 1), f"at most {MAX_REASON_CHARS}"),
])
def test_a_bad_reason_is_refused_saying_why(reason: str | None, says: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_reason(reason, required=True)
    assert [e["field"] for e in caught.value.errors] == ["reason"]
    assert says in caught.value.detail
