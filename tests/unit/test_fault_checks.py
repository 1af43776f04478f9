"""The fault suite's story check (`tests.helpers.lab.invariants.stream_problem`) follows the run
lifecycle the log enforces, and finds what it is there to find: a claim while another attempt
holds the run, a fencing token that did not rise, a change after success, a gap in versions."""

from __future__ import annotations

import uuid

import msgspec

from tests.helpers.lab.invariants import StoryEvent, stream_problem

RUN = uuid.UUID(int=1)


def story(*steps: str | tuple[str, int]) -> list[StoryEvent]:
    """Events in version order; ("RunStarted", epoch) gives a claim its fencing token."""
    events = []
    for i, step in enumerate(steps, start=1):
        kind, epoch = (step, None) if isinstance(step, str) else step
        events.append(StoryEvent(stream_id=RUN, version=i, seq=10 * i, type=kind, epoch=epoch,
                                 token=None if epoch is None else str(epoch)))
    return events


def test_a_consistent_story_passes() -> None:
    assert stream_problem(story("RunScheduled", "RunQueued", ("RunStarted", 1),
                                "LeaseExpired", "RetryScheduled", "RetryDue", "RunQueued",
                                ("RunStarted", 3), "RunSucceeded", "StaleWriteRejected")) is None
    assert stream_problem(story("RunScheduled", "RunQueued", ("RunStarted", 1), "LeaseReleased",
                                "RetryDue", "RunQueued", ("RunStarted", 2),
                                "RunSucceeded")) is None


def test_what_the_check_is_for_is_found() -> None:
    claimed_twice = story("RunScheduled", "RunQueued", ("RunStarted", 1), ("RunStarted", 2))
    assert "RunStarted at version 4 after state running" == stream_problem(claimed_twice)
    token_down = story("RunScheduled", "RunQueued", ("RunStarted", 2), "LeaseExpired",
                       "RetryScheduled", "RunQueued", ("RunStarted", 1))
    assert "not above the previous 2" in (stream_problem(token_down) or "")
    changed_after_success = story("RunScheduled", "RunQueued", ("RunStarted", 1),
                                  "RunSucceeded", "RunCancelled")
    assert stream_problem(changed_after_success) is not None
    unfinished = story("RunScheduled", "RunQueued")
    assert "ends in state queued" in (stream_problem(unfinished) or "")
    gap = story("RunScheduled", "RunQueued")
    gap[1] = msgspec.structs.replace(gap[1], version=3)
    assert "not 1..2" in (stream_problem(gap) or "")
    out_of_order = story("RunScheduled", "RunQueued")
    out_of_order[1] = msgspec.structs.replace(out_of_order[1], seq=1)
    assert stream_problem(out_of_order) == "seq order differs from version order"
    assert stream_problem(story("RunQueued")) == "starts with RunQueued"
    assert stream_problem([]) == "no events"
