-- name: ended_runs
-- The final answers among runs that waiters of GET /v1/runs/{id}/result await, read once for all
-- of a notice's waiters (services/api/results.py). Any tenant's: each row names its tenant and
-- the api gives it only to waiters of that tenant.
SELECT id, tenant_id, state, output_ref, last_error, finished_at
FROM runs
WHERE id = ANY($1::uuid[]) AND state IN ('succeeded', 'dead_lettered', 'cancelled');

-- name: ended_dag_runs
-- The same for DAG runs.
SELECT id, tenant_id, state, finished_at
FROM dag_runs
WHERE id = ANY($1::uuid[]) AND state IN ('succeeded', 'failed', 'cancelled');
