"""Every store query returns exactly the columns of its typed row, in its order (rows are built
positionally, `ostinato.stores.rows`): a migration that adds, drops or renames a column fails
here, not at a caller that reads the row."""

from __future__ import annotations

import asyncpg
import msgspec
import pytest

from ostinato.stores import (
    alerts,
    api_keys,
    audit,
    calendars,
    dags,
    dead_letters,
    deadlines,
    fan_outs,
    health,
    jobs,
    ledger,
    limits,
    operations,
    runs,
    signals,
    steps,
    task_schemas,
    tenants,
    usage,
)

pytestmark = pytest.mark.integration

ROW_OF = {
    (runs, "run_by_id"): runs.RunRow,
    (runs, "list_runs"): runs.RunRow,
    (runs, "list_runs_filtered"): runs.RunRow,
    (jobs, "job_by_id"): jobs.JobRow,
    (jobs, "job_by_idempotency_key"): jobs.JobRow,
    (jobs, "list_jobs"): jobs.JobRow,
    (dead_letters, "list_dead_letters"): dead_letters.DeadLetterRow,
    (dead_letters, "dead_letter_by_id"): dead_letters.DeadLetterRow,
    (dead_letters, "dead_letter_counts"): dead_letters.Count,
    (calendars, "calendar_by_name"): calendars.CalendarRow,
    (calendars, "list_calendars"): calendars.CalendarRow,
    (limits, "limits_of_tenant"): limits.LimitRow,
    (limits, "pool_controls_visible"): limits.PoolControlRow,
    (limits, "waiting_depth"): limits.WaitingLoad,
    (limits, "in_flight_runs"): limits.InFlight,
    (limits, "all_limits"): limits.Limit,
    (limits, "paused_pools"): limits.PausedPool,
    (limits, "lock_pool_control"): limits.PoolControlHead,
    (runs, "lock_runs"): runs.LockedRun,
    (runs, "claim_ready_runs"): runs.ClaimedRun,
    (runs, "claim_ready_runs_any_tenant"): runs.ClaimedRun,
    (runs, "claim_due_retries"): runs.DueRetry,
    (runs, "stuck_runs"): runs.StuckCount,
    (runs, "waiting_candidates"): runs.WaitingRun,
    (jobs, "lock_job"): jobs.JobHead,
    (jobs, "claim_due_jobs"): jobs.DueJob,
    (jobs, "recurring_jobs"): jobs.RecurringJob,
    (jobs, "lock_job_for_repair"): jobs.RepairJob,
    (jobs, "jobs_by_idempotency_keys"): jobs.KeyedJob,
    (jobs, "skips_of_job_between"): jobs.Skip,
    (jobs, "skips_of_job_page"): jobs.Skip,
    (jobs, "pauses_of_job"): jobs.Pause,
    (calendars, "lock_calendar"): calendars.CalendarHead,
    (calendars, "calendars_by_id"): calendars.CalendarDates,
    (api_keys, "authenticate"): api_keys.KeyOwner,
    (api_keys, "list_keys"): api_keys.KeyRow,
    (api_keys, "get_key"): api_keys.KeyRow,
    (tenants, "lock_tenant"): tenants.TenantHead,
    (tenants, "tenant_weights"): tenants.TenantWeight,
    (steps, "steps_of_run"): steps.StepRow,
    (runs, "run_token"): runs.RunToken,
    (runs, "claim_wakeups"): runs.WakingRun,
    (runs, "suspended_by_reason"): runs.SuspendedCount,
    (signals, "pending_signals"): signals.PendingSignal,
    (signals, "signal_by_id"): signals.SignalRow,
    (runs, "children_by_id"): runs.ChildRun,
    (runs, "finished_children"): runs.ChildRun,
    (runs, "lock_children"): runs.ChildRun,
    (runs, "children_of"): runs.ChildRun,
    (runs, "suspended_too_long"): runs.LongWait,
    (steps, "set_aside_steps_of_run"): steps.SetAsideStepRow,
    (runs, "stuck_runs_by_reason"): runs.StuckRuns,
    (runs, "task_version_counts"): runs.TaskVersionCount,
    (runs, "upcoming_due"): runs.UpcomingDue,
    (task_schemas, "register_task_schemas"): task_schemas.RegisteredSchema,
    (task_schemas, "newest_task_schemas"): task_schemas.NewestSchema,
    (task_schemas, "task_schemas_of_scope"): task_schemas.TaskSchemaRow,
    (ledger, "ledger_jobs"): ledger.LedgerJob,
    (ledger, "ledger_runs_of_job"): ledger.LedgerRun,
    (ledger, "ledger_skips_of_job"): ledger.LedgerSkip,
    (audit, "list_audit"): audit.AuditRow,
    (audit, "list_audit_all"): audit.AuditRow,
    (operations, "operation_by_id"): operations.OperationRow,
    (operations, "list_operations"): operations.OperationRow,
    (operations, "claim_running_operation"): operations.OperationRow,
    (operations, "operation_items_after"): operations.Item,
    (operations, "operation_failures_of"): operations.Failure,
    (fan_outs, "fan_outs_of_parents"): fan_outs.FanOutRow,
    (fan_outs, "latest_fan_out"): fan_outs.FanOutRow,
    (dags, "dag_by_id"): dags.DagRow,
    (dags, "dag_by_name"): dags.DagRow,
    (dags, "lock_dag_by_name"): dags.DagRow,
    (dags, "list_dags"): dags.DagRow,
    (dags, "dag_version"): dags.DagVersionRow,
    (dags, "dag_versions_of"): dags.DagVersionRow,
    (dags, "dag_run_by_id"): dags.DagRunRow,
    (dags, "lock_dag_run"): dags.DagRunRow,
    (dags, "lock_dag_runs_skip"): dags.DagRunRow,
    (dags, "dag_runs_of_dag"): dags.DagRunRow,
    (dags, "dag_run_nodes"): dags.DagNodeRow,
    (dags, "current_definitions"): dags.DagCurrent,
    (deadlines, "deadline_overdue_runs"): deadlines.OverdueRun,
    (deadlines, "deadline_stale_jobs"): deadlines.StaleJob,
    (alerts, "alert_dead_letters"): alerts.DeadLetterSignal,
    (alerts, "alert_job_findings"): alerts.FindingSignal,
    (alerts, "alert_stale_jobs"): alerts.StaleSignal,
    (alerts, "alert_stuck_runs"): alerts.StuckSignal,
    (alerts, "alert_auto_paused"): alerts.PausedSignal,
    (alerts, "alerts_firing"): alerts.FiringAlert,
    (alerts, "alert_resolve"): alerts.Resolved,
    (alerts, "alert_states_of_tenant"): alerts.AlertRow,
    (alerts, "sink_put"): alerts.SinkRow,
    (alerts, "sinks_of_tenant"): alerts.SinkRow,
    (alerts, "sinks_for_routing"): alerts.RoutingSink,
    (alerts, "deliveries_due"): alerts.DueDelivery,
    (health, "job_health_runs"): health.RunHealth,
    (health, "job_health_findings"): health.FindingCounts,
    (health, "job_health_dag_runs"): health.RunHealth,
    (usage, "usage_events"): usage.EventUsage,
    (usage, "usage_bytes"): usage.ByteUsage,
    (alerts, "alert_lag_by_pool"): alerts.LagSignal,
    (alerts, "alert_ledger_disagreements"): alerts.DisagreementSignal,
    (runs, "list_runs_by_error_type"): runs.RunRow,
    (runs, "start_lag_by_minute"): runs.StartLag,
    (tenants, "tenants_page"): tenants.TenantRow,
}
# One value per row (or per call), read inside the store: the function returns the values.
SCALAR = {
    (runs, "hold_of_run"), (runs, "waiting_position"), (runs, "cancel_flags"),
    (runs, "active_runs_of_jobs"), (runs, "runs_of_job_between"), (runs, "timed_out_runs"),
    (runs, "queue_wait_expired"), (jobs, "oldest_due"), (jobs, "any_due_jobs"),
    (calendars, "calendar_names"),
    (tenants, "tenant_by_name"), (tenants, "tenant_name"), (api_keys, "count_operators_left"),
    (signals, "database_now"), (runs, "overdue_wakeups"),
    (runs, "active_children"), (runs, "pausable_runs"), (steps, "undone_by_set_aside"),
    (ledger, "ledger_findings_recorded"), (audit, "record_audit"),
    (operations, "insert_operation"), (operations, "set_operation_total"),
    (operations, "count_runs_matching"), (operations, "select_run_items"),
    (operations, "count_letters_matching"), (operations, "select_letter_items"),
    (operations, "count_jobs_matching"), (operations, "select_job_items"),
    (operations, "record_operation_failures"), (operations, "advance_operation"),
    (operations, "cancel_operation"),
    (ledger, "ledger_findings_recorded"),
    (dags, "dag_runs_with_ended_nodes"), (dags, "dag_runs_due"), (dags, "existing_dag_ids"),
    (alerts, "alert_fire"), (alerts, "sink_delete"), (alerts, "delivery_enqueue"),
    (alerts, "delivery_sinks_of_firing"), (alerts, "deliveries_done"),
    (alerts, "deliveries_failed"), (alerts, "deliveries_pending"), (health, "job_last_success"),
    (health, "job_last_dag_success"),
    (dags, "dag_node_of_run"), (dags, "first_starts"),
}


def test_every_store_query_is_accounted_for() -> None:
    stores = (runs, jobs, dead_letters, calendars, limits, tenants, steps, signals,
              task_schemas, ledger, api_keys, audit, operations, fan_outs, dags, deadlines,
              alerts, health, usage)
    named = {(store, name) for store in stores for name in store.Q}
    assert named == set(ROW_OF) | SCALAR


@pytest.mark.parametrize(("store", "name"), list(ROW_OF), ids=lambda x: getattr(x, "__name__", x))
async def test_a_store_query_returns_the_columns_of_its_row(
    pool: asyncpg.Pool, store: object, name: str,
) -> None:
    async with pool.acquire() as conn:
        statement = await conn.prepare(store.Q[name])  # type: ignore[attr-defined]
        columns = [a.name for a in statement.get_attributes()]
    fields = list(msgspec.structs.fields(ROW_OF[(store, name)]))
    assert columns == [f.name for f in fields]  # in order: rows are built positionally
