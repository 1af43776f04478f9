"""What follows the end of an attempt, as pure functions over the locked run row (a
`ostinato.stores.runs.LockedRun`, or the gateway's narrower `ReportedRun`): the events to
append, whoever noticed the end (the worker reporting, the reconciler finding an expired lease
or a timeout, an operator cancelling).

    failure ──> RetryScheduled (retry_at)          retryable with attempts left, or throttled
            └─> RunDeadLettered                    permanent, or attempts exhausted
    any end with cancel requested ──> RunCancelled (a late result is kept, and ignored)
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from ostinato.domain import events as ev
from ostinato.policy import retry
from ostinato.stores.runs import LockedRun, ReportedRun
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.outcomes")


def after_failure(run: LockedRun | ReportedRun, failure: ev.Event, *, error_type: str, message: str,
                  classification: retry.Classification, now: datetime, by: str,
                  retry_after: timedelta | None = None, reason: str | None = None,
                  ) -> list[ev.Event]:
    """The failure event, then a retry, a dead letter, or (cancel requested) a cancellation;
    a workflow whose compensation failed goes to the dead letters even when cancelled, for an
    operator to see which compensation did not run."""
    if run.cancel_requested and error_type != "compensation_failed":
        return [failure, ev.RunCancelled(by=by, reason="requested")]
    policy = retry.from_document(run.retry_policy)
    decision = retry.decide_failure(
        policy, run_id=run.id, failures_before=run.failures,
        classification=classification, now=now, retry_after=retry_after, reason=reason)
    if decision.action == "retry":
        assert decision.retry_at is not None
        failures = run.failures + (1 if decision.counts else 0)
        return [failure, ev.RetryScheduled(retry_at=decision.retry_at, reason=decision.reason,
                                           counts=decision.counts, failures=failures)]
    # the attempt the retry policy counts that this failure ends (run.attempt counts every
    # execution, a workflow's wake-ups too: retry.attempt_of)
    return [failure, ev.RunDeadLettered(reason=decision.reason, error_type=error_type,
                                        message=message, attempts=run.failures + 1,
                                        job_id=run.job_id)]


def lease_expired(run: LockedRun | ReportedRun, *, now: datetime, worker_id: str,
                  cause: str = "lease_expired") -> list[ev.Event]:
    """The attempt's lease taken back (`policy.liveness.abandoned` says why) and what follows."""
    failure = ev.LeaseExpired(attempt=run.attempt, fencing_token=run.fencing_token,
                              worker_id=worker_id, expired_at=now, cause=cause)
    silent = "missed its heartbeats" if cause == "missed_heartbeats" else "stopped heartbeating"
    return after_failure(run, failure, error_type="lease_expired",
                         message=f"worker {worker_id} {silent}",
                         classification="retryable", now=now, by="reconciler",
                         reason="lease_expired")


def timed_out(run: LockedRun | ReportedRun, *, now: datetime, detected_by: str) -> list[ev.Event]:
    seconds = float(run.timeout_seconds or 0)
    failure = ev.AttemptTimedOut(attempt=run.attempt, fencing_token=run.fencing_token,
                                 timeout_seconds=seconds, detected_by=detected_by)
    return after_failure(run, failure, error_type="attempt_timed_out",
                         message=f"no outcome within {seconds}s", classification="retryable",
                         now=now, by=detected_by, reason="timed_out")


def new_run_id(origin: uuid.UUID, request_key: str) -> uuid.UUID:
    """A replay's run id: the same request key on the same origin always gives the same run."""
    return uuid.uuid5(REPLAY_NAMESPACE, f"{origin}/{request_key}")


REPLAY_NAMESPACE = uuid.UUID("8c4f1f0e-5d3a-4e8b-9f61-2a7c9d0b1e35")


def observe(tenant_id: uuid.UUID, run_id: uuid.UUID, event: ev.Event) -> None:
    """Metrics and log lines for what follows an attempt; a dead letter is an alert."""
    match event:
        case ev.RunDeadLettered() as dead:
            metrics.DEAD_LETTERS.labels(tenant=metrics.tenant_label(str(tenant_id))).inc()
            log.error("run dead-lettered", tenant_id=str(tenant_id), run_id=str(run_id),
                      job_id=str(dead.job_id), reason=dead.reason, error_type=dead.error_type,
                      attempts=dead.attempts, alert="ostinato_dead_letter")
        case ev.RetryScheduled(reason=reason, retry_at=at):
            metrics.RETRIES_SCHEDULED.labels(reason=reason).inc()
            log.info("retry scheduled", tenant_id=str(tenant_id), run_id=str(run_id),
                     reason=reason, retry_at=at.isoformat())
        case ev.RunCancelled(reason=reason):
            log.info("run cancelled", tenant_id=str(tenant_id), run_id=str(run_id),
                     reason=reason)
