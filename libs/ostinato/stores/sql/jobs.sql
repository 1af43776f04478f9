-- name: job_by_id
-- One job of one tenant.
SELECT * FROM jobs WHERE id = $1 AND tenant_id = $2;

-- name: job_by_idempotency_key
-- A repeated submission with the same key returns the first job.
SELECT * FROM jobs WHERE tenant_id = $1 AND idempotency_key = $2;

-- name: list_jobs
-- Newest first, keyset-paginated by (created_at, id), one tenant only.
SELECT * FROM jobs
WHERE tenant_id = $1
  AND ($2::text IS NULL OR status = $2)
  AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4::uuid))
ORDER BY created_at DESC, id DESC
LIMIT $5;

-- name: lock_job
-- Writers lock the job row before appending to its stream.
SELECT id, tenant_id, status, version FROM jobs WHERE id = $1 AND tenant_id = $2 FOR UPDATE;

-- name: any_due_jobs
-- Whether any active job is due, by one descent of jobs_next_due: the scheduler asks before it
-- opens a transaction for claim_due_jobs, whose plan (a branch per shard, planned at every poll
-- from its parameters: stores/jobs.py) costs 1-3 ms to make, more than to run. The oldest
-- entry, by an ordered LIMIT 1, is the head of the index whatever the statistics say:
-- `EXISTS (... next_run_at <= $1)`, planned from statistics that in a burst say every job is
-- due, became a sequential scan stepping over every job already fired (15 ms a call over
-- 20,000 jobs), and min(), cached with statistics that saw no active job, an aggregate over
-- the whole index (0.4 ms a call with 20,000 jobs ahead).
SELECT coalesce((SELECT next_run_at FROM jobs
                 WHERE status = 'active' AND next_run_at IS NOT NULL
                 ORDER BY next_run_at LIMIT 1)
                <= coalesce($1::timestamptz, now()), false);

-- name: claim_due_jobs
-- The scheduler's poll: due active jobs of the given shards, oldest first, small batches; SKIP
-- LOCKED gives each due job to exactly one scheduler transaction. Candidates: the oldest 2 x $2
-- due jobs of all the shards named in $4 (of them the oldest $2 not locked by another claimer
-- are locked), merged from one ordered descent of jobs_due (shard, next_run_at) per shard: the
-- Merge Append of the branches below stops after 2 x $2 rows, so a poll costs the same with 100
-- or 100,000 jobs due. (A LATERAL of the oldest $2 of each shard read 16 x $2 rows in a burst,
-- 8 of a poll's 11 ms; `shard = ANY(...) ORDER BY next_run_at` would fetch and sort every due
-- job.) One branch per shard, SHARDS = 16 (fixed by migration 0004): an element past the end
-- of $4 is NULL and its branch is empty. Shards are always named: an "IS NULL OR" would make
-- the generic plan a sequential scan. Each branch has the merge's LIMIT too: a branch planned
-- for all its rows, as statistics taken in a burst (every job due) made it, read and sorted
-- every due job of its shard (a bitmap scan: 13 ms a poll over 20,000 due jobs); with the limit
-- its ordered descent is the cheap start. The scheduler runs it only when any_due_jobs found a
-- job due, so an idle poll pays neither its planning nor the per-shard descents.
WITH due AS NOT MATERIALIZED (
    SELECT id, shard, next_run_at FROM jobs
    WHERE status = 'active' AND next_run_at IS NOT NULL
      AND next_run_at <= coalesce($1::timestamptz, now())
      AND NOT (id = ANY($3::uuid[]))
), candidates AS MATERIALIZED (
    SELECT c.id FROM (
              (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[1] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[2] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[3] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[4] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[5] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[6] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[7] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[8] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[9] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[10] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[11] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[12] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[13] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[14] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[15] ORDER BY next_run_at LIMIT $2 * 2)
    UNION ALL (SELECT id, next_run_at FROM due WHERE shard = ($4::smallint[])[16] ORDER BY next_run_at LIMIT $2 * 2)
    ) AS c
    ORDER BY c.next_run_at
    LIMIT $2 * 2
)
SELECT j.id, j.tenant_id, j.task, j.pool, j.priority, j.payload_ref, j.next_run_at, j.next_slot,
       j.schedule, j.traceparent, j.version, j.calendar, j.overlap, j.resume_policy,
       j.consecutive_failures, j.retry_policy, j.timeout_seconds, j.queue_wait_seconds,
       j.on_queue_wait, j.shard, j.concurrency_key, j.resource, j.payload_version,
       (SELECT a.attributes FROM job_attributes a WHERE a.job_id = j.id) AS attributes
FROM jobs j
-- The candidates by primary key. As an array, not a join: the planner takes an array it cannot
-- see for a few elements, where a join took the CTE's LIMIT (800) for its size and, with
-- statistics taken while `jobs` was smaller, hashed a sequential scan of the whole table on
-- every poll (24,500 rows read for 117 due: 7 ms a poll under load, auto_explain).
WHERE j.id = ANY (ARRAY(SELECT id FROM candidates))
-- Re-checked on the locked row, and written so that no index can serve it: the planner's
-- histogram of next_run_at was taken while these jobs were in the future, so it believes almost
-- none are due and would otherwise scan jobs_due for every candidate instead of the primary key.
  AND (j.status = 'active' AND j.next_run_at <= coalesce($1::timestamptz, now())) IS TRUE
ORDER BY j.next_run_at
LIMIT $2
FOR UPDATE OF j SKIP LOCKED;

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
       retry_policy, timeout_seconds, queue_wait_seconds, on_queue_wait, concurrency_key, resource,
       payload_version,
       (SELECT a.attributes FROM job_attributes a WHERE a.job_id = jobs.id) AS attributes
FROM jobs WHERE id = $1 FOR UPDATE;

-- name: jobs_by_idempotency_keys
-- Batch submission: the jobs some idempotency keys already name.
SELECT id, idempotency_key, next_run_at, request_hash FROM jobs
WHERE tenant_id = $1 AND idempotency_key = ANY($2::text[]);

-- name: skips_of_job_between
-- The reconciler: recorded skips overlapping a window.
SELECT first_slot, last_slot, slots, reason FROM occurrence_skips
WHERE job_id = $1 AND last_slot >= $2 AND first_slot < $3;

-- name: pauses_of_job
-- The reconciler: a job's pause history.
SELECT paused_at, resumed_at FROM job_pauses WHERE job_id = $1 ORDER BY paused_at;

-- name: skips_of_job_page
-- GET /v1/jobs/{id}/skips: a tenant's job's recorded skips, oldest first, after a slot.
SELECT first_slot, last_slot, slots, reason FROM occurrence_skips
WHERE job_id = $1 AND tenant_id = $2 AND first_slot > $3
ORDER BY first_slot
LIMIT $4;

-- name: job_names
-- The web UI's runs list: the names of the jobs of a page of runs (one statement a page).
SELECT id, name FROM jobs WHERE tenant_id = $1 AND id = ANY($2::uuid[]);

-- name: jobs_last_outcomes
-- The web UI's jobs list: each job's latest ended run of its own slots (runs_job_slot, newest
-- slot first), one statement for a page of jobs.
SELECT j.id AS job_id, r.id AS run_id, r.state, r.finished_at, r.last_error->>'type' AS error_type
FROM unnest($2::uuid[]) AS j(id)
CROSS JOIN LATERAL (
  SELECT id, state, finished_at, last_error FROM runs
  WHERE runs.job_id = j.id AND runs.tenant_id = $1 AND parent_run_id IS NULL
    AND trigger <> 'dag' AND finished_at IS NOT NULL
  ORDER BY scheduled_for DESC
  LIMIT 1
) r;

-- name: jobs_pause_reasons
-- The web UI's jobs list: why each paused job of a page is paused, its latest JobPaused event:
-- the events' primary key read backwards from the stream's end (a paused job fires no
-- occurrences, so its pause is among its last events, however long its stream).
SELECT j.id AS job_id, e.data->>'reason' AS reason,
       coalesce((e.data->>'auto')::boolean, false) AS auto, e.actor, e.occurred_at AS paused_at
FROM unnest($2::uuid[]) AS j(id)
CROSS JOIN LATERAL (
  SELECT data, actor, occurred_at FROM events
  WHERE stream_id = j.id AND tenant_id = $1 AND type = 'JobPaused'
  ORDER BY version DESC
  LIMIT 1
) e;
