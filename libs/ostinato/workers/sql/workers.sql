-- The only SQL for the workers table (the worker registry). seen_at comes from the database
-- clock (coalesce($now, now()) lets tests pin it). scope is the tenant id as text, or '*' for a
-- shared worker (tenant_id NULL) serving every tenant.

-- name: touch_worker
-- A claim: the worker is alive and declares its pools, slots, the version of each task it
-- serves, the payload versions it accepts and how often it pings while it holds runs (insert
-- or replace).
INSERT INTO workers (worker_id, scope, tenant_id, pools, slots, seen_at, versions,
                     payload_versions, liveness_seconds)
VALUES ($1, coalesce($2::uuid::text, '*'), $2::uuid, $3::text[], $4, coalesce($5::timestamptz, now()),
        $6::jsonb, $7::jsonb, $8::real)
ON CONFLICT (worker_id, scope) DO UPDATE
    SET pools = excluded.pools, slots = excluded.slots, seen_at = excluded.seen_at,
        versions = excluded.versions, payload_versions = excluded.payload_versions,
        liveness_seconds = excluded.liveness_seconds;

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

-- name: live_versions
-- What live workers serve: per (tenant scope, pool), each task and the version of its handler.
-- Workers that declare no versions (older SDKs) serve no pinned run and are not listed.
SELECT DISTINCT w.tenant_id, p.pool, v.key AS task, v.value AS version
FROM workers AS w, unnest(w.pools) AS p(pool), jsonb_each_text(w.versions) AS v
WHERE w.seen_at > coalesce($1::timestamptz, now()) - $2::interval AND w.versions IS NOT NULL
ORDER BY p.pool, w.tenant_id NULLS FIRST, task, version;

-- name: list_workers
-- Display: a tenant's own workers and the shared ones serving it; every worker for NULL.
SELECT worker_id, tenant_id, pools, slots, seen_at, versions
FROM workers
WHERE $1::uuid IS NULL OR tenant_id = $1::uuid OR tenant_id IS NULL
ORDER BY seen_at DESC, worker_id, scope;

-- name: serving_workers
-- GET /v1/tasks: per task and version, how many live workers (the tenant's own and the shared
-- ones) serve it.
SELECT v.key AS task, v.value AS version, count(DISTINCT w.worker_id)::bigint AS workers
FROM workers AS w, jsonb_each_text(w.versions) AS v
WHERE w.seen_at > coalesce($2::timestamptz, now()) - $3::interval
  AND (w.tenant_id = $1::uuid OR w.tenant_id IS NULL)
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: serves_version
-- GET /v1/runs/{id}: does a live worker (the tenant's own or a shared one) in the pool serve
-- the task at this version?
SELECT EXISTS (
    SELECT 1 FROM workers
    WHERE seen_at > coalesce($5::timestamptz, now()) - $6::interval
      AND (tenant_id = $1::uuid OR tenant_id IS NULL) AND $2::text = ANY(pools)
      AND versions ->> $3::text = $4::text);

-- name: unserved_pools
-- OstinatoNoWorkerForPool: per (tenant, pool), runs waiting for the dispatcher or a worker
-- (scheduled, queued) whose due time is more than $2 before $1 (the database clock for NULL),
-- in a pool no live worker (seen within $3; the tenant's own or a shared one) serves.
SELECT r.tenant_id, t.name AS tenant, r.pool, count(*)::int AS n,
       min(coalesce(r.due_at, r.scheduled_for)) AS since
FROM runs r
JOIN tenants t ON t.id = r.tenant_id
WHERE r.state IN ('scheduled', 'queued')
  AND coalesce(r.due_at, r.scheduled_for) < coalesce($1::timestamptz, now()) - $2::interval
  AND NOT EXISTS (
      SELECT 1 FROM workers w
      WHERE w.seen_at > coalesce($1::timestamptz, now()) - $3::interval
        AND (w.tenant_id = r.tenant_id OR w.tenant_id IS NULL) AND r.pool = ANY(w.pools))
GROUP BY r.tenant_id, t.name, r.pool
ORDER BY r.tenant_id, r.pool
LIMIT $4;

-- name: gateway_seen
-- A worker-gateway instance is alive (every second; `started_at` kept from its first call).
INSERT INTO gateway_instances (id, started_at, seen_at)
VALUES ($1, coalesce($2::timestamptz, now()), coalesce($2::timestamptz, now()))
ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at;

-- name: gateway_gone
-- A worker-gateway instance stopping gracefully: its row counts as a (re)start now, so the
-- workers that talked to it have OSTINATO_WORKER_DEAD_AFTER_SECONDS to reach it again (or
-- another) before their silence counts; then it is no longer live. Rows of instances gone for
-- an hour are deleted on the way.
WITH gone AS (
    DELETE FROM gateway_instances WHERE seen_at < coalesce($2::timestamptz, now()) - interval '1 hour'
)
UPDATE gateway_instances
SET started_at = coalesce($2::timestamptz, now()), seen_at = coalesce($2::timestamptz, now())
WHERE id = $1;
