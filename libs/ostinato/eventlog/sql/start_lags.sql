-- The schedule-lag histogram start_lag_minutes (migration 0036) outside its projection
-- (readmodels.sql project_run_started, its only writer): its retention and its rebuild.

-- name: expire_start_lag_minutes
-- Retention: up to $2 rows of minutes before $1, oldest first (the key leads with the minute).
DELETE FROM start_lag_minutes
WHERE (minute, tenant_id, pool, bucket) IN (
    SELECT minute, tenant_id, pool, bucket FROM start_lag_minutes
    WHERE minute < $1
    ORDER BY minute
    LIMIT $2);

-- name: truncate_start_lag_minutes
-- Before a rebuild, with the other read models: the projection counts every first start again.
TRUNCATE start_lag_minutes;

-- name: snapshot_start_lag_minutes
-- For the rebuild-equality check.
SELECT * FROM start_lag_minutes ORDER BY minute, tenant_id, pool, bucket;
