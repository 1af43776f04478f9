"""The retry policy as pure functions: classification, capped backoff with jitter bounds, and
the decision after each failure."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ostinato.domain.errors import InvalidInput
from ostinato.policy import retry
from ostinato.policy.retry import RetrySpec, backoff, classify, decide_failure, parse_retry

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def policy(**kw: object) -> retry.RetryPolicy:
    return parse_retry(RetrySpec(**kw))  # type: ignore[arg-type]


@given(failures=st.integers(1, 40), draw=st.floats(0, 1, exclude_max=True),
       jitter=st.sampled_from(["full", "equal", "none"]))
def test_backoff_stays_within_its_jitter_bounds_and_the_cap(failures: int, draw: float,
                                                           jitter: str) -> None:
    p = policy(initial_delay="2s", multiplier=3.0, max_delay="10m", jitter=jitter)
    base = min(600.0, 2.0 * 3.0 ** (failures - 1))
    delay = backoff(p, failures, draw).total_seconds()
    low = {"full": 0.0, "equal": base / 2, "none": base}[jitter]
    assert low - 1e-9 <= delay <= base + 1e-9
    assert delay <= 600.0 + 1e-9


def test_decisions_count_attempts_and_end_in_the_dead_letter_queue() -> None:
    p = policy(max_attempts=3, initial_delay="10s", multiplier=2.0, jitter="none")
    run = uuid.uuid4()
    first = decide_failure(p, run_id=run, failures_before=0, classification="retryable", now=NOW)
    assert (first.action, first.retry_at, first.counts) == ("retry", NOW + timedelta(seconds=10),
                                                            True)
    second = decide_failure(p, run_id=run, failures_before=1, classification="retryable",
                            now=NOW)
    assert second.retry_at == NOW + timedelta(seconds=20)
    third = decide_failure(p, run_id=run, failures_before=2, classification="retryable", now=NOW)
    assert (third.action, third.reason) == ("dead_letter", "exhausted")
    permanent = decide_failure(p, run_id=run, failures_before=0, classification="permanent",
                               now=NOW)
    assert (permanent.action, permanent.reason) == ("dead_letter", "permanent")
    throttled = decide_failure(p, run_id=run, failures_before=2, classification="throttled",
                               now=NOW, retry_after=timedelta(seconds=30))
    assert (throttled.action, throttled.retry_at, throttled.counts) == (
        "retry", NOW + timedelta(seconds=30), False)


def test_jitter_is_deterministic_per_run_and_spreads_runs() -> None:
    p = policy(initial_delay="60s", jitter="full")
    a = uuid.uuid4()
    one = decide_failure(p, run_id=a, failures_before=0, classification="retryable", now=NOW)
    again = decide_failure(p, run_id=a, failures_before=0, classification="retryable", now=NOW)
    assert one == again
    spread = {decide_failure(p, run_id=uuid.uuid4(), failures_before=0,
                             classification="retryable", now=NOW).retry_at for _ in range(50)}
    assert len(spread) == 50


@pytest.mark.parametrize(("kw", "error_type", "retryable", "classified", "expected"), [
    ({}, "ValueError", True, False, "retryable"),
    ({"unclassified": "permanent"}, "ValueError", True, False, "permanent"),
    ({"unclassified": "permanent"}, "Gateway503", True, True, "retryable"),
    ({"permanent_types": ["ValueError"]}, "ValueError", True, True, "permanent"),
    ({"retryable_types": ["card_declined"]}, "card_declined", False, True, "retryable"),
    ({}, "throttled", True, True, "throttled"),
    ({}, "card_declined", False, True, "permanent"),
])
def test_classification(kw: dict, error_type: str, retryable: bool, classified: bool,
                        expected: str) -> None:
    assert classify(policy(**kw), error_type=error_type, retryable=retryable,
                    classified=classified) == expected


def test_bad_policies_name_their_field_and_documents_round_trip() -> None:
    with pytest.raises(InvalidInput) as bad:
        policy(initial_delay="soon", max_delay="1s")
    assert [e["field"] for e in bad.value.errors] == ["retry.initial_delay"]
    with pytest.raises(InvalidInput) as short:
        policy(initial_delay="10s", max_delay="1s")
    assert [e["field"] for e in short.value.errors] == ["retry.max_delay"]
    p = policy(max_attempts=5, jitter="equal", permanent_types=["X"])
    assert retry.from_document(retry.to_document(p)) == p
    assert retry.from_document(None) == retry.DEFAULT
