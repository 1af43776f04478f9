-- name: job_health_runs
-- GET /v1/jobs/{id}/health: the job's runs with slots in [$3, $4): how many, by outcome, and
-- the schedule lag of their first attempts (first RunStarted in the log minus the due time).
SELECT count(*)::int AS runs,
       (count(*) FILTER (WHERE r.state = 'succeeded'))::int AS succeeded,
       (count(*) FILTER (WHERE r.state IN ('failed', 'dead_lettered')))::int AS failed,
       (count(*) FILTER (WHERE r.state NOT IN ('succeeded', 'failed', 'dead_lettered',
                                                'cancelled')))::int AS in_progress,
       (count(s.started))::int AS started,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY s.lag) AS lag_p50_seconds,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY s.lag) AS lag_p99_seconds,
       max(s.lag) AS lag_max_seconds
FROM runs r
LEFT JOIN LATERAL (
    SELECT e.occurred_at AS started,
           greatest(0, extract(epoch FROM e.occurred_at - coalesce(r.due_at, r.scheduled_for)))
               ::float8 AS lag
    FROM events e WHERE e.stream_id = r.id AND e.type = 'RunStarted'
    ORDER BY e.version LIMIT 1) AS s ON true
WHERE r.job_id = $1 AND r.tenant_id = $2 AND r.scheduled_for >= $3 AND r.scheduled_for < $4
  AND r.parent_run_id IS NULL;

-- name: job_health_findings
-- GET /v1/jobs/{id}/health: what the reconciler recorded on the job's stream in [$3, $4] (now).
-- A missing slot later corrected by LedgerSlotResolved (its run or skip came) is not counted.
SELECT (count(*) FILTER (WHERE type = 'OccurrenceMissed'))::int AS missed,
       (count(*) FILTER (WHERE type = 'LedgerSlotMissing' AND NOT EXISTS (
            SELECT 1 FROM events r
            WHERE r.stream_id = e.stream_id AND r.type = 'LedgerSlotResolved'
              AND r.data->>'scheduled_for' = e.data->>'scheduled_for')))::int AS ledger_missing,
       (count(*) FILTER (WHERE type = 'CompletionOverdue'))::int AS overdue,
       (count(*) FILTER (WHERE type = 'OccurrencesSkipped'))::int AS skips
FROM events e
WHERE stream_id = $1 AND tenant_id = $2 AND occurred_at >= $3 AND occurred_at <= $4
  AND type IN ('OccurrenceMissed', 'LedgerSlotMissing', 'CompletionOverdue',
               'OccurrencesSkipped');

-- name: job_last_success
-- GET /v1/jobs/{id}/health: when the job's latest success finished, ever.
SELECT max(finished_at) FROM runs WHERE job_id = $1 AND tenant_id = $2 AND state = 'succeeded';

-- name: job_health_dag_runs
-- GET /v1/jobs/{id}/health of a DAG job (task dag:<id>): its DAG runs with slots in [$3, $4)
-- are its occurrences (its nodes' runs are not); the lag is the DAG run's start (its first
-- node ready) minus its due time.
SELECT count(*)::int AS runs,
       (count(*) FILTER (WHERE state = 'succeeded'))::int AS succeeded,
       (count(*) FILTER (WHERE state = 'failed'))::int AS failed,
       (count(*) FILTER (WHERE state IN ('pending', 'running')))::int AS in_progress,
       (count(started_at))::int AS started,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY s.lag) AS lag_p50_seconds,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY s.lag) AS lag_p99_seconds,
       max(s.lag) AS lag_max_seconds
FROM dag_runs d
CROSS JOIN LATERAL (  -- not started: no lag (greatest() would make a NULL 0)
    SELECT CASE WHEN d.started_at IS NOT NULL
                THEN greatest(0, extract(epoch FROM d.started_at - d.due_at))::float8
           END AS lag) AS s
WHERE d.job_id = $1 AND d.tenant_id = $2 AND d.scheduled_for >= $3 AND d.scheduled_for < $4;

-- name: job_last_dag_success
-- GET /v1/jobs/{id}/health of a DAG job: when its latest succeeded DAG run finished, ever.
SELECT max(finished_at) FROM dag_runs
WHERE job_id = $1 AND tenant_id = $2 AND state = 'succeeded';
