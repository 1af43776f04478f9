-- name: deadline_overdue_runs
-- The deadline check: runs of jobs with complete_within whose deadline (slot + complete_within)
-- passed before $1 without a success by then (still waiting, retrying, stuck, failed, dead-
-- lettered, or succeeded late), slot at or after $2, not marked yet. A cancelled run is an
-- operator's decision, not a breach.
SELECT r.tenant_id, r.job_id, r.id AS run_id, r.scheduled_for, r.state,
       r.scheduled_for + make_interval(secs => j.complete_within_seconds) AS deadline
FROM jobs j
JOIN runs r ON r.job_id = j.id AND r.scheduled_for >= $2 AND r.parent_run_id IS NULL
WHERE j.complete_within_seconds IS NOT NULL
  AND NOT r.completion_overdue AND r.state <> 'cancelled'
  AND r.scheduled_for + make_interval(secs => j.complete_within_seconds) < $1
  AND (r.state <> 'succeeded'
       OR r.finished_at > r.scheduled_for + make_interval(secs => j.complete_within_seconds))
ORDER BY deadline, r.id
LIMIT $3;

-- name: deadline_stale_jobs
-- The deadline check: active recurring jobs with max_staleness whose last success (none: the
-- job's creation) is older than allowed at $1.
SELECT j.tenant_id, j.id AS job_id, s.last_success_at,
       coalesce(s.last_success_at, j.created_at)
           + make_interval(secs => j.max_staleness_seconds) AS deadline
FROM jobs j
LEFT JOIN LATERAL (SELECT max(finished_at) AS last_success_at FROM runs
                   WHERE runs.job_id = j.id AND runs.state = 'succeeded') AS s ON true
WHERE j.max_staleness_seconds IS NOT NULL AND j.status = 'active'
  AND coalesce(s.last_success_at, j.created_at)
          + make_interval(secs => j.max_staleness_seconds) < $1
ORDER BY j.id
LIMIT $2;
