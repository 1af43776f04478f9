-- name: run_by_id
-- One run of one tenant.
SELECT * FROM runs WHERE id = $1 AND tenant_id = $2;

-- name: list_runs
-- Newest occurrence first, keyset-paginated, one tenant only, optional job and state filters.
SELECT * FROM runs
WHERE tenant_id = $1
  AND ($2::uuid IS NULL OR job_id = $2)
  AND ($3::text IS NULL OR state = $3)
  AND ($4::timestamptz IS NULL OR (scheduled_for, id) < ($4, $5::uuid))
ORDER BY scheduled_for DESC, id DESC
LIMIT $6;

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
