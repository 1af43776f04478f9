-- name: limits_of_tenant
-- A tenant's limits, for display.
SELECT scope, name, max_concurrency, rate_per_second, burst, updated_at
FROM limits WHERE tenant_id = $1 ORDER BY scope, name;

-- name: pool_controls_visible
-- Pauses a caller may see: every operator pause, plus its own tenant's (all, for the admin).
SELECT tenant_id, pool, paused, reason, actor, changed_at FROM pool_controls
WHERE tenant_id IS NULL OR $1::uuid IS NULL OR tenant_id = $1
ORDER BY pool, tenant_id NULLS FIRST;

-- name: waiting_depth
-- Queue depth and oldest waiting run per (tenant, pool, class), for metrics and GET /v1/pools
-- (the predicate is the partial index runs_dispatchable's, migration 0007).
SELECT tenant_id, pool, priority, count(*) AS depth, min(updated_at) AS oldest
FROM runs
WHERE state = 'scheduled' OR (state = 'retry_scheduled' AND retry_at IS NULL)
GROUP BY tenant_id, pool, priority;

-- name: in_flight_runs
-- The dispatcher's busy slots: runs queued (published, not yet claimed) or running.
SELECT tenant_id, pool, priority, task, concurrency_key, count(*) AS n
FROM run_slots
GROUP BY tenant_id, pool, priority, task, concurrency_key;

-- name: all_limits
-- The dispatcher's view of every limit.
SELECT tenant_id, scope, name, max_concurrency, rate_per_second, burst FROM limits;

-- name: paused_pools
-- Pools (or one tenant's queue in a pool) where dispatch is paused.
SELECT tenant_id, pool, reason, actor, changed_at FROM pool_controls WHERE paused;

-- name: lock_pool_control
-- Writers of a pool stream lock its row (absent before the first pause).
SELECT id, paused, version FROM pool_controls WHERE id = $1 FOR UPDATE;
