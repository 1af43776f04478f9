-- The schedule-lag histogram start_lag_minutes (migration 0036) outside its projection
-- (readmodels.sql project_run_started, its only writer; its rebuild is the read models'): its
-- retention.

-- name: expire_start_lag_minutes
-- Retention: up to $2 rows of minutes before $1, oldest first (the key leads with the minute).
DELETE FROM start_lag_minutes
WHERE (minute, tenant_id, pool, bucket) IN (
    SELECT minute, tenant_id, pool, bucket FROM start_lag_minutes
    WHERE minute < $1
    ORDER BY minute
    LIMIT $2);
