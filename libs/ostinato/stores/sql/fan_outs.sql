-- name: fan_outs_of_parents
-- The fan-out records of these parent runs, every position (the parents are locked first).
SELECT parent_run_id, seq, tenant_id, name, task, pool, priority, total, max_concurrency,
       on_failure, on_complete, retry, timeout_seconds, admitted, succeeded, failed, failures, state,
       completion_run_id, started_at, finished_at
FROM fan_outs
WHERE parent_run_id = ANY($1::uuid[])
ORDER BY parent_run_id, seq;

-- name: latest_fan_out
-- GET /v1/runs/{id}: the run's latest fan-out, within the tenant.
SELECT parent_run_id, seq, tenant_id, name, task, pool, priority, total, max_concurrency,
       on_failure, on_complete, retry, timeout_seconds, admitted, succeeded, failed, failures, state,
       completion_run_id, started_at, finished_at
FROM fan_outs
WHERE parent_run_id = $1 AND tenant_id = $2
ORDER BY seq DESC
LIMIT 1;
