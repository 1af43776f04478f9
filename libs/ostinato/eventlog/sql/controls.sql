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

-- name: lock_tenant
-- Writers of tenant events lock the row to read its stream version.
SELECT id, name, weight, version FROM tenants WHERE id = $1 FOR UPDATE;

-- name: lock_pool_control
-- Writers of a pool stream lock its row (absent before the first pause).
SELECT id, paused, version FROM pool_controls WHERE id = $1 FOR UPDATE;

-- name: all_limits
-- The dispatcher's view of every limit.
SELECT tenant_id, scope, name, max_concurrency, rate_per_second, burst FROM limits;

-- name: tenant_weights
-- The dispatcher's names and weights of tenants.
SELECT id, name, weight FROM tenants;

-- name: paused_pools
-- Pools (or one tenant's queue in a pool) where dispatch is paused.
SELECT tenant_id, pool, reason, actor, changed_at FROM pool_controls WHERE paused;
