"""Retry policy: how a failed attempt is classified and when the next one is due.

Classification (first match wins): the error `type` listed in `permanent_types` → permanent;
listed in `retryable_types` → retryable; `throttled` → rescheduled at the handler's
`retry_after` without using up an attempt; an error the handler did not classify → the job's
`unclassified` setting (retryable by default); otherwise the handler's own verdict.

Backoff for the n-th counted failure: base = min(max_delay, initial_delay * multiplier^(n-1));
`full` jitter draws the delay uniformly in [0, base] (AWS "full jitter": spreads a herd best),
`equal` in [base/2, base] (never much sooner than base), `none` uses base. The draw comes from a
hash of the run id and the failure count, so the decision is deterministic for a given run and
retries of different runs are spread.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

import msgspec

from ostinato.domain.durations import format_duration, parse_duration
from ostinato.domain.errors import InvalidInput
from ostinato.domain.states import RunState

Jitter = Literal["full", "equal", "none"]


class RetrySpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """The public JSON shape of a job's `retry` policy."""

    max_attempts: Annotated[int, msgspec.Meta(ge=1, le=100)] = 3
    initial_delay: str = "1s"
    multiplier: Annotated[float, msgspec.Meta(ge=1.0, le=10.0)] = 2.0
    max_delay: str = "5m"
    jitter: Jitter = "full"
    unclassified: Literal["retryable", "permanent"] = "retryable"
    permanent_types: Annotated[list[str], msgspec.Meta(max_length=100)] = []
    retryable_types: Annotated[list[str], msgspec.Meta(max_length=100)] = []


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int
    initial_delay: timedelta
    multiplier: float
    max_delay: timedelta
    jitter: Jitter
    unclassified: str
    permanent_types: frozenset[str]
    retryable_types: frozenset[str]


DEFAULT = RetryPolicy(3, timedelta(seconds=1), 2.0, timedelta(minutes=5), "full", "retryable",
                      frozenset(), frozenset())


def parse_retry(spec: RetrySpec | None, field: str = "retry") -> RetryPolicy:
    if spec is None:
        return DEFAULT
    errors: list[dict[str, str]] = []
    durations: dict[str, timedelta] = {}
    for name in ("initial_delay", "max_delay"):
        try:
            durations[name] = parse_duration(getattr(spec, name))
        except (InvalidInput, ValueError) as exc:
            errors.append({"field": f"{field}.{name}", "message": str(exc)})
    if not errors and durations["max_delay"] < durations["initial_delay"]:
        errors.append({"field": f"{field}.max_delay", "message": "shorter than initial_delay"})
    if errors:
        raise InvalidInput("; ".join(f"{e['field']}: {e['message']}" for e in errors), errors)
    return RetryPolicy(spec.max_attempts, durations["initial_delay"], spec.multiplier,
                       durations["max_delay"], spec.jitter, spec.unclassified,
                       frozenset(spec.permanent_types), frozenset(spec.retryable_types))


def to_document(p: RetryPolicy) -> dict[str, Any]:
    return {"max_attempts": p.max_attempts, "initial_delay": format_duration(p.initial_delay),
            "multiplier": p.multiplier, "max_delay": format_duration(p.max_delay),
            "jitter": p.jitter, "unclassified": p.unclassified,
            "permanent_types": sorted(p.permanent_types),
            "retryable_types": sorted(p.retryable_types)}


def from_document(doc: dict[str, Any] | None) -> RetryPolicy:
    if not doc:
        return DEFAULT
    return parse_retry(msgspec.convert(doc, RetrySpec))


Classification = Literal["retryable", "permanent", "throttled"]


def classify(p: RetryPolicy, *, error_type: str, retryable: bool,
             classified: bool) -> Classification:
    if error_type in p.permanent_types:
        return "permanent"
    if error_type in p.retryable_types:
        return "retryable"
    if error_type == "throttled":
        return "throttled"
    if not classified:
        return "retryable" if p.unclassified == "retryable" else "permanent"
    return "retryable" if retryable else "permanent"


def jitter_draw(run_id: uuid.UUID, failures: int) -> float:
    """A uniform number in [0, 1) fixed by the run and its failure count."""
    digest = hashlib.sha256(f"{run_id}/{failures}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def backoff(p: RetryPolicy, failures: int, draw: float) -> timedelta:
    """Delay before the attempt after the `failures`-th counted failure (failures >= 1)."""
    exponent = max(0, failures - 1)
    seconds = p.initial_delay.total_seconds() * p.multiplier ** min(exponent, 64)
    base = min(p.max_delay.total_seconds(), seconds)
    match p.jitter:
        case "full":
            delay = draw * base
        case "equal":
            delay = base / 2 + draw * base / 2
        case _:
            delay = base
    return timedelta(seconds=delay)


@dataclass(frozen=True, slots=True)
class FailureDecision:
    action: Literal["retry", "dead_letter"]
    reason: str  # retryable | throttled | lease_expired | timed_out | permanent | exhausted
    retry_at: datetime | None = None
    counts: bool = True  # whether this failure uses up an attempt


def max_attempts_of(p: RetryPolicy | dict[str, Any] | None) -> int:
    """The policy's `max_attempts`. A stored document (`to_document`) is read for it only: no
    full parse on the claim path."""
    if isinstance(p, RetryPolicy):
        return p.max_attempts
    return int((p or {}).get("max_attempts", DEFAULT.max_attempts))


def retries_exhausted(p: RetryPolicy | dict[str, Any] | None, failures_before: int) -> bool:
    """A retryable failure now would be the last one the policy allows (it dead-letters)."""
    return failures_before + 1 >= max_attempts_of(p)


def attempt_of(state: str, failures: int) -> int:
    """The attempt, as `max_attempts` counts them, that a run is on or ended on: its counted
    failures, plus the attempt under way, waiting or that ended it without being counted; a
    dead-lettered run's last failure is counted already (`RunDeadLettered.attempts`).

    Not the run's `attempt` (its executions: every claim, each timer, signal or child wake-up
    of a workflow included, the fencing epoch's count), nor raised by a throttle or a graceful
    release, which use up no attempt: a workflow that slept four times and failed once is on
    attempt 2 after six executions."""
    if state == RunState.DEAD_LETTERED:
        return max(failures, 1)
    return failures + 1


def decide_failure(p: RetryPolicy, *, run_id: uuid.UUID, failures_before: int,
                   classification: Classification, now: datetime,
                   retry_after: timedelta | None = None, reason: str | None = None,
                   ) -> FailureDecision:
    """What follows a failed attempt. `failures_before` counts earlier counted failures."""
    if classification == "permanent":
        return FailureDecision("dead_letter", reason or "permanent")
    if classification == "throttled":
        wait = retry_after if retry_after is not None else p.initial_delay
        return FailureDecision("retry", "throttled", now + max(wait, timedelta(0)), counts=False)
    failures = failures_before + 1
    if retries_exhausted(p, failures_before):
        return FailureDecision("dead_letter", "exhausted")
    delay = backoff(p, failures, jitter_draw(run_id, failures))
    return FailureDecision("retry", reason or "retryable", now + delay)
