-- Reads of retention's read models (docs/RETENTION.md): a tenant's policy and the holds.

-- name: retention_of_tenant
-- GET /v1/tenants/{id}/retention (no row: the default policy).
SELECT keep_seconds, archive, updated_at, updated_by FROM tenant_retention WHERE tenant_id = $1;

-- name: holds_of_runs
-- GET /v1/runs/{id} and the hold commands: the holds of some of a tenant's runs.
SELECT run_id, reason, held_by, held_at FROM run_holds
WHERE tenant_id = $1 AND run_id = ANY($2::uuid[]);
