-- Claims of shared workers (admin key), which serve every tenant. Tenant workers use
-- readmodels.sql's claim_ready_runs (filtered by tenant over runs_ready).

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
