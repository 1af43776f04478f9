-- name: run_by_id
-- One run of one tenant.
SELECT * FROM runs WHERE id = $1 AND tenant_id = $2;

-- name: hot_run_ids
-- Which of these runs of one tenant are still in the hot tables (an archived listing leaves
-- them to the hot part: GET /v1/runs?include=archived).
SELECT id FROM runs WHERE id = ANY($1::uuid[]) AND tenant_id = $2;

-- name: list_runs
-- Newest occurrence first, keyset-paginated, one tenant only, optional job and state filters:
-- the tenant's index runs_tenant_created, or with a failed, retrying, dead-lettered or
-- cancelled state runs_tenant_state (0053, partial; planned for the values: stores/runs.py).
SELECT * FROM runs
WHERE tenant_id = $1
  AND ($2::uuid IS NULL OR job_id = $2)
  AND ($3::text IS NULL OR state = $3)
  AND ($4::timestamptz IS NULL OR (scheduled_for, id) < ($4, $5::uuid))
ORDER BY scheduled_for DESC, id DESC
LIMIT $6;

-- name: list_runs_filtered
-- The run list with task, pool, priority class and scheduled-time range [$7, $8) filters (the
-- web UI, GET /v1/runs?priority=); the tenant's newest-first index, a class being a large share.
SELECT * FROM runs
WHERE tenant_id = $1
  AND ($2::uuid IS NULL OR job_id = $2)
  AND ($3::text IS NULL OR state = $3)
  AND ($4::text IS NULL OR task = $4)
  AND ($5::text IS NULL OR pool = $5)
  AND ($6::text IS NULL OR priority = $6)
  AND ($7::timestamptz IS NULL OR scheduled_for >= $7)
  AND ($8::timestamptz IS NULL OR scheduled_for < $8)
  AND ($9::timestamptz IS NULL OR (scheduled_for, id) < ($9, $10::uuid))
ORDER BY scheduled_for DESC, id DESC
LIMIT $11;

-- name: list_runs_by_error_type
-- list_runs_filtered of the runs whose last attempt failed with error type $12 (partial index
-- runs_tenant_error_type, migration 0033: only runs with an error are in it).
SELECT * FROM runs
WHERE tenant_id = $1
  AND last_error IS NOT NULL AND last_error->>'type' = $12
  AND ($2::uuid IS NULL OR job_id = $2)
  AND ($3::text IS NULL OR state = $3)
  AND ($4::text IS NULL OR task = $4)
  AND ($5::text IS NULL OR pool = $5)
  AND ($6::text IS NULL OR priority = $6)
  AND ($7::timestamptz IS NULL OR scheduled_for >= $7)
  AND ($8::timestamptz IS NULL OR scheduled_for < $8)
  AND ($9::timestamptz IS NULL OR (scheduled_for, id) < ($9, $10::uuid))
ORDER BY scheduled_for DESC, id DESC
LIMIT $11;

-- name: list_runs_oldest
-- The run list oldest occurrence first (the web UI's sort by scheduled time), every filter of
-- list_runs_filtered and the error type $12; the tenant's index runs_tenant_created read forward
-- (with one of runs_tenant_state's states, that index read backward).
SELECT * FROM runs
WHERE tenant_id = $1
  AND ($2::uuid IS NULL OR job_id = $2)
  AND ($3::text IS NULL OR state = $3)
  AND ($4::text IS NULL OR task = $4)
  AND ($5::text IS NULL OR pool = $5)
  AND ($6::text IS NULL OR priority = $6)
  AND ($7::timestamptz IS NULL OR scheduled_for >= $7)
  AND ($8::timestamptz IS NULL OR scheduled_for < $8)
  AND ($9::timestamptz IS NULL OR (scheduled_for, id) > ($9, $10::uuid))
  AND ($12::text IS NULL OR (last_error IS NOT NULL AND last_error->>'type' = $12))
ORDER BY scheduled_for, id
LIMIT $11;

-- name: hold_of_run
-- GET /v1/runs/{id}: why this waiting run waits, as of the last decision that looked at it.
SELECT reason FROM dispatch_holds WHERE run_id = $1 AND tenant_id = $2;

-- name: waiting_position
-- GET /v1/runs/{id}: how many runs of the same tenant, pool and class wait ahead of this one
-- (the predicate is the partial index runs_dispatchable's, migration 0007, written alike so
-- that the planner uses it).
SELECT count(*) FROM runs
WHERE (state = 'scheduled' OR (state = 'retry_scheduled' AND retry_at IS NULL))
  AND tenant_id = $1 AND pool = $2 AND priority = $3 AND (updated_at, id) < ($4, $5::uuid);

-- name: lock_runs
-- Writers lock the runs they are about to move, to read state and version consistently.
SELECT id, tenant_id, job_id, task, pool, priority, state, attempt, fencing_token, payload_ref,
       scheduled_for, due_at, traceparent, version, failures, retry_policy, cancel_requested,
       timeout_seconds, queue_wait_seconds, on_queue_wait, worker_id, started_at, last_error,
       steps_done, wait_reason, wait_seq, wait_name, wait_signal, wake_at, deadline_at,
       parent_run_id, wait_child, compensable, paused, paused_at, frozen_wake_at
FROM runs WHERE id = ANY($1::uuid[])
ORDER BY id
FOR UPDATE;

-- name: lock_run_heads
-- The dispatcher locks the runs it queues: their heads (state, version), pool and trace only.
-- Not lock_runs' 36 columns: 1.3 against 5.5 µs of client CPU a row, and the server's share
-- falls alike (bench/README.md, issue 44's second pass).
SELECT id, tenant_id, job_id, pool, state, version, traceparent
FROM runs WHERE id = ANY($1::uuid[])
ORDER BY id
FOR UPDATE;

-- name: lock_reported_runs
-- The gateway locks the runs a batch of outcomes reports on: what recording an outcome reads
-- (the head, the attempt and its token, a failure's retry decision, a chunk's parent), not
-- lock_runs' 36 columns; the retry policy, a JSON document to decode, only when the batch
-- holds a failure ($2).
SELECT id, tenant_id, job_id, pool, state, version, traceparent, attempt, fencing_token,
       cancel_requested, failures, timeout_seconds, started_at, parent_run_id,
       CASE WHEN $2::bool THEN retry_policy END AS retry_policy, task, trigger
FROM runs WHERE id = ANY($1::uuid[])
ORDER BY id
FOR UPDATE;

-- name: claim_ready_runs
-- Worker claim: one tenant's queued runs in the given pools, oldest first (index runs_ready,
-- migration 0011 says why it must stay); SKIP LOCKED lets concurrent claims take different runs.
-- A pinned run only for a worker serving its (task, version) ($5, $6); a run with a payload
-- version only for a worker whose handler accepts it, if the worker constrains the task ($7;
-- accepted pairs $8, $9).
SELECT id, tenant_id, job_id, task, pool, state, attempt, fencing_token, payload_ref,
       scheduled_for, due_at, traceparent, timeout_seconds, version, steps_done,
       cancel_requested, retry_policy, failures, payload_version,
       parent_run_id IS NOT NULL AS awaited
FROM runs
WHERE tenant_id = $1 AND pool = ANY($2::text[]) AND state = 'queued'
  AND ($3::text[] IS NULL OR task = ANY($3::text[]))
  AND (NOT pinned OR (task, task_version) IN (SELECT * FROM unnest($5::text[], $6::text[])))
  AND (payload_version IS NULL OR NOT task = ANY(coalesce($7::text[], '{}'))
       OR (task, payload_version) IN (SELECT * FROM unnest($8::text[], $9::int[])))
ORDER BY queued_at, id
LIMIT $4
FOR UPDATE SKIP LOCKED;

-- name: claim_ready_runs_any_tenant
-- Shared worker claim: queued runs of any tenant in the given pools, oldest first (index
-- runs_ready_pool); SKIP LOCKED lets concurrent claims take different runs.
SELECT id, tenant_id, job_id, task, pool, state, attempt, fencing_token, payload_ref,
       scheduled_for, due_at, traceparent, timeout_seconds, version, steps_done,
       cancel_requested, retry_policy, failures, payload_version,
       parent_run_id IS NOT NULL AS awaited
FROM runs
WHERE pool = ANY($1::text[]) AND state = 'queued'
  AND ($2::text[] IS NULL OR task = ANY($2::text[]))
  AND (NOT pinned OR (task, task_version) IN (SELECT * FROM unnest($4::text[], $5::text[])))
  AND (payload_version IS NULL OR NOT task = ANY(coalesce($6::text[], '{}'))
       OR (task, payload_version) IN (SELECT * FROM unnest($7::text[], $8::int[])))
ORDER BY queued_at, id
LIMIT $3
FOR UPDATE SKIP LOCKED;

-- name: claim_due_retries
-- The scheduler's retry poll: runs whose next attempt is due (partial index runs_retry_due).
SELECT id, tenant_id, pool, traceparent, version, state FROM runs
WHERE state = 'retry_scheduled' AND retry_at <= coalesce($1::timestamptz, now())
ORDER BY retry_at
LIMIT $2
FOR UPDATE SKIP LOCKED;

-- name: any_retry_due
-- Whether a retry is due, by one descent of runs_retry_due: the scheduler asks before it opens a
-- transaction for claim_due_retries, so an idle poll is one read (an ordered LIMIT 1, the head
-- of the index whatever the statistics say; NULLs, runs retried now, sort last).
SELECT coalesce((SELECT retry_at FROM runs WHERE state = 'retry_scheduled'
                 ORDER BY retry_at LIMIT 1)
                <= coalesce($1::timestamptz, now()), false);

-- name: cancel_flags
-- Heartbeat answers: which of these runs have a cancel requested.
SELECT id FROM runs WHERE id = ANY($1::uuid[]) AND cancel_requested;

-- name: stuck_runs
-- Reconciler: runs in a waiting state whose last change is older than the threshold.
SELECT state, count(*) AS n, min(updated_at) AS oldest
FROM runs
WHERE state IN ('scheduled', 'queued') AND updated_at < coalesce($1::timestamptz, now()) - $2::interval
GROUP BY state;

-- name: active_runs_of_jobs
-- Overlap policy: how many runs of each job are not yet final (index runs_job_active). A
-- workflow's children are not occurrences of the job: their parent is.
SELECT job_id, count(*) AS active FROM runs
WHERE job_id = ANY($1::uuid[])
  AND state NOT IN ('succeeded', 'dead_lettered', 'cancelled', 'failed')
  AND parent_run_id IS NULL
GROUP BY job_id;

-- name: runs_of_job_between
-- Backfill and the reconciler: the slots of a job that already have a run (or, for a DAG job,
-- a DAG run: its root nodes are created a moment later, by the scheduler's advance duty). A
-- manual trigger's run or DAG run is dated by its instant and takes no slot.
SELECT scheduled_for FROM runs
WHERE job_id = $1 AND scheduled_for >= $2 AND scheduled_for < $3 AND trigger <> 'manual'
UNION
SELECT scheduled_for FROM dag_runs
WHERE job_id = $1 AND scheduled_for >= $2 AND scheduled_for < $3 AND trigger <> 'manual';

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

-- name: any_dispatchable
-- Whether any run waits for the dispatcher, by one entry of runs_dispatchable (its predicate,
-- written here exactly): a round asks before it opens its transaction, so a wake-up that finds
-- nothing waiting (a slot freed while no run waits for one, an idle interval) is one read.
SELECT EXISTS (SELECT 1 FROM runs
               WHERE state = 'scheduled' OR (state = 'retry_scheduled' AND retry_at IS NULL));

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
       c.updated_at, c.pinned, c.task_version
FROM grp, LATERAL (
    SELECT id, task, concurrency_key, resource, updated_at, pinned, task_version FROM runs
    WHERE (state = 'scheduled' OR (state = 'retry_scheduled' AND retry_at IS NULL))
      AND tenant_id = grp.tenant_id AND pool = grp.pool AND priority = grp.priority
    ORDER BY updated_at, id LIMIT $1) c;

-- name: run_token
-- The worker gateway's check of a read under a lease: whose run it is and its current token.
SELECT id, tenant_id, state, fencing_token FROM runs WHERE id = $1;

-- name: claim_wakeups
-- The scheduler's wake poll: suspended runs whose timer (or signal-wait timeout) or workflow
-- deadline is due, oldest first, by one descent of the partial index runs_wake (migration 0016:
-- its expression and predicate, written here exactly) however many runs sleep; SKIP LOCKED
-- gives each to one scheduler.
SELECT id, tenant_id, state, version, traceparent, wait_reason, wait_seq, wait_name,
       wait_signal, wake_at, deadline_at
FROM runs
WHERE state = 'suspended' AND (wake_at IS NOT NULL OR deadline_at IS NOT NULL)
  AND least(wake_at, deadline_at) <= coalesce($1::timestamptz, now())
ORDER BY least(wake_at, deadline_at)
LIMIT $2
FOR UPDATE SKIP LOCKED;

-- name: any_wakeup_due
-- Whether a suspended run's timer, signal-wait timeout or deadline is due, by one descent of
-- runs_wake: asked before the scheduler opens a transaction for claim_wakeups.
SELECT coalesce((SELECT least(wake_at, deadline_at) FROM runs
                 WHERE state = 'suspended' AND (wake_at IS NOT NULL OR deadline_at IS NOT NULL)
                 ORDER BY least(wake_at, deadline_at) LIMIT 1)
                <= coalesce($1::timestamptz, now()), false);

-- name: suspended_by_reason
-- The reconciler's gauge: suspended workflow runs by what they wait for (index runs_suspended).
SELECT wait_reason, count(*) AS n FROM runs WHERE state = 'suspended' GROUP BY wait_reason;

-- name: overdue_wakeups
-- The reconciler: suspended runs whose due time passed longer ago than the threshold, so the
-- scheduler's wake poll is not keeping up (or not running): a range of index runs_wake.
SELECT count(*) FROM runs
WHERE state = 'suspended' AND (wake_at IS NOT NULL OR deadline_at IS NOT NULL)
  AND least(wake_at, deadline_at) < coalesce($1::timestamptz, now()) - $2::interval;

-- name: children_by_id
-- The child runs among these ids (a parent recording a child step: created already?).
SELECT id, tenant_id, parent_run_id, task, state, version, traceparent, output_ref, last_error,
       parent_notified, trigger
FROM runs WHERE id = ANY($1::uuid[]) AND parent_run_id IS NOT NULL;

-- name: finished_children
-- The scheduler's poll: final children whose parent was not told yet (the partial index
-- runs_children_done, migration 0017: its predicate written here exactly).
SELECT id, tenant_id, parent_run_id, task, state, version, traceparent, output_ref, last_error,
       parent_notified, trigger
FROM runs
WHERE parent_run_id IS NOT NULL AND NOT parent_notified
  AND state IN ('succeeded', 'dead_lettered', 'cancelled')
ORDER BY updated_at
LIMIT $1;

-- name: any_finished_child
-- Whether a final child's parent waits to be told, by one entry of runs_children_done: asked
-- before the scheduler opens a transaction for finished_children.
SELECT (SELECT true FROM runs
        WHERE parent_run_id IS NOT NULL AND NOT parent_notified
          AND state IN ('succeeded', 'dead_lettered', 'cancelled')
        ORDER BY updated_at LIMIT 1) IS NOT NULL;

-- name: lock_children
-- The same children locked (after their parents), still final and not notified.
SELECT id, tenant_id, parent_run_id, task, state, version, traceparent, output_ref, last_error,
       parent_notified, trigger
FROM runs
WHERE id = ANY($1::uuid[]) AND parent_run_id IS NOT NULL AND NOT parent_notified
  AND state IN ('succeeded', 'dead_lettered', 'cancelled')
ORDER BY id
FOR UPDATE SKIP LOCKED;

-- name: lock_runs_free
-- lock_runs, skipping the rows another transaction holds: for a writer that already holds rows
-- those holders may lock after these (a report holding chunk runs locks their parents, which
-- the scheduler's poll and a cancel lock before the children), so waiting could deadlock.
SELECT id, tenant_id, job_id, task, pool, priority, state, attempt, fencing_token, payload_ref,
       scheduled_for, due_at, traceparent, version, failures, retry_policy, cancel_requested,
       timeout_seconds, queue_wait_seconds, on_queue_wait, worker_id, started_at, last_error,
       steps_done, wait_reason, wait_seq, wait_name, wait_signal, wake_at, deadline_at,
       parent_run_id, wait_child, compensable, paused, paused_at, frozen_wake_at
FROM runs WHERE id = ANY($1::uuid[])
ORDER BY id
FOR UPDATE SKIP LOCKED;

-- name: lock_ended_chunks
-- The chunk runs among $1 (a report's, final now in its transaction) and the other ended chunks
-- of the same parents not told yet (a report that found their parent busy left them): locked if
-- free, still final and not told. The others are looked for among the oldest 500 entries of
-- runs_children_done (the final children not told: few, as every end is told at once or by the
-- next poll); the rows are reached by their ids, so neither a parent's many chunks nor a
-- backlog of ends is ever scanned whole.
WITH left_over AS MATERIALIZED (
    SELECT id FROM runs
    WHERE parent_run_id IS NOT NULL AND NOT parent_notified
      AND state IN ('succeeded', 'dead_lettered', 'cancelled')
    ORDER BY updated_at
    LIMIT 500
), candidates AS MATERIALIZED (
    SELECT unnest($1::uuid[]) AS id UNION SELECT id FROM left_over
)
SELECT r.id, r.tenant_id, r.parent_run_id, r.task, r.state, r.version, r.traceparent,
       r.output_ref, r.last_error, r.parent_notified, r.trigger
FROM candidates AS c JOIN runs AS r ON r.id = c.id
WHERE r.parent_run_id IN (SELECT parent_run_id FROM runs WHERE id = ANY($1::uuid[]))
  AND r.trigger = 'fan_out' AND NOT r.parent_notified
  AND r.state IN ('succeeded', 'dead_lettered', 'cancelled')
ORDER BY r.id
FOR UPDATE OF r SKIP LOCKED;

-- name: active_children
-- A cancelled parent's children that are not final yet (index runs_children).
SELECT id FROM runs
WHERE parent_run_id = ANY($1::uuid[])
  AND state NOT IN ('succeeded', 'dead_lettered', 'cancelled')
ORDER BY id;

-- name: children_of
-- One parent's children, one tenant only, in id order after the cursor $3 (index
-- runs_children).
SELECT id, tenant_id, parent_run_id, task, state, version, traceparent, output_ref, last_error,
       parent_notified, trigger
FROM runs WHERE parent_run_id = $1 AND tenant_id = $2 AND ($3::uuid IS NULL OR id > $3)
ORDER BY id
LIMIT $4;

-- name: pausable_runs
-- A filtered pause or resume: one tenant's running (index runs_waiting) and suspended (index
-- runs_suspended) runs of a task or a job, paused or not.
SELECT id FROM runs
WHERE tenant_id = $1 AND ($2::text IS NULL OR task = $2) AND ($3::uuid IS NULL OR job_id = $3)
  AND paused = $4 AND (state = 'running' OR state = 'suspended')
ORDER BY id
LIMIT $5;

-- name: suspended_too_long
-- The reconciler: workflow runs suspended on a signal, a child or a pause with no change for
-- longer than the threshold, per tenant and reason; the index runs_suspended (wait_reason)
-- reads only runs of these reasons, never the sleeping timers (they have due times).
SELECT tenant_id, wait_reason AS reason, count(*) AS n
FROM runs
WHERE state = 'suspended' AND wait_reason IN ('signal', 'child', 'paused')
  AND updated_at < coalesce($1::timestamptz, now()) - $2::interval
GROUP BY tenant_id, wait_reason;

-- name: stuck_runs_by_reason
-- The reconciler: runs stuck, per tenant and reason, with the oldest ($6) of those not yet
-- marked in this stuck episode (a RunStuck at the run's current version). Reasons: a workflow
-- suspended on a signal, a child or a pause longer than $2; waiting on a child dead-lettered
-- longer than $3 ago; pinned to a version no live worker (seen within $5) serves in its pool,
-- for longer than $4; dead-lettered by a failed compensation, until its dead letter is triaged
-- fixed or won't fix.
WITH stuck AS (
    SELECT r.id, r.tenant_id, r.version, r.stuck_version, 'suspended_too_long' AS reason,
           'waiting for ' || CASE r.wait_reason
               WHEN 'signal' THEN 'signal ' || quote_literal(coalesce(r.wait_signal, ''))
               WHEN 'child' THEN 'child run ' || r.wait_child::text
               ELSE 'its resume (paused)' END AS detail,
           r.updated_at AS since
    FROM runs AS r
    WHERE r.state = 'suspended' AND r.wait_reason IN ('signal', 'child', 'paused')
      AND r.updated_at < coalesce($1::timestamptz, now()) - $2::interval
    UNION ALL
    SELECT r.id, r.tenant_id, r.version, r.stuck_version, 'child_dead_lettered',
           'child run ' || c.id::text || ' (' || c.task || ') is dead-lettered: '
               || coalesce(c.last_error->>'type', 'unknown'),
           c.updated_at
    FROM runs AS r JOIN runs AS c ON c.id = r.wait_child AND c.tenant_id = r.tenant_id
    WHERE r.state = 'suspended' AND r.wait_reason = 'child' AND c.state = 'dead_lettered'
      AND c.updated_at < coalesce($1::timestamptz, now()) - $3::interval
    UNION ALL
    SELECT r.id, r.tenant_id, r.version, r.stuck_version, 'no_worker',
           'no worker serves ' || r.task || ' v' || r.task_version || ' in pool ' || r.pool,
           r.updated_at
    FROM runs AS r
    WHERE r.pinned AND r.state IN ('scheduled', 'queued', 'retry_scheduled')
      AND (r.state <> 'retry_scheduled' OR r.retry_at IS NULL)
      AND r.updated_at < coalesce($1::timestamptz, now()) - $4::interval
      AND NOT EXISTS (
          SELECT 1 FROM workers AS w
          WHERE w.seen_at > coalesce($1::timestamptz, now()) - $5::interval
            AND (w.tenant_id = r.tenant_id OR w.tenant_id IS NULL) AND r.pool = ANY(w.pools)
            AND w.versions ->> r.task = r.task_version)
    UNION ALL
    SELECT r.id, r.tenant_id, r.version, r.stuck_version, 'compensation_failed',
           coalesce(d.message, 'a compensation failed'), d.dead_lettered_at
    FROM dead_letters AS d JOIN runs AS r ON r.id = d.run_id
    WHERE d.error_type = 'compensation_failed' AND d.triage_state IN ('new', 'acknowledged')
      AND r.state = 'dead_lettered'
)
SELECT tenant_id, reason, count(*) AS n,
       coalesce((array_agg(id ORDER BY since, id)
                 FILTER (WHERE stuck_version IS DISTINCT FROM version))[1:$6], '{}') AS new_ids,
       coalesce((array_agg(version ORDER BY since, id)
                 FILTER (WHERE stuck_version IS DISTINCT FROM version))[1:$6], '{}') AS versions,
       coalesce((array_agg(detail ORDER BY since, id)
                 FILTER (WHERE stuck_version IS DISTINCT FROM version))[1:$6], '{}') AS details,
       coalesce((array_agg(since ORDER BY since, id)
                 FILTER (WHERE stuck_version IS DISTINCT FROM version))[1:$6], '{}') AS sinces
FROM stuck
GROUP BY tenant_id, reason
ORDER BY tenant_id, reason;

-- name: task_version_counts
-- GET /v1/tasks: a tenant's runs not final, per task and handler version (index
-- runs_task_versions): a pinned or running run counts under its version, a run waiting to
-- start under none (any version may take it).
SELECT task, CASE WHEN pinned OR state = 'running' THEN task_version END AS version,
       count(*) FILTER (WHERE state IN ('scheduled', 'queued', 'retry_scheduled', 'failed'))
           AS waiting,
       count(*) FILTER (WHERE state = 'running') AS running,
       count(*) FILTER (WHERE state = 'suspended') AS suspended
FROM runs
WHERE tenant_id = $1 AND state NOT IN ('succeeded', 'dead_lettered', 'cancelled')
  AND ($2::text IS NULL OR task = $2)
GROUP BY 1, 2
ORDER BY 1, 2 NULLS FIRST;

-- name: upcoming_due
-- The reconciler's scaling signal (ostinato_upcoming_due{pool,window}): what falls due within
-- $2, $3 and $4 from now ($1) per pool, overdue included: each active job's next occurrence
-- (index jobs_next_due; a job counts once per window, its later occurrences are not
-- enumerated), each retry (runs_retry_due) and each workflow timer (runs_wake).
WITH due AS (
    SELECT pool, next_run_at AS at FROM jobs
    WHERE status = 'active' AND next_run_at IS NOT NULL
      AND next_run_at <= coalesce($1::timestamptz, now()) + $4::interval
    UNION ALL
    SELECT pool, retry_at FROM runs
    WHERE state = 'retry_scheduled' AND retry_at <= coalesce($1::timestamptz, now()) + $4::interval
    UNION ALL
    SELECT pool, wake_at FROM runs
    WHERE state = 'suspended' AND (wake_at IS NOT NULL OR deadline_at IS NOT NULL)
      AND least(wake_at, deadline_at) <= coalesce($1::timestamptz, now()) + $4::interval
      AND wake_at <= coalesce($1::timestamptz, now()) + $4::interval
)
SELECT pool,
       count(*) FILTER (WHERE at <= coalesce($1::timestamptz, now()) + $2::interval) AS soon,
       count(*) FILTER (WHERE at <= coalesce($1::timestamptz, now()) + $3::interval) AS later,
       count(*) AS latest
FROM due
GROUP BY pool
ORDER BY pool;

-- name: start_lag_by_minute
-- The pools page's start-lag chart: per pool, class and minute of the runs' slot (scheduled_for
-- from $2 on: the tenant's index runs_tenant_created), p50 and p99 of started_at - due_at over
-- the runs started in their first attempt (a retry's start would count its backoff).
SELECT pool, priority, date_trunc('minute', scheduled_for) AS minute, count(*) AS runs,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY lag) AS p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) AS p99
FROM (SELECT pool, priority, scheduled_for,
             greatest(extract(epoch FROM started_at - coalesce(due_at, scheduled_for)),
                      0)::float8 AS lag
      FROM runs
      WHERE tenant_id = $1 AND scheduled_for >= $2 AND started_at IS NOT NULL AND attempt = 1
     ) s
GROUP BY pool, priority, minute
ORDER BY pool, priority, minute;
