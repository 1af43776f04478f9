"""The projector: how each event changes the read models (tenants, api_keys, jobs, runs,
run_steps, ...), in the transaction of its append, and the snapshot a rebuild is compared with.
The only writer of these tables; their reads are the stores' (`ostinato.stores`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.domain import events as ev
from ostinato.domain import fanout
from ostinato.eventlog.records import RecordedEvent, ignoring
from ostinato.leases.shard import shard_of

Q = {**load("ostinato.eventlog", "readmodels.sql"), **load("ostinato.eventlog", "controls.sql"),
     **load("ostinato.eventlog", "dags.sql"), **load("ostinato.eventlog", "retention.sql")}
_json = msgspec.json.Encoder()

Args = tuple[Any, ...]


def _tenant_created(r: RecordedEvent, e: ev.TenantCreated) -> tuple[str, Args]:
    return "project_tenant_created", (r.stream_id, e.name, e.weight, r.occurred_at, r.version)


def _api_key_issued(r: RecordedEvent, e: ev.ApiKeyIssued) -> tuple[str, Args]:
    return "project_api_key_issued", (r.stream_id, e.key_hash, e.role, r.occurred_at, r.version,
                                      e.key_id, e.name, e.pools)


def _api_key_revoked(r: RecordedEvent, e: ev.ApiKeyRevoked) -> tuple[str, Args]:
    return "project_api_key_revoked", (r.stream_id, e.key_id, e.effective_at, r.version)


def _job_created(r: RecordedEvent, e: ev.JobCreated) -> tuple[str, Args]:
    return "project_job_created", (
        r.stream_id, r.tenant_id, e.name, e.task, _json.encode(e.schedule).decode(),
        e.payload_ref, e.pool, e.priority, e.idempotency_key, e.next_run_at, r.occurred_at,
        r.version, r.traceparent, e.schedule.get("kind", "at"), e.next_slot,
        e.schedule.get("calendar"), e.schedule.get("overlap", "allow"),
        _json_or_none(e.retry), e.timeout_seconds, e.queue_wait_seconds, e.on_queue_wait,
        shard_of(r.stream_id), e.concurrency_key, e.resource, e.payload_version,
        e.request_hash, e.complete_within_seconds, e.max_staleness_seconds, e.owner,
    )


def _occurrence_fired(r: RecordedEvent, e: ev.OccurrenceFired) -> tuple[str, Args]:
    return "project_occurrence_fired", (
        r.stream_id, e.next_run_at, e.scheduled_for, r.occurred_at, r.version, e.next_slot,
    )


def _occurrences_skipped(r: RecordedEvent, e: ev.OccurrencesSkipped) -> tuple[str, Args]:
    return "project_occurrences_skipped", (
        r.stream_id, e.next_run_at, r.occurred_at, r.version, e.next_slot, r.tenant_id,
        e.first, e.last, e.slots, e.reason,
    )


def _job_paused(r: RecordedEvent, e: ev.JobPaused) -> tuple[str, Args]:
    return "project_job_paused", (r.stream_id, r.occurred_at, r.version, r.tenant_id, e.reason)


def _job_resumed(r: RecordedEvent, e: ev.JobResumed) -> tuple[str, Args]:
    return "project_job_resumed", (r.stream_id, r.occurred_at, r.version, e.misfire)


def _job_updated(r: RecordedEvent, e: ev.JobUpdated) -> tuple[str, Args]:
    return "project_job_updated", (
        r.stream_id, r.tenant_id, e.definition_version, r.occurred_at,
        _json.encode(e.schedule).decode(), e.schedule.get("kind", "at"),
        e.schedule.get("calendar"), e.schedule.get("overlap", "allow"), e.payload_ref, e.pool,
        e.priority, e.next_run_at, e.next_slot, _json_or_none(e.retry), e.timeout_seconds,
        e.queue_wait_seconds, e.on_queue_wait, e.concurrency_key, e.resource,
        e.payload_version, e.complete_within_seconds, e.max_staleness_seconds, e.owner,
        r.version,
    )


def _run_amended(r: RecordedEvent, e: ev.RunAmended) -> tuple[str, Args]:
    return "project_run_amended", (
        r.stream_id, e.payload_ref, e.pool, e.priority, _json_or_none(e.retry),
        e.timeout_seconds, e.queue_wait_seconds, e.on_queue_wait, e.concurrency_key,
        e.resource, e.payload_version, r.occurred_at, r.version,
    )


def _job_version_only(r: RecordedEvent, e: ev.Event) -> tuple[str, Args]:
    return "project_job_version_only", (r.stream_id, r.version)


def _completion_overdue(r: RecordedEvent, e: ev.CompletionOverdue) -> tuple[str, Args]:
    return "project_completion_overdue", (r.stream_id, r.version, e.run_id or e.dag_run_id,
                                          e.scheduled_for)


def _ledger_slot_missing(r: RecordedEvent, e: ev.LedgerSlotMissing) -> tuple[str, Args]:
    return "project_ledger_slot_missing", (r.stream_id, r.version, e.scheduled_for)


def _ledger_slot_resolved(r: RecordedEvent, e: ev.LedgerSlotResolved) -> tuple[str, Args]:
    return "project_ledger_slot_resolved", (r.stream_id, r.version)


def _calendar_defined(r: RecordedEvent, e: ev.CalendarDefined) -> tuple[str, Args]:
    return "project_calendar_defined", (
        r.stream_id, r.tenant_id, e.name, e.dates, r.occurred_at, r.version,
    )


def _job_deleted(r: RecordedEvent, e: ev.JobDeleted) -> tuple[str, Args]:
    return "project_job_deleted", (r.stream_id, r.occurred_at, r.version)


def _run_scheduled(r: RecordedEvent, e: ev.RunScheduled) -> tuple[str, Args]:
    return "project_run_scheduled", (
        r.stream_id, r.tenant_id, e.job_id, e.task, e.pool, e.priority, e.payload_ref,
        e.scheduled_for, r.occurred_at, r.version, e.trigger, e.due_at, r.traceparent,
        _json_or_none(e.retry), e.timeout_seconds, e.queue_wait_seconds, e.on_queue_wait,
        e.replay_of, e.concurrency_key, e.resource, e.parent_run_id, e.payload_version,
    )


def _run_queued(r: RecordedEvent, e: ev.RunQueued) -> tuple[str, Args]:
    return "project_run_queued", (r.stream_id, e.pool, r.occurred_at, r.version, r.traceparent)


def _run_started(r: RecordedEvent, e: ev.RunStarted) -> tuple[str, Args]:
    return "project_run_started", (
        r.stream_id, e.attempt, e.fencing_token, e.worker_id, r.occurred_at, r.version,
        r.traceparent, e.task_version, e.pinned,
    )


def _run_succeeded(r: RecordedEvent, e: ev.RunSucceeded) -> tuple[str, Args]:
    return "project_run_succeeded", (r.stream_id, e.output_ref, r.occurred_at, r.version,
                                     e.logs_ref)


def _run_failed(r: RecordedEvent, e: ev.RunFailed) -> tuple[str, Args]:
    error = {"type": e.error_type, "message": e.message, "retryable": e.retryable,
             "attempt": e.attempt}
    return "project_run_failed", (
        r.stream_id, _json.encode(error).decode(), r.occurred_at, r.version, e.logs_ref,
    )


def _attempt_timed_out(r: RecordedEvent, e: ev.AttemptTimedOut) -> tuple[str, Args]:
    error = _json.encode({"type": "attempt_timed_out", "retryable": True, "attempt": e.attempt,
                          "message": f"no outcome within {e.timeout_seconds}s"}).decode()
    if e.detected_by == "worker":  # the worker's own report under its current token
        return "project_run_failed", (r.stream_id, error, r.occurred_at, r.version, None)
    return "project_attempt_revoked", (r.stream_id, error, r.occurred_at, r.version,
                                       e.fencing_token + 1)


def _lease_expired(r: RecordedEvent, e: ev.LeaseExpired) -> tuple[str, Args]:
    error = {"type": "lease_expired", "message": f"worker {e.worker_id} stopped heartbeating",
             "retryable": True, "attempt": e.attempt}
    return "project_attempt_revoked", (r.stream_id, _json.encode(error).decode(), r.occurred_at,
                                       r.version, e.fencing_token + 1)


def _lease_released(r: RecordedEvent, e: ev.LeaseReleased) -> tuple[str, Args]:
    return "project_retry_scheduled", (r.stream_id, r.occurred_at, r.occurred_at, r.version,
                                       None)


def _retry_scheduled(r: RecordedEvent, e: ev.RetryScheduled) -> tuple[str, Args]:
    return "project_retry_scheduled", (r.stream_id, e.retry_at, r.occurred_at, r.version,
                                       e.failures)


def _retry_due(r: RecordedEvent, e: ev.RetryDue) -> tuple[str, Args]:
    return "project_retry_due", (r.stream_id, r.occurred_at, r.version)


def _dead_lettered(r: RecordedEvent, e: ev.RunDeadLettered) -> tuple[str, Args]:
    return "project_run_dead_lettered", (r.stream_id, r.occurred_at, r.version, e.reason,
                                         e.error_type, e.message, e.attempts)


def _cancel_requested(r: RecordedEvent, e: ev.CancelRequested) -> tuple[str, Args]:
    return "project_cancel_requested", (r.stream_id, r.occurred_at, r.version)


def _cancelled(r: RecordedEvent, e: ev.RunCancelled) -> tuple[str, Args]:
    return "project_run_cancelled", (r.stream_id, r.occurred_at, r.version, e.output_ref)


def _triaged(r: RecordedEvent, e: ev.DeadLetterTriaged) -> tuple[str, Args]:
    return "project_dead_letter_triaged", (r.stream_id, r.occurred_at, r.version, e.state,
                                           e.comment, e.by)


def _replayed(r: RecordedEvent, e: ev.DeadLetterReplayed) -> tuple[str, Args]:
    return "project_dead_letter_replayed", (r.stream_id, r.occurred_at, r.version, e.new_run_id)


def _republished(r: RecordedEvent, e: ev.RunRepublished) -> tuple[str, Args]:
    return "project_retry_due", (r.stream_id, r.occurred_at, r.version)


def _limit_set(r: RecordedEvent, e: ev.LimitSet) -> tuple[str, Args]:
    return "project_limit_set", (r.stream_id, e.scope, e.name, e.max_concurrency,
                                 e.rate_per_second, e.burst, r.occurred_at, e.weight, r.version)


def _retention_set(r: RecordedEvent, e: ev.RetentionSet) -> tuple[str, Args]:
    return "project_retention_set", (r.stream_id, e.keep_seconds, e.archive, r.occurred_at,
                                     e.by or r.actor, r.version)


def _run_held(r: RecordedEvent, e: ev.RunHeld) -> tuple[str, Args]:
    return "project_run_held", (r.stream_id, r.tenant_id, e.reason, e.by or r.actor,
                                r.occurred_at, r.version)


def _run_released(r: RecordedEvent, e: ev.RunReleased) -> tuple[str, Args]:
    return "project_run_released", (r.stream_id, r.version)


def _pool_control(r: RecordedEvent, e: ev.PoolPaused | ev.PoolResumed) -> tuple[str, Args]:
    paused = isinstance(e, ev.PoolPaused)
    return "project_pool_control", (r.stream_id, e.scope_tenant_id, e.pool, paused,
                                    e.reason if isinstance(e, ev.PoolPaused) else None, r.actor,
                                    r.occurred_at, r.version)


def _step_row(r: RecordedEvent, seq: int, name: str, succeeded: bool, output: Any = None,
              output_ref: Any = None, error_type: str | None = None, message: str | None = None,
              attempt: int = 0, tries: int = 1, duration_ms: float = 0.0,
              compensable: bool = False) -> tuple[str, Args]:
    """A workflow position's `run_steps` row (the pool's json codec encodes `output`)."""
    return "project_step_recorded", (r.stream_id, seq, r.tenant_id, name, succeeded, output,
                                     output_ref, error_type, message, attempt, tries,
                                     duration_ms, r.occurred_at, r.version, compensable)


def _step_recorded(r: RecordedEvent, e: ev.StepCompleted | ev.StepFailed) -> tuple[str, Args]:
    if isinstance(e, ev.StepCompleted):  # a step that returned null stores NULL
        return _step_row(r, e.seq, e.name, True, None if e.output_ref else e.output,
                         e.output_ref, attempt=e.attempt, tries=e.tries,
                         duration_ms=e.duration_ms, compensable=e.compensable)
    return _step_row(r, e.seq, e.name, False, error_type=e.error_type, message=e.message,
                     attempt=e.attempt, tries=e.tries, duration_ms=e.duration_ms)


def _attributes_upserted(r: RecordedEvent, e: ev.AttributesUpserted) -> tuple[str, Args]:
    """The position's row (its record: the values set) and the run's attributes merged."""
    _, step = _step_row(r, e.seq, e.name, True, e.attributes, attempt=e.attempt)
    return "project_attributes_upserted", (*step, e.attributes)


def _timer_fired(r: RecordedEvent, e: ev.TimerFired) -> tuple[str, Args]:
    return _step_row(r, e.seq, e.name, True, {"due_at": e.due_at.isoformat()},
                     attempt=e.attempt)


def _signal_timed_out(r: RecordedEvent, e: ev.SignalTimedOut) -> tuple[str, Args]:
    return _step_row(r, e.seq, e.name, False, error_type="signal_timeout",
                     message=f"no signal {e.name!r} before {e.deadline.isoformat()}",
                     attempt=e.attempt)


def _suspended(r: RecordedEvent, e: ev.RunSuspended) -> tuple[str, Args]:
    return "project_run_suspended", (r.stream_id, r.occurred_at, r.version, e.reason, e.seq,
                                     e.name, e.signal, e.wake_at, e.deadline_at,
                                     e.child_run_id)


def _child_started(r: RecordedEvent, e: ev.ChildStarted) -> tuple[str, Args]:
    if e.awaited:  # the position is recorded when the child ends (ChildFinished)
        return _version_only(r, e)
    return _step_row(r, e.seq, e.name, True, str(e.child_run_id), attempt=e.attempt)


def _child_finished(r: RecordedEvent, e: ev.ChildFinished) -> tuple[str, Args]:
    if e.state == "succeeded":
        return _step_row(r, e.seq, e.name, True, None if e.output_ref else e.output,
                         e.output_ref)
    return _step_row(r, e.seq, e.name, False, error_type=e.error_type, message=e.message)


def _fan_out_started(r: RecordedEvent, e: ev.FanOutStarted) -> tuple[str, Args]:
    return "project_fan_out_started", (r.stream_id, e.seq, r.tenant_id, e.name, e.task, e.pool,
                                       e.priority, e.total, e.max_concurrency, e.on_failure,
                                       e.on_complete, e.admitted, r.occurred_at, r.version,
                                       _json_or_none(e.retry), e.timeout_seconds)


def _fan_out_progressed(r: RecordedEvent, e: ev.FanOutProgressed) -> tuple[str, Args]:
    return "project_fan_out_progressed", (r.stream_id, e.seq, e.succeeded, e.failed,
                                          e.admitted, _json.encode(e.failures).decode(),
                                          r.version)


def _fan_out_completed(r: RecordedEvent, e: ev.FanOutCompleted) -> tuple[str, Args]:
    """The record closed and the position's step row: the summary the workflow goes on with,
    or the failure it raises."""
    ok = e.outcome == "succeeded"
    output = fanout.summary(e) if ok else None
    return "project_fan_out_completed", (
        r.stream_id, e.seq, r.tenant_id, e.name, ok, output, None,
        None if ok else e.error_type, None if ok else e.message, 0, 1, 0.0, r.occurred_at,
        r.version, False, e.outcome, e.completion_run_id)


def _paused(r: RecordedEvent, e: ev.RunPaused) -> tuple[str, Args]:
    return "project_run_paused", (r.stream_id, r.occurred_at, r.version)


def _resumed(r: RecordedEvent, e: ev.RunResumed) -> tuple[str, Args]:
    return "project_run_resumed", (r.stream_id, r.occurred_at, r.version, e.wake_at)


def _parent_notified(r: RecordedEvent, e: ev.ParentNotified) -> tuple[str, Args]:
    return "project_parent_notified", (r.stream_id, r.version)


def _stuck(r: RecordedEvent, e: ev.RunStuck) -> tuple[str, Args]:
    return "project_run_stuck", (r.stream_id, r.version)


def _woken(r: RecordedEvent, e: ev.RunWoken) -> tuple[str, Args]:
    return "project_run_woken", (r.stream_id, r.occurred_at, r.version)


def _signal_received(r: RecordedEvent, e: ev.SignalReceived) -> tuple[str, Args]:
    return "project_signal_received", (r.stream_id, r.occurred_at, r.version, e.signal_id,
                                       r.tenant_id, e.name, e.payload, e.payload_ref)


def _signal_delivered(r: RecordedEvent, e: ev.SignalDelivered) -> tuple[str, Args]:
    return "project_signal_delivered", (r.stream_id, e.seq, r.tenant_id, e.name, e.payload,
                                        e.attempt, r.occurred_at, e.signal_id, r.version,
                                        e.payload_ref)


def _steps_set_aside(r: RecordedEvent, e: ev.StepRetried | ev.RunRestarted) -> tuple[str, Args]:
    seq = e.seq if isinstance(e, ev.StepRetried) else e.from_seq
    return "project_steps_set_aside", (r.stream_id, seq, r.version, r.occurred_at)


def _step_skipped(r: RecordedEvent, e: ev.StepSkipped) -> tuple[str, Args]:
    return "project_step_skipped", (r.stream_id, e.seq, r.version, r.occurred_at, r.tenant_id,
                                    e.name, None if e.output_ref else e.output, e.output_ref,
                                    e.by)


def _reopened(r: RecordedEvent, e: ev.RunReopened) -> tuple[str, Args]:
    return "project_run_reopened", (r.stream_id, r.occurred_at, r.version, e.by, e.reason)


def _marked_succeeded(r: RecordedEvent, e: ev.RunMarkedSucceeded) -> tuple[str, Args]:
    return "project_run_marked_succeeded", (r.stream_id, e.output_ref, r.occurred_at,
                                            r.version, e.by, e.reason)


def _marked_failed(r: RecordedEvent, e: ev.RunMarkedFailed) -> tuple[str, Args]:
    error = {"type": e.error_type, "message": e.message, "retryable": False, "by": e.by}
    return "project_run_marked_failed", (r.stream_id, _json.encode(error).decode(), r.version)


def _dag_defined(r: RecordedEvent, e: ev.DagDefined) -> tuple[str, Args]:
    return "project_dag_defined", (r.stream_id, r.tenant_id, e.name, e.version, e.version_hash,
                                   _json.encode(e.definition).decode(), r.occurred_at,
                                   r.version, len(e.definition.get("nodes", ())))


def _dag_run_started(r: RecordedEvent, e: ev.DagRunStarted) -> tuple[str, Args]:
    return "project_dag_run_started", (r.stream_id, r.tenant_id, e.dag_id, e.dag_version,
                                       e.nodes, e.due_at, e.trigger, e.job_id, e.scheduled_for,
                                       r.occurred_at, r.version)


def _dag_node_ready(r: RecordedEvent, e: ev.DagNodeReady) -> tuple[str, Args]:
    return "project_dag_node_ready", (r.stream_id, e.key, e.run_id, e.generation,
                                      r.occurred_at, r.version)


def _dag_node_ended(r: RecordedEvent,
                    e: ev.DagNodeFinished | ev.DagNodeSkipped) -> tuple[str, Args]:
    return "project_dag_node_ended", (r.stream_id, e.key, e.state, r.occurred_at, r.version)


def _dag_run_cancelled(r: RecordedEvent, e: ev.DagRunCancelled) -> tuple[str, Args]:
    return "project_dag_run_cancelled", (r.stream_id, r.occurred_at, r.version)


def _dag_run_retried(r: RecordedEvent, e: ev.DagRunRetriedFromNode) -> tuple[str, Args]:
    return "project_dag_run_retried", (r.stream_id, e.reset, r.occurred_at, r.version)


def _dag_run_finished(r: RecordedEvent, e: ev.DagRunFinished) -> tuple[str, Args]:
    return "project_dag_run_finished", (r.stream_id, e.outcome, r.occurred_at, r.version)


def _json_or_none(document: Any) -> str | None:
    return None if document is None else _json.encode(document).decode()


def _version_only(r: RecordedEvent, e: ev.Event) -> tuple[str, Args]:
    return "project_version_only", (r.stream_id, r.version)


def _unknown(r: RecordedEvent, e: ev.Event) -> tuple[str, Args]:
    """An event of a type this release does not know (a newer release's): only its stream's
    version moves, so this release's next append to the stream follows it."""
    ignoring(e, "projections", stream_id=r.stream_id, version=r.version)
    return "project_unknown", (r.stream_id, r.version, r.stream_type)


PROJECTORS: dict[type[ev.Event], Callable[[RecordedEvent, Any], tuple[str, Args]]] = {
    ev.TenantCreated: _tenant_created,
    ev.ApiKeyIssued: _api_key_issued,
    ev.ApiKeyRevoked: _api_key_revoked,
    ev.LimitSet: _limit_set,
    ev.RetentionSet: _retention_set,
    ev.PoolPaused: _pool_control,
    ev.PoolResumed: _pool_control,
    ev.JobCreated: _job_created,
    ev.OccurrenceFired: _occurrence_fired,
    ev.OccurrencesSkipped: _occurrences_skipped,
    ev.OccurrenceMissed: _job_version_only,
    ev.LedgerSlotMissing: _ledger_slot_missing,
    ev.LedgerSlotResolved: _ledger_slot_resolved,
    ev.LedgerDisagreement: _job_version_only,
    ev.LedgerScheduleUnreadable: _job_version_only,
    ev.CompletionOverdue: _completion_overdue,
    ev.JobPaused: _job_paused,
    ev.JobResumed: _job_resumed,
    ev.JobUpdated: _job_updated,
    ev.BackfillRequested: _job_version_only,
    ev.JobDeleted: _job_deleted,
    ev.CalendarDefined: _calendar_defined,
    ev.RunScheduled: _run_scheduled,
    ev.RunAmended: _run_amended,
    ev.RunQueued: _run_queued,
    ev.RunStarted: _run_started,
    ev.RunSucceeded: _run_succeeded,
    ev.RunFailed: _run_failed,
    ev.AttemptTimedOut: _attempt_timed_out,
    ev.LeaseExpired: _lease_expired,
    ev.LeaseReleased: _lease_released,
    ev.RetryScheduled: _retry_scheduled,
    ev.RetryDue: _retry_due,
    ev.RunDeadLettered: _dead_lettered,
    ev.CancelRequested: _cancel_requested,
    ev.RunCancelled: _cancelled,
    ev.QueueWaitExpired: _version_only,
    ev.RunRepublished: _republished,
    ev.DeadLetterTriaged: _triaged,
    ev.DeadLetterReplayed: _replayed,
    ev.StaleWriteRejected: _version_only,
    ev.StepCompleted: _step_recorded,
    ev.StepFailed: _step_recorded,
    ev.AttributesUpserted: _attributes_upserted,
    ev.RunSuspended: _suspended,
    ev.RunWoken: _woken,
    ev.TimerFired: _timer_fired,
    ev.SignalReceived: _signal_received,
    ev.SignalDelivered: _signal_delivered,
    ev.SignalTimedOut: _signal_timed_out,
    ev.ChildStarted: _child_started,
    ev.ChildFinished: _child_finished,
    ev.ParentNotified: _parent_notified,
    ev.FanOutStarted: _fan_out_started,
    ev.FanOutProgressed: _fan_out_progressed,
    ev.FanOutCompleted: _fan_out_completed,
    ev.RunStuck: _stuck,
    ev.RunPaused: _paused,
    ev.RunResumed: _resumed,
    ev.StepRetried: _steps_set_aside,
    ev.RunRestarted: _steps_set_aside,
    ev.StepSkipped: _step_skipped,
    ev.RunReopened: _reopened,
    ev.RunMarkedSucceeded: _marked_succeeded,
    ev.RunMarkedFailed: _marked_failed,
    ev.RunHeld: _run_held,
    ev.RunReleased: _run_released,
    ev.DagDefined: _dag_defined,
    ev.DagRunStarted: _dag_run_started,
    ev.DagNodeReady: _dag_node_ready,
    ev.DagNodeFinished: _dag_node_ended,
    ev.DagNodeSkipped: _dag_node_ended,
    ev.DagRunCancelled: _dag_run_cancelled,
    ev.DagRunRetriedFromNode: _dag_run_retried,
    ev.DagRunFinished: _dag_run_finished,
}


# The writes of the events every run goes through: one array per value, so a batch is one
# statement rather than one execution per row (readmodels.sql).
COLUMNAR = frozenset({"project_job_created", "project_occurrence_fired", "project_run_scheduled",
                      "project_run_queued", "project_run_started", "project_run_succeeded"})


# Run events after which a run holds a dispatch slot exactly when it held one before (scheduled
# stays slot-less, queued → running keeps it); after any other, run_slots follows the run.
SLOT_UNCHANGED = frozenset({ev.RunScheduled, ev.RunAmended, ev.RunStarted, ev.StepCompleted,
                            ev.StepFailed,
                            ev.AttributesUpserted,
                            ev.TimerFired, ev.SignalReceived, ev.SignalDelivered,
                            ev.SignalTimedOut, ev.ChildStarted, ev.ChildFinished,
                            ev.ParentNotified, ev.RunPaused, ev.RunResumed,
                            ev.FanOutStarted, ev.FanOutProgressed, ev.FanOutCompleted,
                            ev.RunStuck, ev.StepRetried, ev.StepSkipped, ev.RunRestarted,
                            ev.RunReopened, ev.RunMarkedFailed, ev.RunHeld,
                            ev.RunReleased})


# Run events that also write their job's row, and do not commute across the job's runs: a
# success ends the job's streak of failures (consecutive_failures = 0), a dead letter lengthens
# it (+ 1). Live, they apply in commit order; `apply` keeps their order in a batch (a rebuild's
# page is one), so the streak is the same live and rebuilt.
STREAK: dict[type[ev.Event], int] = {ev.RunSucceeded: 0, ev.RunDeadLettered: 1}


SIDED = frozenset({ev.RunScheduled, ev.JobCreated})  # the events `_side_rows` may write for


def _side_rows(r: RecordedEvent) -> list[tuple[str, Args]]:
    """What a created job or run writes beside its row (after it, in the same round), only
    when it has some: its searchable attributes, a run's workflow id (run_workflow_ids, a side
    table so `runs` keeps the shape the previous release reads)."""
    also: list[tuple[str, Args]] = []
    e = r.event
    if isinstance(e, ev.RunScheduled) and e.workflow_id is not None:
        also.append(("project_run_workflow_id", (r.stream_id, r.tenant_id, e.task,
                                                 e.workflow_id, r.occurred_at, r.seq)))
    one = _searchable_of(r)
    if one is not None:
        also.append(one)
    return also


def _searchable_of(r: RecordedEvent) -> tuple[str, Args] | None:
    e = r.event
    if isinstance(e, ev.RunScheduled) and e.attributes:
        return "project_run_attributes", (r.stream_id, r.tenant_id, e.scheduled_for,
                                          e.attributes)
    if isinstance(e, ev.JobCreated) and e.attributes:
        return "project_job_attributes", (r.stream_id, r.tenant_id, e.attributes)
    return None


def _rounds(recorded: Sequence[RecordedEvent]) -> list[int]:
    """Each event's round in `apply`: after its stream's previous event; a streak event
    (STREAK) after every earlier one of the other kind (a success after the dead letters before
    it, and the reverse), while events of one kind still share rounds (they commute); a
    CompletionOverdue after the earlier events of the run or DAG run it marks."""
    rounds: list[int] = []
    seen: dict[object, int] = defaultdict(int)  # a stream's next round
    last = [-1, -1]  # the latest round of a success, of a dead letter
    for r in recorded:
        k = seen[r.stream_id]
        kind = STREAK.get(type(r.event))
        if kind is not None:
            k = max(k, last[1 - kind] + 1)
            last[kind] = max(last[kind], k)
        elif isinstance(r.event, ev.CompletionOverdue):
            k = max(k, seen.get(r.event.run_id or r.event.dag_run_id, 0))
        seen[r.stream_id] = k + 1
        rounds.append(k)
    return rounds


async def apply(conn: asyncpg.Connection, recorded: Sequence[RecordedEvent]) -> None:
    """Bring the read models up to date with `recorded`, with as few statements as possible.

    Events go into rounds (`_rounds`: each stream's in version order, and the few that write
    another stream's row after what they depend on), and within a round the rows of one
    statement are sent together (one columnar statement, or executemany), so a batch gives the
    rows its events give one by one. Last, `run_slots` follows the runs whose state may have
    changed.
    """
    rounds: list[dict[str, list[Args]]] = []
    for r, k in zip(recorded, _rounds(recorded), strict=True):
        while len(rounds) <= k:
            rounds.append(defaultdict(list))
        kind = type(r.event)
        name, args = PROJECTORS.get(kind, _unknown)(r, r.event)
        rounds[k][name].append(args)
        if kind in SIDED:
            for name, args in _side_rows(r):
                rounds[k][name].append(args)
    moved = [r.stream_id for r in recorded
             if r.stream_type == "run" and type(r.event) not in SLOT_UNCHANGED]
    for statements in rounds:
        for name, rows in statements.items():
            if name in COLUMNAR:
                await conn.execute(Q[name], *map(list, zip(*rows, strict=True)))
            elif len(rows) == 1:
                await conn.execute(Q[name], *rows[0])
            else:
                await conn.executemany(Q[name], rows)
    if moved:
        await conn.execute(Q["sync_run_slots"], moved)


async def snapshot(conn: asyncpg.Connection) -> dict[str, list[dict[str, Any]]]:
    """All read-model rows, for comparing live and rebuilt state."""
    return {
        table: [dict(r) for r in await conn.fetch(Q[f"snapshot_{table}"])]
        for table in ("tenants", "api_keys", "jobs", "job_definitions", "runs",
                      "occurrence_skips", "job_pauses",
                      "calendars", "dead_letters", "limits", "pool_controls", "run_slots",
                      "run_steps", "run_signals", "run_steps_set_aside", "fan_outs", "dags",
                      "dag_versions", "dag_runs", "dag_run_nodes", "start_lag_minutes",
                      "run_attributes", "run_attribute_numbers", "job_attributes",
                      "run_workflow_ids", "tenant_retention", "run_holds")
    }
