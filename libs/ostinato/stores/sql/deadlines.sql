-- name: deadline_overdue_runs
-- The deadline check: the occurrences of jobs with complete_within whose deadline (slot +
-- complete_within) passed in [$2, $1) without a success by then (still waiting, retrying,
-- stuck, failed, dead-lettered, or succeeded late), not marked yet. Chosen by deadline, not by
-- slot, so a complete_within longer than the window breaches too. A job's occurrence is its
-- run or, for a DAG job, its DAG run (`dag`; states pending, running, succeeded, failed,
-- cancelled; its node runs share the job and slot and are none of them). A cancelled one is an
-- operator's decision, not a breach. Each job's slot range is read through runs_job_slot and
-- dag_runs_job_slot.
WITH j AS (
    SELECT id, make_interval(secs => complete_within_seconds) AS within FROM jobs
    WHERE complete_within_seconds IS NOT NULL
), occurrence AS (
    SELECT r.tenant_id, r.job_id, r.id, r.scheduled_for, r.state, r.finished_at,
           r.completion_overdue, false AS dag, j.within
    FROM j JOIN runs r ON r.job_id = j.id AND r.parent_run_id IS NULL AND r.trigger <> 'dag'
                      AND r.scheduled_for >= $2::timestamptz - j.within
                      AND r.scheduled_for < $1::timestamptz - j.within
    UNION ALL
    SELECT d.tenant_id, d.job_id, d.id, d.scheduled_for, d.state, d.finished_at,
           d.completion_overdue, true AS dag, j.within
    FROM j JOIN dag_runs d ON d.job_id = j.id
                          AND d.scheduled_for >= $2::timestamptz - j.within
                          AND d.scheduled_for < $1::timestamptz - j.within
)
SELECT tenant_id, job_id, id AS run_id, scheduled_for, state, dag,
       scheduled_for + within AS deadline
FROM occurrence
WHERE NOT completion_overdue AND state <> 'cancelled'
  AND (state <> 'succeeded' OR finished_at > scheduled_for + within)
ORDER BY deadline, run_id
LIMIT $3;

-- name: deadline_stale_jobs
-- The deadline check: active recurring jobs with max_staleness whose last success (none: the
-- job's creation) is older than allowed at $1. A DAG job succeeds when a DAG run does, not
-- when one of its nodes does.
SELECT j.tenant_id, j.id AS job_id, s.last_success_at,
       coalesce(s.last_success_at, j.created_at)
           + make_interval(secs => j.max_staleness_seconds) AS deadline
FROM jobs j
LEFT JOIN LATERAL (SELECT max(finished_at) AS last_success_at FROM (
                       SELECT finished_at FROM runs
                       WHERE runs.job_id = j.id AND runs.state = 'succeeded'
                         AND runs.trigger <> 'dag'
                       UNION ALL
                       SELECT finished_at FROM dag_runs
                       WHERE dag_runs.job_id = j.id AND dag_runs.state = 'succeeded'
                   ) AS successes) AS s ON true
WHERE j.max_staleness_seconds IS NOT NULL AND j.status = 'active'
  AND coalesce(s.last_success_at, j.created_at)
          + make_interval(secs => j.max_staleness_seconds) < $1
ORDER BY j.id
LIMIT $2;
