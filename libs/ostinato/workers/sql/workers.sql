-- The only SQL for the workers table (the worker registry). seen_at comes from the database
-- clock (coalesce($now, now()) lets tests pin it). scope is the tenant id as text, or '*' for a
-- shared worker (tenant_id NULL) serving every tenant.

-- name: touch_worker
-- A claim: the worker is alive and declares its pools and slots (insert or replace).
INSERT INTO workers (worker_id, scope, tenant_id, pools, slots, seen_at)
VALUES ($1, coalesce($2::uuid::text, '*'), $2::uuid, $3::text[], $4, coalesce($5::timestamptz, now()))
ON CONFLICT (worker_id, scope) DO UPDATE
    SET pools = excluded.pools, slots = excluded.slots, seen_at = excluded.seen_at;

-- name: worker_seen
-- A heartbeat: the worker is alive; pools and slots are only known from its claims, so a worker
-- that never claimed (or said goodbye) is not brought back.
UPDATE workers SET seen_at = coalesce($3::timestamptz, now())
WHERE worker_id = $1 AND scope = coalesce($2::uuid::text, '*');

-- name: forget_worker
-- A worker stopping gracefully: its slots disappear at once.
DELETE FROM workers WHERE worker_id = $1 AND scope = coalesce($2::uuid::text, '*')
RETURNING worker_id;

-- name: forget_stale_workers
-- Housekeeping: workers not seen for a long time (crashed, never said goodbye).
DELETE FROM workers WHERE seen_at < coalesce($1::timestamptz, now()) - $2::interval;

-- name: live_capacity
-- Fair dispatch: slots of workers seen within the TTL, per (tenant scope, pool); a worker
-- serving several pools counts its slots in each.
SELECT w.tenant_id, p.pool, sum(w.slots)::bigint AS slots
FROM workers AS w, unnest(w.pools) AS p(pool)
WHERE w.seen_at > coalesce($1::timestamptz, now()) - $2::interval
GROUP BY w.tenant_id, p.pool
ORDER BY p.pool, w.tenant_id NULLS FIRST;

-- name: list_workers
-- Display: a tenant's own workers and the shared ones serving it; every worker for NULL.
SELECT worker_id, tenant_id, pools, slots, seen_at
FROM workers
WHERE $1::uuid IS NULL OR tenant_id = $1::uuid OR tenant_id IS NULL
ORDER BY seen_at DESC, worker_id, scope;
