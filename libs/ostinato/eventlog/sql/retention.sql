-- Read models of retention (docs/RETENTION.md, migration 0045): a tenant's policy
-- (RetentionSet) and the holds on runs (RunHeld, RunReleased). Writes take every value from the
-- event, so a rebuild reproduces the rows; the stream's version moves with them.

-- name: project_retention_set
-- RetentionSet: the tenant's policy, replacing the previous one.
WITH policy AS (
    INSERT INTO tenant_retention (tenant_id, keep_seconds, archive, updated_at, updated_by)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (tenant_id) DO UPDATE
        SET keep_seconds = excluded.keep_seconds, archive = excluded.archive,
            updated_at = excluded.updated_at, updated_by = excluded.updated_by
)
UPDATE tenants SET version = $6 WHERE id = $1;

-- name: project_run_held
-- RunHeld: the run's hold (a second hold replaces the first's reason; the API records none).
WITH hold AS (
    INSERT INTO run_holds (run_id, tenant_id, reason, held_by, held_at)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (run_id) DO UPDATE
        SET reason = excluded.reason, held_by = excluded.held_by, held_at = excluded.held_at
)
UPDATE runs SET version = $6 WHERE id = $1;

-- name: project_run_released
-- RunReleased: the hold ends.
WITH hold AS (DELETE FROM run_holds WHERE run_id = $1)
UPDATE runs SET version = $2 WHERE id = $1;

-- name: snapshot_tenant_retention
-- For the rebuild-equality check.
SELECT * FROM tenant_retention ORDER BY tenant_id;

-- name: snapshot_run_holds
-- For the rebuild-equality check.
SELECT * FROM run_holds ORDER BY run_id;
