-- name: storage_database_size
-- The reconciler's measure of the database: every relation, index and TOAST of it (not WAL).
SELECT pg_database_size(current_database());

-- name: storage_record
-- The reconciler's upsert of the one row (migration 0047); returns the level it replaced
-- (NULL the first time), so a change of level is logged once. now(): the database's clock.
WITH before AS (SELECT level FROM storage_state WHERE id)
INSERT INTO storage_state (id, level, used_ratio, database_bytes, total_bytes, free_bytes,
                           source, alert_ratio, refuse_ratio, measured_at, measured_by)
VALUES (true, $1, $2, $3, $4, $5, $6, $7, $8, now(), $9)
ON CONFLICT (id) DO UPDATE SET
    level = EXCLUDED.level, used_ratio = EXCLUDED.used_ratio,
    database_bytes = EXCLUDED.database_bytes, total_bytes = EXCLUDED.total_bytes,
    free_bytes = EXCLUDED.free_bytes, source = EXCLUDED.source,
    alert_ratio = EXCLUDED.alert_ratio, refuse_ratio = EXCLUDED.refuse_ratio,
    measured_at = EXCLUDED.measured_at, measured_by = EXCLUDED.measured_by
RETURNING (SELECT level FROM before) AS previous;

-- name: storage_state
-- What the api (through its cache) and the reconciler's alert rules read; its age by the
-- database's clock, so a reconciler that stopped measuring shows.
SELECT level, used_ratio, database_bytes, total_bytes, free_bytes, source, alert_ratio,
       refuse_ratio, measured_at,
       extract(epoch FROM now() - measured_at)::float8 AS age_seconds
FROM storage_state WHERE id;
