"""The pure parts of start and await: which appends notify a run's end and how the notices are
cut, how `wait` is read, how long a handle's next long poll waits and what an answer means."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from ostinato.client import RunCancelledError, RunFailedError
from ostinato.client.handles import MAX_POLL, outcome, poll_wait
from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidInput
from ostinato.eventlog import ended
from ostinato.eventlog.records import NewEvent
from ostinato.wire.api import RunResult
from services.api.results import next_run_id, parse_wait


def _new(event: ev.Event, stream: uuid.UUID) -> NewEvent:
    return NewEvent(stream_id=stream, version=2, tenant_id=uuid.uuid4(), event=event,
                    actor="test", event_id=uuid.uuid4())


def test_only_appends_that_end_a_run_notify_once_per_run_in_payloads_under_8000_bytes() -> None:
    runs = [uuid.uuid4() for _ in range(450)]
    ends = [_new(ev.RunSucceeded(attempt=1, fencing_token=1, output_ref=None), r) for r in runs]
    others = [_new(ev.RunFailed(attempt=1, fencing_token=1, error_type="x", message="m",
                                retryable=True), uuid.uuid4()),
              _new(ev.RunCancelled(by="op", reason="requested"), runs[0])]  # a repeat
    notices = ended.notices([*ends, *others])
    assert len(notices) == 3 and all(len(n.encode()) < 8000 for n in notices)
    assert [r for n in notices for r in ended.parse(n)] == runs
    assert ended.notices(others[:1]) == []  # a failed attempt (retried) ends nothing
    finished = _new(ev.DagRunFinished(outcome="failed"), runs[1])
    assert ended.notices([finished]) == [str(runs[1])]


def test_a_notice_that_is_not_all_ids_still_wakes_the_ids_it_names() -> None:
    run = uuid.uuid4()
    assert ended.parse(f"junk,{run},") == [run]


@pytest.mark.parametrize(("text", "seconds"), [
    (None, 30.0), ("0", 0.0), ("0s", 0.0), ("2.5", 2.5), ("30s", 30.0), ("1m", 60.0),
    ("PT45S", 45.0), (" 10s ", 10.0)])
def test_wait_is_a_duration_or_seconds_up_to_a_minute(text: str | None, seconds: float) -> None:
    assert parse_wait(text) == seconds


@pytest.mark.parametrize("text", ["soon", "61s", "2m", "-1", "1.5.5", "", "1h", "1e3"])
def test_other_waits_are_invalid_input_naming_wait(text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_wait(text)
    assert [e["field"] for e in refused.value.errors] == ["wait"]


def test_a_one_off_jobs_next_run_id_is_its_occurrences_run_or_dag_run() -> None:
    job, slot = uuid.uuid4(), datetime(2026, 12, 1, 9, tzinfo=UTC)
    task_run = next_run_id(job, "send-invoice", slot)
    dag_run = next_run_id(job, f"dag:{uuid.uuid4()}", slot)
    assert task_run is not None and dag_run is not None and task_run != dag_run
    assert next_run_id(job, "send-invoice", slot) == task_run  # derived, not made up
    assert next_run_id(job, "send-invoice", None) is None  # no next occurrence
    assert next_run_id(job, "dag:", slot) is None


def test_each_long_poll_waits_the_time_left_at_most_the_cap() -> None:
    assert poll_wait(None) == MAX_POLL
    assert poll_wait(1000.0) == MAX_POLL
    assert poll_wait(2.5) == 2.5
    assert poll_wait(-1.0) == 0.0


def test_a_final_answer_is_the_output_or_the_typed_error() -> None:
    run = uuid.uuid4()
    assert outcome(RunResult(run_id=run, done=True, state="succeeded", output={"a": 1})) == \
        {"a": 1}
    dead = RunResult(run_id=run, done=True, state="dead_lettered",
                     error={"type": "card_declined", "message": "no"})
    with pytest.raises(RunFailedError) as failed:
        outcome(dead)
    assert failed.value.error["type"] == "card_declined" and failed.value.run_id == run
    with pytest.raises(RunFailedError):
        outcome(RunResult(run_id=run, kind="dag_run", done=True, state="failed"))
    with pytest.raises(RunCancelledError):
        outcome(RunResult(run_id=run, done=True, state="cancelled"))
