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

-- name: storage_relations
-- What policy.storage.reusable_bytes estimates the room inside the database's files from, for
-- each table of the application's schemas and each of their TOAST tables: the main fork's size,
-- the live and dead tuple counts the statistics keep current, the columns and the sum of their
-- average widths from ANALYZE (NULL: never analyzed, or not readable by this role: no room
-- counted), the fillfactor. Catalog reads and one stat() per file segment, no table is read:
-- cheap enough for every storage pass (bench/storage_watch.py).
WITH tables AS (
    SELECT c.oid, c.relname, n.nspname, c.relnatts, c.reltoastrelid, c.reloptions
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind = 'r' AND c.relpersistence = 'p'
      AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg\_%'
)
SELECT t.oid::regclass::text AS name, pg_relation_size(t.oid) AS size_bytes,
       coalesce(s.n_live_tup, 0) AS live_tuples, coalesce(s.n_dead_tup, 0) AS dead_tuples,
       t.relnatts::int AS columns,
       (SELECT sum(w.avg_width)::float8 FROM pg_stats w
        WHERE w.schemaname = t.nspname AND w.tablename = t.relname) AS data_width,
       false AS toast,
       coalesce((SELECT o.option_value::int FROM pg_options_to_table(t.reloptions) AS o
                 WHERE o.option_name = 'fillfactor'), 100) AS fillfactor
FROM tables t LEFT JOIN pg_stat_all_tables s ON s.relid = t.oid
UNION ALL
SELECT t.reltoastrelid::regclass::text, pg_relation_size(t.reltoastrelid),
       coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0), 3, NULL, true, 100
FROM tables t LEFT JOIN pg_stat_all_tables s ON s.relid = t.reltoastrelid
WHERE t.reltoastrelid <> 0;
