-- Read models: the only SQL that writes or reads tenants, api_keys, jobs and runs.
-- Writes (project_*) take every value from the event, never from now(), so a rebuild
-- from the log reproduces the same rows. The writes of the events every run goes through
-- take one array per value (readmodels.py COLUMNAR): one statement for a whole batch.

-- name: project_tenant_created
-- TenantCreated
INSERT INTO tenants (id, name, weight, created_at, version) VALUES ($1, $2, $3, $4, $5);

-- name: project_api_key_issued
-- ApiKeyIssued
WITH k AS (INSERT INTO api_keys (key_hash, tenant_id, role, created_at)
           VALUES (decode($2, 'hex'), $1, $3, $4))
UPDATE tenants SET version = $5 WHERE id = $1;

-- name: project_job_created
-- JobCreated (columnar)
INSERT INTO jobs (id, tenant_id, name, task, status, schedule, payload_ref, pool, priority,
                  idempotency_key, traceparent, next_run_at, runs_created, created_at, updated_at,
                  version, kind, next_slot, calendar, overlap, retry_policy, timeout_seconds,
                  queue_wait_seconds, on_queue_wait, shard, concurrency_key, resource)
SELECT id, tenant_id, name, task, CASE WHEN next_run_at IS NULL THEN 'completed' ELSE 'active' END,
       schedule::json, payload_ref, pool, priority, idempotency_key, traceparent, next_run_at, 0,
       created_at, created_at, version, kind, coalesce(next_slot, next_run_at), calendar, overlap,
       retry_policy::json, timeout_seconds, queue_wait_seconds, on_queue_wait, shard,
       concurrency_key, resource
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::uuid[], $7::text[],
            $8::text[], $9::text[], $10::timestamptz[], $11::timestamptz[], $12::int[],
            $13::text[], $14::text[], $15::timestamptz[], $16::text[], $17::text[], $18::text[],
            $19::float8[], $20::float8[], $21::text[], $22::smallint[], $23::text[], $24::text[])
     AS r(id, tenant_id, name, task, schedule, payload_ref, pool, priority, idempotency_key,
          next_run_at, created_at, version, traceparent, kind, next_slot, calendar, overlap,
          retry_policy, timeout_seconds, queue_wait_seconds, on_queue_wait, shard,
          concurrency_key, resource);

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
                  replay_of, concurrency_key, resource)
SELECT id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for, 'scheduled', 0, 0,
       occurred_at, occurred_at, version, trigger, coalesce(due_at, scheduled_for), traceparent,
       retry_policy::json, timeout_seconds, queue_wait_seconds, on_queue_wait, replay_of,
       concurrency_key, resource
FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::uuid[],
            $8::timestamptz[], $9::timestamptz[], $10::int[], $11::text[], $12::timestamptz[],
            $13::text[], $14::text[], $15::float8[], $16::float8[], $17::text[], $18::uuid[],
            $19::text[], $20::text[])
     AS r(id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for, occurred_at,
          version, trigger, due_at, traceparent, retry_policy, timeout_seconds,
          queue_wait_seconds, on_queue_wait, replay_of, concurrency_key, resource);

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
UPDATE runs SET state = 'running', attempt = r.attempt, fencing_token = r.fencing_token,
                worker_id = r.worker_id, started_at = r.occurred_at, updated_at = r.occurred_at,
                version = r.version, traceparent = coalesce(r.traceparent, runs.traceparent)
FROM unnest($1::uuid[], $2::int[], $3::bigint[], $4::text[], $5::timestamptz[], $6::int[],
            $7::text[]) AS r(id, attempt, fencing_token, worker_id, occurred_at, version,
                             traceparent)
WHERE runs.id = r.id;

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
    INSERT INTO dead_letters (run_id, tenant_id, job_id, task, reason, error_type, message,
                              attempts, dead_lettered_at, triage_state)
    SELECT id, tenant_id, job_id, task, $4, $5, $6, $7, $2, 'new' FROM run
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

-- name: truncate_read_models
-- Before a rebuild: read models only, never the log.
TRUNCATE api_keys, runs, jobs, tenants, occurrence_skips, job_pauses, calendars, dead_letters,
         limits, pool_controls, run_slots;

-- name: tenant_by_key_hash
-- Authenticate an API key by its hash.
SELECT k.tenant_id, k.role, t.name FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
WHERE k.key_hash = $1;

-- name: tenant_by_name
-- Tenant names are unique.
SELECT id FROM tenants WHERE name = $1;

-- name: lock_job
-- Writers lock the job row before appending to its stream.
SELECT id, tenant_id, status, version FROM jobs WHERE id = $1 AND tenant_id = $2 FOR UPDATE;

-- name: claim_due_jobs
-- The scheduler's poll: due active jobs of the given shards, oldest first, small batches; SKIP
-- LOCKED gives each due job to exactly one scheduler transaction. Candidates: the oldest $2 of
-- each shard (the oldest $2 of all are among them), read without locks by one ordered descent
-- of jobs_due (shard, next_run_at) per shard, so a poll costs the same with 100 or 100,000 jobs
-- due (`shard = ANY(...) ORDER BY next_run_at` over the whole index would fetch and sort every
-- due job); of those the oldest 2 x $2, and of them the oldest $2 not locked by another
-- claimer are locked. Shards are always named: an "IS NULL OR" would make the generic plan a
-- sequential scan. When nothing at all is due, one descent of jobs_next_due (the EXISTS, run
-- once) skips the per-shard descents: an idle poll costs the same with or without future jobs.
WITH candidates AS MATERIALIZED (
    SELECT c.id
    FROM unnest($4::smallint[]) AS s (shard),
         LATERAL (SELECT id, next_run_at FROM jobs
                  WHERE status = 'active' AND next_run_at IS NOT NULL AND shard = s.shard
                    AND next_run_at <= coalesce($1::timestamptz, now())
                    AND NOT (id = ANY($3::uuid[]))
                  ORDER BY next_run_at
                  LIMIT $2) AS c
    WHERE EXISTS (SELECT FROM jobs
                  WHERE status = 'active' AND next_run_at IS NOT NULL
                    AND next_run_at <= coalesce($1::timestamptz, now()))
    ORDER BY c.next_run_at
    LIMIT $2 * 2
)
SELECT j.id, j.tenant_id, j.task, j.pool, j.priority, j.payload_ref, j.next_run_at, j.next_slot,
       j.schedule, j.traceparent, j.version, j.calendar, j.overlap, j.resume_policy,
       j.consecutive_failures, j.retry_policy, j.timeout_seconds, j.queue_wait_seconds,
       j.on_queue_wait, j.shard, j.concurrency_key, j.resource
FROM candidates JOIN jobs j ON j.id = candidates.id
-- Re-checked on the locked row, and written so that no index can serve it: the planner's
-- histogram of next_run_at was taken while these jobs were in the future, so it believes almost
-- none are due and would otherwise scan jobs_due for every candidate instead of the primary key.
WHERE (j.status = 'active' AND j.next_run_at <= coalesce($1::timestamptz, now())) IS TRUE
ORDER BY j.next_run_at
LIMIT $2
FOR UPDATE OF j SKIP LOCKED;

-- name: lock_runs
-- Writers lock the runs they are about to move, to read state and version consistently.
SELECT id, tenant_id, job_id, task, pool, priority, state, attempt, fencing_token, payload_ref,
       scheduled_for, due_at, traceparent, version, failures, retry_policy, cancel_requested,
       timeout_seconds, queue_wait_seconds, on_queue_wait, worker_id, started_at, last_error
FROM runs WHERE id = ANY($1::uuid[])
ORDER BY id
FOR UPDATE;

-- name: claim_ready_runs
-- Worker claim: one tenant's queued runs in the given pools, oldest first (index runs_ready,
-- migration 0011 says why it must stay); SKIP LOCKED lets concurrent claims take different runs.
SELECT id, tenant_id, job_id, task, pool, state, attempt, fencing_token, payload_ref,
       scheduled_for, due_at, traceparent, timeout_seconds, version
FROM runs
WHERE tenant_id = $1 AND pool = ANY($2::text[]) AND state = 'queued'
  AND ($3::text[] IS NULL OR task = ANY($3::text[]))
ORDER BY queued_at, id
LIMIT $4
FOR UPDATE SKIP LOCKED;

-- name: claim_ready_runs_any_tenant
-- Shared worker claim: queued runs of any tenant in the given pools, oldest first (index
-- runs_ready_pool); SKIP LOCKED lets concurrent claims take different runs.
SELECT id, tenant_id, job_id, task, pool, state, attempt, fencing_token, payload_ref,
       scheduled_for, due_at, traceparent, timeout_seconds, version
FROM runs
WHERE pool = ANY($1::text[]) AND state = 'queued'
  AND ($2::text[] IS NULL OR task = ANY($2::text[]))
ORDER BY queued_at, id
LIMIT $3
FOR UPDATE SKIP LOCKED;

-- name: stuck_runs
-- Reconciler: runs in a waiting state whose last change is older than the threshold.
SELECT state, count(*) AS n, min(updated_at) AS oldest
FROM runs
WHERE state IN ('scheduled', 'queued') AND updated_at < coalesce($1::timestamptz, now()) - $2::interval
GROUP BY state;

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

-- name: lock_calendar
-- Writers lock a calendar before redefining it.
SELECT id, version FROM calendars WHERE id = $1 AND tenant_id = $2 FOR UPDATE;

-- name: calendars_by_id
-- The scheduler's batch lookup of the calendars its due jobs name.
SELECT tenant_id, name, dates FROM calendars WHERE id = ANY($1::uuid[]);

-- name: active_runs_of_jobs
-- Overlap policy: how many runs of each job are not yet final.
SELECT job_id, count(*) AS active FROM runs
WHERE job_id = ANY($1::uuid[])
  AND state NOT IN ('succeeded', 'dead_lettered', 'cancelled', 'failed')
GROUP BY job_id;

-- name: runs_of_job_between
-- Backfill and the reconciler: the slots of a job that already have a run.
SELECT scheduled_for FROM runs
WHERE job_id = $1 AND scheduled_for >= $2 AND scheduled_for < $3 AND trigger <> 'manual';

-- name: skips_of_job_between
-- The reconciler: recorded skips overlapping a window.
SELECT first_slot, last_slot, slots, reason FROM occurrence_skips
WHERE job_id = $1 AND last_slot >= $2 AND first_slot < $3;

-- name: pauses_of_job
-- The reconciler: a job's pause history.
SELECT paused_at, resumed_at FROM job_pauses WHERE job_id = $1 ORDER BY paused_at;

-- name: recurring_jobs
-- The reconciler's sweep: active and paused recurring jobs.
SELECT id, tenant_id, schedule, status, next_slot, next_run_at, created_at, version
FROM jobs
WHERE kind IN ('cron', 'every') AND status IN ('active', 'paused')
ORDER BY id
LIMIT $1 OFFSET $2;

-- name: oldest_due
-- The reconciler: the oldest due instant of an active job not yet materialised.
-- One descent of jobs_due (shard, next_run_at) per shard ($2 shards): min() over the whole
-- partial index would read every future job.
SELECT min(first.next_run_at) AS oldest
FROM generate_series(0, $2::int - 1) AS s (shard),
     LATERAL (SELECT next_run_at FROM jobs
              WHERE status = 'active' AND next_run_at IS NOT NULL AND shard = s.shard
              ORDER BY next_run_at LIMIT 1) AS first
WHERE first.next_run_at <= coalesce($1::timestamptz, now());

-- name: lock_job_for_repair
-- The reconciler locks a job before recording what it found and repaired.
SELECT id, tenant_id, task, pool, priority, payload_ref, next_run_at, next_slot, version,
       retry_policy, timeout_seconds, queue_wait_seconds, on_queue_wait, concurrency_key, resource
FROM jobs WHERE id = $1 FOR UPDATE;

-- name: jobs_by_idempotency_keys
-- Batch submission: the jobs some idempotency keys already name.
SELECT id, idempotency_key, next_run_at FROM jobs
WHERE tenant_id = $1 AND idempotency_key = ANY($2::text[]);

-- name: calendar_names
-- Batch submission: which of these calendars exist.
SELECT name FROM calendars WHERE tenant_id = $1 AND name = ANY($2::text[]);

-- name: claim_due_retries
-- The scheduler's retry poll: runs whose next attempt is due (partial index runs_retry_due).
SELECT id, tenant_id, pool, traceparent, version, state FROM runs
WHERE state = 'retry_scheduled' AND retry_at <= coalesce($1::timestamptz, now())
ORDER BY retry_at
LIMIT $2
FOR UPDATE SKIP LOCKED;

-- name: cancel_flags
-- Heartbeat answers: which of these runs have a cancel requested.
SELECT id FROM runs WHERE id = ANY($1::uuid[]) AND cancel_requested;

-- name: timed_out_runs
-- Reconciler: running attempts past their timeout (plus a grace for the worker's own report).
SELECT id FROM runs
WHERE state = 'running' AND timeout_seconds IS NOT NULL
  AND started_at + make_interval(secs => timeout_seconds) + $2::interval
      < coalesce($1::timestamptz, now())
LIMIT $3;

-- name: queue_wait_expired
-- Reconciler: runs not started within their job's queue-wait deadline.
SELECT id FROM runs
WHERE state IN ('scheduled', 'queued', 'retry_scheduled') AND queue_wait_seconds IS NOT NULL
  AND due_at + make_interval(secs => queue_wait_seconds) < coalesce($1::timestamptz, now())
LIMIT $2;

-- name: waiting_candidates
-- The dispatcher's snapshot: the oldest $1 waiting runs of every (tenant, pool, class). The
-- groups are found by a loose index scan of runs_dispatchable, so a long backlog in one group
-- costs one index descent, not a scan of the backlog.
WITH RECURSIVE grp AS (
    (SELECT tenant_id, pool, priority FROM runs
     WHERE state = 'scheduled' OR (state = 'retry_scheduled' AND retry_at IS NULL)
     ORDER BY tenant_id, pool, priority LIMIT 1)
    UNION ALL
    SELECT nxt.* FROM grp, LATERAL (
        SELECT tenant_id, pool, priority FROM runs
        WHERE (state = 'scheduled' OR (state = 'retry_scheduled' AND retry_at IS NULL))
          AND (tenant_id, pool, priority) > (grp.tenant_id, grp.pool, grp.priority)
        ORDER BY tenant_id, pool, priority LIMIT 1) nxt
)
SELECT c.id, grp.tenant_id, grp.pool, grp.priority, c.task, c.concurrency_key, c.resource,
       c.updated_at
FROM grp, LATERAL (
    SELECT id, task, concurrency_key, resource, updated_at FROM runs
    WHERE (state = 'scheduled' OR (state = 'retry_scheduled' AND retry_at IS NULL))
      AND tenant_id = grp.tenant_id AND pool = grp.pool AND priority = grp.priority
    ORDER BY updated_at, id LIMIT $1) c;

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
