"""The order in which `readmodels.apply` writes a batch (`_rounds`): a job's streak of failures
comes out as it would event by event, whatever the batch (a live append or a rebuild's page)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from ostinato.domain import events as ev
from ostinato.eventlog.readmodels import STREAK, _rounds
from ostinato.eventlog.records import RecordedEvent

T = datetime(2026, 12, 1, tzinfo=UTC)
TENANT = uuid.uuid4()
SUCCESS = ev.RunSucceeded(attempt=1, fencing_token=1, output_ref=None)
DEAD = ev.RunDeadLettered(reason="permanent", error_type="boom", message="m", attempts=1)
OTHER = ev.RunQueued(pool="default")


def _recorded(stream_id: uuid.UUID, version: int, event: ev.Event) -> RecordedEvent:
    return RecordedEvent(seq=0, event_id=uuid.uuid4(), stream_id=stream_id,
                         stream_type=type(event).stream_type, version=version, tenant_id=TENANT,
                         type=type(event).__name__, event=event, actor="test", epoch=None,
                         traceparent=None, occurred_at=T, recorded_at=T)


def _streak(events: list[ev.Event], rounds: list[int]) -> int:
    """consecutive_failures after the batch, written round by round as `apply` does: within a
    round, one statement per event type, in the order the types first appear there."""
    streak = 0
    for k in sorted(set(rounds)):
        by_type: dict[type[ev.Event], list[ev.Event]] = {}
        for e, at in zip(events, rounds, strict=True):
            if at == k:
                by_type.setdefault(type(e), []).append(e)
        for kind, written in by_type.items():
            if STREAK.get(kind) == 0:
                streak = 0
            elif STREAK.get(kind) == 1:
                streak += len(written)
    return streak


@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from([SUCCESS, DEAD, OTHER])),
                max_size=30))
def test_a_batch_gives_the_streak_its_events_give_one_by_one(
        batch: list[tuple[int, ev.Event]]) -> None:
    streams = [uuid.uuid4() for _ in range(5)]
    versions = [0] * 5
    recorded = []
    for i, e in batch:
        versions[i] += 1
        recorded.append(_recorded(streams[i], versions[i], e))
    one_by_one = 0
    for _, e in batch:
        one_by_one = {0: 0, 1: one_by_one + 1}.get(STREAK.get(type(e), -1), one_by_one)
    assert _streak([e for _, e in batch], _rounds(recorded)) == one_by_one


def test_a_dead_letter_late_in_its_run_comes_before_a_success_early_in_its_own() -> None:
    dead, ok = uuid.uuid4(), uuid.uuid4()
    recorded = [*(_recorded(dead, v, OTHER) for v in range(1, 5)), _recorded(dead, 5, DEAD),
                *(_recorded(ok, v, OTHER) for v in range(1, 4)), _recorded(ok, 4, SUCCESS)]
    rounds = _rounds(recorded)
    assert rounds[4] < rounds[-1]


def test_a_completion_overdue_comes_after_the_run_it_marks() -> None:
    job, other_job, run = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    overdue = ev.CompletionOverdue(kind="complete_within", deadline=T, run_id=run,
                                   scheduled_for=T)
    recorded = [_recorded(other_job, 7, ev.CompletionOverdue(kind="max_staleness", deadline=T)),
                _recorded(run, 1, ev.RunScheduled(job_id=job, task="t", pool="default",
                                                  priority="default", payload_ref=None,
                                                  scheduled_for=T)),
                _recorded(job, 9, overdue)]
    assert _rounds(recorded) == [0, 0, 1]
