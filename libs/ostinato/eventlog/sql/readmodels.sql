-- Read models: the only SQL that writes tenants, api_keys, jobs, runs and run_steps (their
-- reads are the stores', libs/ostinato/stores/sql). Writes (project_*) take every value from
-- the event, never from now(), so a rebuild from the log reproduces the same rows. The writes
-- of the events every run goes through take one array per value (readmodels.py COLUMNAR): one
-- statement for a whole batch.

-- name: project_tenant_created
-- TenantCreated
INSERT INTO tenants (id, name, weight, created_at, version) VALUES ($1, $2, $3, $4, $5);

-- name: project_api_key_issued
-- ApiKeyIssued (a key of the one-key era has no key_id: its id is its hash's first 16 bytes)
WITH k AS (INSERT INTO api_keys (key_hash, tenant_id, role, created_at, id, name, pools)
           VALUES (decode($2, 'hex'), $1, $3, $4,
                   coalesce($6::uuid, encode(substring(decode($2, 'hex') FROM 1 FOR 16), 'hex')::uuid),
                   $7, $8))
UPDATE tenants SET version = $5 WHERE id = $1;

-- name: project_api_key_revoked
-- ApiKeyRevoked: the earliest revocation wins (a revoke during a rotation's grace ends it)
WITH k AS (UPDATE api_keys SET revoked_at = least(coalesce(revoked_at, $3), $3)
           WHERE id = $2 AND tenant_id = $1)
UPDATE tenants SET version = $4 WHERE id = $1;

-- name: project_job_created
-- JobCreated (columnar)
INSERT INTO jobs (id, tenant_id, name, task, status, schedule, payload_ref, pool, priority,
                  idempotency_key, traceparent, next_run_at, runs_created, created_at, updated_at,
                  version, kind, next_slot, calendar, overlap, retry_policy, timeout_seconds,
                  queue_wait_seconds, on_queue_wait, shard, concurrency_key, resource,
                  payload_version, request_hash, complete_within_seconds, max_staleness_seconds,
                  owner)
SELECT id, tenant_id, name, task, CASE WHEN next_run_at IS NULL THEN 'completed' ELSE 'active' END,
       schedule::json, payload_ref, pool, priority, idempotency_key, traceparent, next_run_at, 0,
       created_at, created_at, version, kind, coalesce(next_slot, next_run_at), calendar, overlap,
       retry_policy::json, timeout_seconds, queue_wait_seconds, on_queue_wait, shard,
       concurrency_key, resource, payload_version, request_hash, complete_within_seconds,
       max_staleness_seconds, owner
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::uuid[], $7::text[],
            $8::text[], $9::text[], $10::timestamptz[], $11::timestamptz[], $12::int[],
            $13::text[], $14::text[], $15::timestamptz[], $16::text[], $17::text[], $18::text[],
            $19::float8[], $20::float8[], $21::text[], $22::smallint[], $23::text[], $24::text[],
            $25::int[], $26::text[], $27::float8[], $28::float8[], $29::text[])
     AS r(id, tenant_id, name, task, schedule, payload_ref, pool, priority, idempotency_key,
          next_run_at, created_at, version, traceparent, kind, next_slot, calendar, overlap,
          retry_policy, timeout_seconds, queue_wait_seconds, on_queue_wait, shard,
          concurrency_key, resource, payload_version, request_hash, complete_within_seconds,
          max_staleness_seconds, owner);

-- name: project_completion_overdue
-- CompletionOverdue: a breached run (a DAG job's: its DAG run) is marked so that the deadline
-- check looks at it once, and the job keeps its latest overdue slot (the alert rules' input)
WITH run AS (UPDATE runs SET completion_overdue = true WHERE id = $3),
     dag_run AS (UPDATE dag_runs SET completion_overdue = true WHERE id = $3)
UPDATE jobs SET version = $2,
                last_overdue_slot = greatest(last_overdue_slot, $4::timestamptz)
WHERE id = $1;

-- name: project_ledger_slot_missing
-- LedgerSlotMissing: the job keeps its latest missing slot (the alert rules' input)
UPDATE jobs SET version = $2, last_missing_slot = greatest(last_missing_slot, $3) WHERE id = $1;

-- name: project_ledger_slot_resolved
-- LedgerSlotResolved: a slot recorded missing got its run or skip after all; the job's latest
-- missing slot becomes its latest one not resolved (none: NULL, and OstinatoOccurrenceOmitted
-- resolves). Read from the log itself (this event is already in it) through the partial index
-- events_ledger_slots: a job's few findings, never its whole stream. Rebuilding gives the same
-- row: replayed early, it sees later findings too, and every later one is replayed after it.
UPDATE jobs SET version = $2, last_missing_slot = (
    SELECT max((m.data->>'scheduled_for')::timestamptz) FROM events m
    WHERE m.stream_id = $1 AND m.type = 'LedgerSlotMissing'
      AND NOT EXISTS (SELECT 1 FROM events r
                      WHERE r.stream_id = $1 AND r.type = 'LedgerSlotResolved'
                        AND (r.data->>'scheduled_for')::timestamptz
                            = (m.data->>'scheduled_for')::timestamptz))
WHERE id = $1;

-- name: project_occurrence_fired
-- OccurrenceFired (columnar): a run was created for scheduled_for; the job moves on to
-- next_run_at
UPDATE jobs SET next_run_at = r.next_run_at, next_slot = coalesce(r.next_slot, r.next_run_at),
                last_run_at = greatest(jobs.last_run_at, r.scheduled_for),
                runs_created = jobs.runs_created + 1, resume_policy = NULL,
                status = CASE WHEN r.next_run_at IS NULL AND jobs.status = 'active'
                              THEN 'completed' ELSE jobs.status END,
                updated_at = r.occurred_at, version = r.version
FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[], $5::int[],
            $6::timestamptz[]) AS r(id, next_run_at, scheduled_for, occurred_at, version, next_slot)
WHERE jobs.id = r.id;

-- name: project_occurrences_skipped
-- OccurrencesSkipped: the skipped range is recorded; the job moves on like after a fire
WITH skip AS (
    INSERT INTO occurrence_skips (job_id, tenant_id, first_slot, last_slot, slots, reason,
                                  recorded_at)
    VALUES ($1, $6, $7, $8, $9, $10, $3)
    ON CONFLICT DO NOTHING
)
UPDATE jobs SET next_run_at = $2, next_slot = $5, resume_policy = NULL,
                status = CASE WHEN $2::timestamptz IS NULL AND status = 'active' THEN 'completed'
                              ELSE status END,
                updated_at = $3, version = $4
WHERE id = $1;

-- name: project_job_paused
-- JobPaused
WITH pause AS (
    INSERT INTO job_pauses (job_id, tenant_id, paused_at, reason) VALUES ($1, $4, $2, $5)
)
UPDATE jobs SET status = 'paused', paused_at = $2, updated_at = $2, version = $3 WHERE id = $1;

-- name: project_job_resumed
-- JobResumed: the pause ends; the chosen misfire policy waits for the next plan
WITH pause AS (
    UPDATE job_pauses SET resumed_at = $2, resume_policy = $4
    WHERE job_id = $1 AND resumed_at IS NULL
)
UPDATE jobs SET status = 'active', paused_at = NULL, resume_policy = $4, updated_at = $2,
                version = $3
WHERE id = $1;

-- name: project_job_updated
-- JobUpdated: the job's editable settings as the edit left them (the schedule's derived
-- columns with it), and its definition version. A job done (no next occurrence) is active
-- again when the new schedule has one; paused stays paused.
WITH definition AS (
    INSERT INTO job_definitions (job_id, tenant_id, definition_version, updated_at)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (job_id) DO UPDATE SET definition_version = excluded.definition_version,
                                       updated_at = excluded.updated_at
)
UPDATE jobs SET schedule = $5::text::json, kind = $6, calendar = $7, overlap = $8, payload_ref = $9,
                pool = $10, priority = $11, next_run_at = $12, next_slot = $13,
                retry_policy = $14::text::json, timeout_seconds = $15, queue_wait_seconds = $16,
                on_queue_wait = $17, concurrency_key = $18, resource = $19,
                payload_version = $20, complete_within_seconds = $21,
                max_staleness_seconds = $22, owner = $23,
                status = CASE WHEN $12::timestamptz IS NULL AND status = 'active' THEN 'completed'
                              WHEN $12::timestamptz IS NOT NULL AND status = 'completed'
                              THEN 'active' ELSE status END,
                updated_at = $4, version = $24
WHERE id = $1;

-- name: project_run_amended
-- RunAmended: a run not yet dispatched takes its job's edited settings
UPDATE runs SET payload_ref = $2, pool = $3, priority = $4, retry_policy = $5::text::json,
                timeout_seconds = $6, queue_wait_seconds = $7, on_queue_wait = $8,
                concurrency_key = $9, resource = $10, payload_version = $11, updated_at = $12,
                version = $13
WHERE id = $1;

-- name: snapshot_job_definitions
-- For the rebuild-equality check.
SELECT * FROM job_definitions ORDER BY job_id;

-- name: project_job_version_only
-- Job events that change nothing else (OccurrenceMissed, BackfillRequested)
UPDATE jobs SET version = $2 WHERE id = $1;

-- name: project_calendar_defined
-- CalendarDefined: create or replace
INSERT INTO calendars (id, tenant_id, name, dates, created_at, updated_at, version)
VALUES ($1, $2, $3, $4, $5, $5, $6)
ON CONFLICT (id) DO UPDATE SET dates = excluded.dates, updated_at = excluded.updated_at,
                               version = excluded.version;

-- name: project_job_deleted
-- JobDeleted
UPDATE jobs SET status = 'deleted', next_run_at = NULL, updated_at = $2, version = $3 WHERE id = $1;

-- name: project_run_scheduled
-- RunScheduled (columnar)
INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for, state,
                  attempt, fencing_token, scheduled_at, updated_at, version, trigger, due_at,
                  traceparent, retry_policy, timeout_seconds, queue_wait_seconds, on_queue_wait,
                  replay_of, concurrency_key, resource, parent_run_id, payload_version)
SELECT id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for, 'scheduled', 0, 0,
       occurred_at, occurred_at, version, trigger, coalesce(due_at, scheduled_for), traceparent,
       retry_policy::json, timeout_seconds, queue_wait_seconds, on_queue_wait, replay_of,
       concurrency_key, resource, parent_run_id, payload_version
FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::uuid[],
            $8::timestamptz[], $9::timestamptz[], $10::int[], $11::text[], $12::timestamptz[],
            $13::text[], $14::text[], $15::float8[], $16::float8[], $17::text[], $18::uuid[],
            $19::text[], $20::text[], $21::uuid[], $22::int[])
     AS r(id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for, occurred_at,
          version, trigger, due_at, traceparent, retry_policy, timeout_seconds,
          queue_wait_seconds, on_queue_wait, replay_of, concurrency_key, resource,
          parent_run_id, payload_version);

-- name: project_run_queued
-- RunQueued (columnar)
UPDATE runs SET state = 'queued', pool = r.pool, queued_at = r.occurred_at,
                updated_at = r.occurred_at, version = r.version,
                traceparent = coalesce(r.traceparent, runs.traceparent)
FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::int[], $5::text[])
     AS r(id, pool, occurred_at, version, traceparent)
WHERE runs.id = r.id;

-- name: project_run_started
-- RunStarted (columnar)
-- A pinned run keeps its version (only a worker serving it can claim it anyway).
-- A first attempt's start is also counted in start_lag_minutes, the schedule-lag histogram
-- OstinatoLagSLOBreach reads (migration 0036 defines the minute, the lag and its bucket), in
-- this statement (no extra round trip per claim). Its rows are written in key order, so two
-- claims counting into the same rows lock them in the same order (no deadlock).
WITH started AS (
    UPDATE runs SET state = 'running', attempt = r.attempt, fencing_token = r.fencing_token,
                    worker_id = r.worker_id, started_at = r.occurred_at,
                    updated_at = r.occurred_at, version = r.version,
                    traceparent = coalesce(r.traceparent, runs.traceparent),
                    task_version = CASE WHEN runs.pinned THEN runs.task_version
                                        ELSE r.task_version END,
                    pinned = runs.pinned OR (r.pinned AND r.task_version IS NOT NULL)
    FROM unnest($1::uuid[], $2::int[], $3::bigint[], $4::text[], $5::timestamptz[], $6::int[],
                $7::text[], $8::text[], $9::bool[]) AS r(id, attempt, fencing_token, worker_id,
                                                         occurred_at, version, traceparent,
                                                         task_version, pinned)
    WHERE runs.id = r.id
    RETURNING runs.tenant_id, runs.pool, runs.attempt, runs.started_at,
              greatest(0, extract(epoch FROM runs.started_at
                                  - coalesce(runs.due_at, runs.scheduled_for)))::float8 AS lag
), first_starts AS (
    SELECT date_trunc('minute', started_at, 'UTC') AS minute, tenant_id, pool, lag,
           CASE WHEN lag < 0.001 THEN 0
                ELSE 1 + floor(ln(lag / 0.001) / ln(1.1)) END::smallint AS bucket
    FROM started WHERE attempt = 1
)
INSERT INTO start_lag_minutes (minute, tenant_id, pool, bucket, starts, max_seconds)
SELECT minute, tenant_id, pool, bucket, count(*), max(lag)
FROM first_starts
GROUP BY minute, tenant_id, pool, bucket
ORDER BY minute, tenant_id, pool, bucket
ON CONFLICT (minute, tenant_id, pool, bucket) DO UPDATE
    SET starts = start_lag_minutes.starts + excluded.starts,
        max_seconds = greatest(start_lag_minutes.max_seconds, excluded.max_seconds);

-- name: project_run_succeeded
-- RunSucceeded (columnar): also ends the job's streak of failures (a write only when there is
-- one: most jobs have none)
WITH run AS (
    UPDATE runs SET state = 'succeeded', output_ref = r.output_ref, finished_at = r.occurred_at,
                    updated_at = r.occurred_at, version = r.version,
                    logs_ref = coalesce(r.logs_ref, runs.logs_ref)
    FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::int[], $5::uuid[])
         AS r(id, output_ref, occurred_at, version, logs_ref)
    WHERE runs.id = r.id
    RETURNING runs.job_id
)
UPDATE jobs SET consecutive_failures = 0
FROM run WHERE jobs.id = run.job_id AND jobs.consecutive_failures <> 0;

-- name: project_run_failed
-- RunFailed, AttemptTimedOut, LeaseExpired: the attempt failed; a retry or dead letter follows
UPDATE runs SET state = 'failed', last_error = $2::text::jsonb, finished_at = $3, updated_at = $3,
                version = $4, logs_ref = coalesce($5, logs_ref)
WHERE id = $1;

-- name: project_attempt_revoked
-- LeaseExpired, or AttemptTimedOut found by the reconciler: the attempt failed and its token is
-- revoked (bumped), so the late worker's writes are refused as stale
UPDATE runs SET state = 'failed', last_error = $2::text::jsonb, finished_at = $3, updated_at = $3,
                version = $4, fencing_token = $5
WHERE id = $1;

-- name: project_retry_scheduled
-- RetryScheduled and LeaseReleased: waiting until retry_at
UPDATE runs SET state = 'retry_scheduled', retry_at = $2, failures = coalesce($5, failures),
                updated_at = $3, version = $4
WHERE id = $1;

-- name: project_retry_due
-- RetryDue: handed to the dispatcher; no longer in the scheduler's retry poll
UPDATE runs SET retry_at = NULL, updated_at = $2, version = $3 WHERE id = $1;

-- name: project_run_dead_lettered
-- RunDeadLettered: into the dead-letter queue; counts towards the job's auto-pause threshold
WITH run AS (
    UPDATE runs SET state = 'dead_lettered', finished_at = $2, updated_at = $2, version = $3,
                    failures = greatest(failures, $7)
    WHERE id = $1
    RETURNING id, tenant_id, job_id, task
), letter AS (
    -- a run reopened by an operator (RunReopened) and dead-lettered again: its letter is new
    INSERT INTO dead_letters (run_id, tenant_id, job_id, task, reason, error_type, message,
                              attempts, dead_lettered_at, triage_state)
    SELECT id, tenant_id, job_id, task, $4, $5, $6, $7, $2, 'new' FROM run
    ON CONFLICT (run_id) DO UPDATE SET reason = excluded.reason,
        error_type = excluded.error_type, message = excluded.message,
        attempts = excluded.attempts, dead_lettered_at = excluded.dead_lettered_at,
        triage_state = 'new', triage_by = NULL, triage_comment = NULL, triaged_at = NULL
)
UPDATE jobs SET consecutive_failures = consecutive_failures + 1 FROM run
WHERE jobs.id = run.job_id;

-- name: project_cancel_requested
-- CancelRequested: the worker learns it on its next heartbeat
UPDATE runs SET cancel_requested = true, updated_at = $2, version = $3 WHERE id = $1;

-- name: project_run_cancelled
-- RunCancelled
UPDATE runs SET state = 'cancelled', output_ref = coalesce($4, output_ref), finished_at = $2,
                updated_at = $2, version = $3
WHERE id = $1;

-- name: project_dead_letter_triaged
-- DeadLetterTriaged
WITH letter AS (
    UPDATE dead_letters SET triage_state = $4, triage_comment = $5, triage_by = $6,
                            triaged_at = $2
    WHERE run_id = $1
)
UPDATE runs SET version = $3 WHERE id = $1;

-- name: project_dead_letter_replayed
-- DeadLetterReplayed
WITH letter AS (
    UPDATE dead_letters SET replays = replays + 1, last_replay_run = $4 WHERE run_id = $1
)
UPDATE runs SET version = $3, updated_at = $2 WHERE id = $1;

-- name: project_version_only
-- Events that change no read-model column but the stream version (e.g. StaleWriteRejected)
UPDATE runs SET version = $2 WHERE id = $1;

-- name: project_unknown
-- An event of a type this release does not know (a newer release wrote it): its stream's
-- version only, in the read model of its stream type ($3).
WITH runs_ AS (UPDATE runs SET version = $2 WHERE id = $1 AND $3::text = 'run'),
     jobs_ AS (UPDATE jobs SET version = $2 WHERE id = $1 AND $3::text = 'job'),
     dag_runs_ AS (UPDATE dag_runs SET version = $2 WHERE id = $1 AND $3::text = 'dag_run'),
     dags_ AS (UPDATE dags SET stream_version = $2 WHERE id = $1 AND $3::text = 'dag'),
     tenants_ AS (UPDATE tenants SET version = $2 WHERE id = $1 AND $3::text = 'tenant'),
     calendars_ AS (UPDATE calendars SET version = $2 WHERE id = $1 AND $3::text = 'calendar'),
     pools_ AS (UPDATE pool_controls SET version = $2 WHERE id = $1 AND $3::text = 'pool')
SELECT 1;

-- name: project_step_recorded
-- StepCompleted / StepFailed (and the other records of a position): the step's row, and the
-- run's version, steps done and whether it has a compensation to run (no indexed column
-- changes: the run's row is updated in place).
WITH step AS (
    INSERT INTO run_steps (run_id, seq, tenant_id, name, succeeded, output, output_ref,
                           error_type, message, attempt, tries, duration_ms, recorded_at)
    VALUES ($1, $2, $3, $4, $5, $6::json, $7, $8, $9, $10, $11, $12, $13)
)
UPDATE runs SET version = $14, steps_done = greatest(steps_done, $2 + 1),
                compensable = compensable OR $15
WHERE id = $1;

-- name: project_attributes_upserted
-- AttributesUpserted: the position's row as project_step_recorded writes it ($16 the values
-- set, as stored), and the run's attributes with those names replaced (migration 0043).
WITH step AS (
    INSERT INTO run_steps (run_id, seq, tenant_id, name, succeeded, output, output_ref,
                           error_type, message, attempt, tries, duration_ms, recorded_at)
    VALUES ($1, $2, $3, $4, $5, $6::json, $7, $8, $9, $10, $11, $12, $13)
), attrs AS (
    INSERT INTO run_attributes (run_id, tenant_id, scheduled_for, attributes)
    SELECT id, tenant_id, scheduled_for, $16::jsonb FROM runs WHERE id = $1
    ON CONFLICT (run_id) DO UPDATE SET attributes = run_attributes.attributes || EXCLUDED.attributes
), not_numbers AS (
    DELETE FROM run_attribute_numbers
    WHERE run_id = $1 AND name IN (SELECT key FROM jsonb_each($16::jsonb)
                                   WHERE jsonb_typeof(value) <> 'number')
), numbers AS (
    INSERT INTO run_attribute_numbers (run_id, name, tenant_id, scheduled_for, num)
    SELECT r.id, e.key, r.tenant_id, r.scheduled_for, (e.value #>> '{}')::numeric
    FROM runs r, jsonb_each($16::jsonb) AS e
    WHERE r.id = $1 AND jsonb_typeof(e.value) = 'number'
    ON CONFLICT (run_id, name) DO UPDATE SET num = EXCLUDED.num
)
UPDATE runs SET version = $14, steps_done = greatest(steps_done, $2 + 1),
                compensable = compensable OR $15
WHERE id = $1;

-- name: project_run_attributes
-- RunScheduled with searchable attributes (its job's): the run's row of run_attributes, and
-- one of run_attribute_numbers per number among them.
WITH attrs AS (
    INSERT INTO run_attributes (run_id, tenant_id, scheduled_for, attributes)
    VALUES ($1, $2, $3, $4::jsonb)
    ON CONFLICT (run_id) DO NOTHING
    RETURNING run_id
)
INSERT INTO run_attribute_numbers (run_id, name, tenant_id, scheduled_for, num)
SELECT attrs.run_id, e.key, $2, $3, (e.value #>> '{}')::numeric
FROM attrs, jsonb_each($4::jsonb) AS e
WHERE jsonb_typeof(e.value) = 'number';

-- name: project_job_attributes
-- JobCreated with searchable attributes: the job's row of job_attributes.
INSERT INTO job_attributes (job_id, tenant_id, attributes) VALUES ($1, $2, $3::jsonb)
ON CONFLICT (job_id) DO NOTHING;

-- name: project_run_workflow_id
-- RunScheduled with a workflow id (signal-with-start): the run's row of run_workflow_ids.
INSERT INTO run_workflow_ids (run_id, tenant_id, task, workflow_id, created_at, seq)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (run_id) DO NOTHING;

-- name: snapshot_run_workflow_ids
-- For the rebuild-equality check.
SELECT * FROM run_workflow_ids ORDER BY run_id;

-- name: snapshot_run_attributes
-- For the rebuild-equality check.
SELECT * FROM run_attributes ORDER BY run_id;

-- name: snapshot_run_attribute_numbers
-- For the rebuild-equality check.
SELECT * FROM run_attribute_numbers ORDER BY run_id, name;

-- name: snapshot_job_attributes
-- For the rebuild-equality check.
SELECT * FROM job_attributes ORDER BY job_id;

-- name: project_run_suspended
-- RunSuspended: the attempt ends (its slot is freed by sync_run_slots); what it waits for.
UPDATE runs SET state = 'suspended', wait_reason = $4, wait_seq = $5, wait_name = $6,
                wait_signal = $7, wake_at = $8, deadline_at = $9, wait_child = $10,
                updated_at = $2, version = $3
WHERE id = $1;

-- name: project_run_woken
-- RunWoken: scheduled again, for the dispatcher (updated_at orders its queue), and due again
-- now: a queue-wait deadline counts from the wake-up, not from the run's first due time.
UPDATE runs SET state = 'scheduled', wait_reason = NULL, wait_seq = NULL, wait_name = NULL,
                wait_signal = NULL, wake_at = NULL, deadline_at = NULL, wait_child = NULL,
                due_at = $2,
                updated_at = $2, version = $3
WHERE id = $1;

-- name: project_run_paused
-- RunPaused: the timer and deadline leave the wake poll's index until the run is resumed.
UPDATE runs SET paused = true, paused_at = $2, frozen_wake_at = wake_at,
                frozen_deadline_at = deadline_at, wake_at = NULL, deadline_at = NULL,
                updated_at = $2, version = $3
WHERE id = $1;

-- name: project_run_resumed
-- RunResumed: the timer is due again at the event's wake_at, the deadline comes back.
UPDATE runs SET paused = false, paused_at = NULL, wake_at = $4,
                deadline_at = frozen_deadline_at, frozen_wake_at = NULL,
                frozen_deadline_at = NULL, updated_at = $2, version = $3
WHERE id = $1;

-- name: project_run_stuck
-- RunStuck: the version it was recorded at, so the reconciler records one per stuck episode.
UPDATE runs SET version = $2, stuck_version = $2 WHERE id = $1;

-- name: project_parent_notified
-- ParentNotified: out of the scheduler's poll for finished children (index runs_children_done).
UPDATE runs SET parent_notified = true, version = $2 WHERE id = $1;

-- name: project_signal_received
-- SignalReceived: kept until a wait of its name takes it.
WITH signal AS (
    INSERT INTO run_signals (run_id, signal_id, tenant_id, name, payload, received_at,
                             payload_ref)
    VALUES ($1, $4, $5, $6, $7::json, $2, $8)
)
UPDATE runs SET version = $3 WHERE id = $1;

-- name: project_signal_delivered
-- SignalDelivered: the wait's step row, the signal taken, the run's version and steps done.
WITH step AS (
    INSERT INTO run_steps (run_id, seq, tenant_id, name, succeeded, output, output_ref,
                           error_type, message, attempt, tries, duration_ms, recorded_at)
    VALUES ($1, $2, $3, $4, true, $5::json, $10, NULL, NULL, $6, 1, 0, $7)
), taken AS (
    UPDATE run_signals SET delivered_seq = $2 WHERE run_id = $1 AND signal_id = $8
)
UPDATE runs SET version = $9, steps_done = greatest(steps_done, $2 + 1) WHERE id = $1;

-- name: project_steps_set_aside
-- StepRetried, RunRestarted (operator interventions): the run's records from position $2 on
-- move to run_steps_set_aside under this event's version, the signals their waits took are
-- pending again, and the run has $2 steps done. A paused suspended run no longer waits for
-- what it waited for: it is suspended by its pause at that position (its resume wakes it).
WITH moved AS (
    DELETE FROM run_steps WHERE run_id = $1 AND seq >= $2
    RETURNING run_id, seq, tenant_id, name, succeeded, output, output_ref, error_type, message,
              attempt, tries, duration_ms, recorded_at, supplied_by
), kept AS (
    INSERT INTO run_steps_set_aside (run_id, set_aside_version, seq, tenant_id, name, succeeded,
                                     output, output_ref, error_type, message, attempt, tries,
                                     duration_ms, recorded_at, supplied_by, set_aside_at)
    SELECT run_id, $3, seq, tenant_id, name, succeeded, output, output_ref, error_type, message,
           attempt, tries, duration_ms, recorded_at, supplied_by, $4
    FROM moved
), released AS (
    UPDATE run_signals SET delivered_seq = NULL WHERE run_id = $1 AND delivered_seq >= $2
)
UPDATE runs SET steps_done = $2, version = $3,
    wait_reason = CASE WHEN state = 'suspended' AND paused THEN 'paused' ELSE wait_reason END,
    wait_seq = CASE WHEN state = 'suspended' AND paused THEN $2 ELSE wait_seq END,
    wait_name = CASE WHEN state = 'suspended' AND paused THEN 'paused' ELSE wait_name END,
    wait_signal = CASE WHEN state = 'suspended' AND paused THEN NULL ELSE wait_signal END,
    wait_child = CASE WHEN state = 'suspended' AND paused THEN NULL ELSE wait_child END,
    frozen_wake_at = CASE WHEN state = 'suspended' AND paused THEN NULL ELSE frozen_wake_at END
WHERE id = $1;

-- name: project_step_skipped
-- StepSkipped: the records after position $2, and the one at $2 if any, are set aside as in
-- project_steps_set_aside; the position is recorded as succeeded with the supplied output
-- (attempt 0 and tries 0: it never ran; supplied_by: who supplied it).
WITH moved AS (
    DELETE FROM run_steps WHERE run_id = $1 AND seq > $2
    RETURNING run_id, seq, tenant_id, name, succeeded, output, output_ref, error_type, message,
              attempt, tries, duration_ms, recorded_at, supplied_by
), replaced AS (
    SELECT run_id, seq, tenant_id, name, succeeded, output, output_ref, error_type, message,
           attempt, tries, duration_ms, recorded_at, supplied_by
    FROM run_steps WHERE run_id = $1 AND seq = $2
), kept AS (
    INSERT INTO run_steps_set_aside (run_id, set_aside_version, seq, tenant_id, name, succeeded,
                                     output, output_ref, error_type, message, attempt, tries,
                                     duration_ms, recorded_at, supplied_by, set_aside_at)
    SELECT run_id, $3, seq, tenant_id, name, succeeded, output, output_ref, error_type, message,
           attempt, tries, duration_ms, recorded_at, supplied_by, $4
    FROM (SELECT * FROM moved UNION ALL SELECT * FROM replaced) AS old
), put AS (
    INSERT INTO run_steps (run_id, seq, tenant_id, name, succeeded, output, output_ref,
                           error_type, message, attempt, tries, duration_ms, recorded_at,
                           supplied_by)
    VALUES ($1, $2, $5, $6, true, $7::json, $8, NULL, NULL, 0, 0, 0, $4, $9)
    ON CONFLICT (run_id, seq) DO UPDATE SET name = excluded.name, succeeded = true,
        output = excluded.output, output_ref = excluded.output_ref, error_type = NULL,
        message = NULL, attempt = 0, tries = 0, duration_ms = 0,
        recorded_at = excluded.recorded_at, supplied_by = excluded.supplied_by
), released AS (
    UPDATE run_signals SET delivered_seq = NULL WHERE run_id = $1 AND delivered_seq > $2
)
UPDATE runs SET steps_done = $2 + 1, version = $3,
    wait_reason = CASE WHEN state = 'suspended' AND paused THEN 'paused' ELSE wait_reason END,
    wait_seq = CASE WHEN state = 'suspended' AND paused THEN $2 + 1 ELSE wait_seq END,
    wait_name = CASE WHEN state = 'suspended' AND paused THEN 'paused' ELSE wait_name END,
    wait_signal = CASE WHEN state = 'suspended' AND paused THEN NULL ELSE wait_signal END,
    wait_child = CASE WHEN state = 'suspended' AND paused THEN NULL ELSE wait_child END,
    frozen_wake_at = CASE WHEN state = 'suspended' AND paused THEN NULL ELSE frozen_wake_at END
WHERE id = $1;

-- name: project_run_reopened
-- RunReopened: a dead-lettered run is scheduled again, due now, with a fresh retry budget and
-- nothing to wait for; a child's parent is told again when it ends; its letter is resolved.
WITH run AS (
    UPDATE runs SET state = 'scheduled', finished_at = NULL, failures = 0, retry_at = NULL,
                    due_at = $2, wait_reason = NULL, wait_seq = NULL, wait_name = NULL,
                    wait_signal = NULL, wake_at = NULL, deadline_at = NULL, wait_child = NULL,
                    parent_notified = false, updated_at = $2, version = $3
    WHERE id = $1
)
UPDATE dead_letters SET triage_state = 'fixed', triage_by = $4, triage_comment = $5,
                        triaged_at = $2
WHERE run_id = $1;

-- name: project_run_marked_succeeded
-- RunMarkedSucceeded: succeeded with the operator's output; a dead letter is resolved.
WITH run AS (
    UPDATE runs SET state = 'succeeded', output_ref = $2, finished_at = $3, updated_at = $3,
                    version = $4
    WHERE id = $1
)
UPDATE dead_letters SET triage_state = 'fixed', triage_by = $5, triage_comment = $6,
                        triaged_at = $3
WHERE run_id = $1;

-- name: project_run_marked_failed
-- RunMarkedFailed: the operator's error is the run's last; RunDeadLettered follows.
UPDATE runs SET last_error = $2::text::jsonb, version = $3 WHERE id = $1;

-- name: project_fan_out_started
-- FanOutStarted: the parent's fan-out record, with the first chunks admitted. The gateway
-- reads fan_outs before it starts one, so a position is started once and a parent has one
-- running; a start the lifecycle table allows but that would break either key (the same
-- position again, or another while one runs) is not a record: it changes only the run's
-- version, so its append cannot fail and live and rebuilt rows agree.
WITH f AS (
    INSERT INTO fan_outs (parent_run_id, seq, tenant_id, name, task, pool, priority, total,
                          max_concurrency, on_failure, on_complete, admitted, started_at,
                          version, retry, timeout_seconds)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::text::jsonb,
            $16)
    ON CONFLICT DO NOTHING
)
UPDATE runs SET version = $14 WHERE id = $1;

-- name: project_fan_out_progressed
-- FanOutProgressed: children's ends counted, more chunks admitted, failures listed.
WITH f AS (
    UPDATE fan_outs SET succeeded = succeeded + $3, failed = failed + $4, admitted = $5,
                        failures = failures || $6::text::jsonb, version = $7
    WHERE parent_run_id = $1 AND seq = $2
)
UPDATE runs SET version = $7 WHERE id = $1;

-- name: project_fan_out_completed
-- FanOutCompleted: the record closed, and the position's step row (as project_step_recorded).
WITH f AS (
    UPDATE fan_outs SET state = $16, completion_run_id = $17, finished_at = $13, version = $14
    WHERE parent_run_id = $1 AND seq = $2
), step AS (
    INSERT INTO run_steps (run_id, seq, tenant_id, name, succeeded, output, output_ref,
                           error_type, message, attempt, tries, duration_ms, recorded_at)
    VALUES ($1, $2, $3, $4, $5, $6::json, $7, $8, $9, $10, $11, $12, $13)
)
UPDATE runs SET version = $14, steps_done = greatest(steps_done, $2 + 1),
                compensable = compensable OR $15
WHERE id = $1;

-- name: truncate_read_models
-- Before a rebuild: read models only, never the log.
TRUNCATE api_keys, runs, jobs, job_definitions, tenants, occurrence_skips, job_pauses, calendars, dead_letters,
         limits, pool_controls, run_slots, run_steps, run_signals, run_steps_set_aside,
         fan_outs, dags, dag_versions, dag_runs, dag_run_nodes, start_lag_minutes,
         run_attributes, run_attribute_numbers, job_attributes, run_workflow_ids,
         tenant_retention, run_holds;

-- name: snapshot_start_lag_minutes
-- For the rebuild-equality check (a rebuild brings back minutes the retention deleted live).
SELECT * FROM start_lag_minutes ORDER BY minute, tenant_id, pool, bucket;

-- name: snapshot_tenants
-- For the rebuild-equality check.
SELECT * FROM tenants ORDER BY id;

-- name: snapshot_api_keys
-- For the rebuild-equality check.
SELECT * FROM api_keys ORDER BY key_hash;

-- name: snapshot_jobs
-- For the rebuild-equality check.
SELECT * FROM jobs ORDER BY id;

-- name: snapshot_runs
-- For the rebuild-equality check.
SELECT * FROM runs ORDER BY id;

-- name: snapshot_fan_outs
-- For the rebuild-equality check.
SELECT * FROM fan_outs ORDER BY parent_run_id, seq;

-- name: snapshot_run_steps
-- For the rebuild-equality check.
SELECT * FROM run_steps ORDER BY run_id, seq;

-- name: snapshot_run_steps_set_aside
-- For the rebuild-equality check.
SELECT * FROM run_steps_set_aside ORDER BY run_id, set_aside_version, seq;

-- name: snapshot_run_signals
-- For the rebuild-equality check.
SELECT * FROM run_signals ORDER BY run_id, signal_id;

-- name: snapshot_run_slots
-- For the rebuild-equality check.
SELECT * FROM run_slots ORDER BY run_id;

-- name: snapshot_occurrence_skips
-- For the rebuild-equality check.
SELECT * FROM occurrence_skips ORDER BY job_id, first_slot, reason;

-- name: snapshot_job_pauses
-- For the rebuild-equality check.
SELECT * FROM job_pauses ORDER BY job_id, paused_at;

-- name: snapshot_dead_letters
-- For the rebuild-equality check.
SELECT * FROM dead_letters ORDER BY run_id;

-- name: snapshot_calendars
-- For the rebuild-equality check.
SELECT * FROM calendars ORDER BY id;

-- name: sync_run_slots
-- After the given runs changed state: a queued or running run holds its slot, any other frees
-- it (run_slots, migration 0008).
WITH touched AS (
    SELECT id, tenant_id, pool, priority, task, concurrency_key,
           state IN ('queued', 'running') AS holds
    FROM runs WHERE id = ANY($1::uuid[])
), freed AS (
    DELETE FROM run_slots s USING touched t WHERE s.run_id = t.id AND NOT t.holds
)
INSERT INTO run_slots (run_id, tenant_id, pool, priority, task, concurrency_key)
SELECT id, tenant_id, pool, priority, task, concurrency_key FROM touched WHERE holds
ON CONFLICT (run_id) DO NOTHING;
