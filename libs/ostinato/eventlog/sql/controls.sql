-- Read models of fair-dispatch controls: limits (LimitSet) and pool pauses (PoolPaused,
-- PoolResumed). Writes take every value from the event, so a rebuild reproduces the rows.

-- name: project_limit_set
-- LimitSet: create or replace one limit of a tenant; scope tenant also sets the tenant's weight
WITH lim AS (
    INSERT INTO limits (tenant_id, scope, name, max_concurrency, rate_per_second, burst, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7)
    ON CONFLICT (tenant_id, scope, name) DO UPDATE
        SET max_concurrency = excluded.max_concurrency, rate_per_second = excluded.rate_per_second,
            burst = excluded.burst, updated_at = excluded.updated_at
)
UPDATE tenants SET weight = coalesce($8, weight), version = $9 WHERE id = $1;

-- name: project_pool_control
-- PoolPaused / PoolResumed
INSERT INTO pool_controls (id, tenant_id, pool, paused, reason, actor, changed_at, version)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (id) DO UPDATE SET paused = excluded.paused, reason = excluded.reason,
    actor = excluded.actor, changed_at = excluded.changed_at, version = excluded.version;

-- name: snapshot_limits
-- For the rebuild-equality check.
SELECT * FROM limits ORDER BY tenant_id, scope, name;

-- name: snapshot_pool_controls
-- For the rebuild-equality check.
SELECT * FROM pool_controls ORDER BY id;
