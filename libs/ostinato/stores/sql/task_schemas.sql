-- The only SQL for the task_schemas table (payload schemas that workers registered, migration
-- 0022). scope is the tenant id as text, or '*' for schemas of shared workers (tenant_id NULL);
-- first_seen/last_seen come from the database clock (coalesce($n, now()) lets tests pin it).

-- name: register_task_schemas
-- A worker's registration, one statement for all its tasks: new (task, payload_version) pairs
-- are inserted, pairs registered with the same schema (jsonb equality: key order and spacing do
-- not matter) only seen again; a pair registered with another schema returns no row, and the
-- caller refuses the registration (rolling the statement back).
INSERT INTO task_schemas AS t (scope, tenant_id, task, payload_version, schema, first_seen,
                               last_seen)
SELECT coalesce($1::uuid::text, '*'), $1::uuid, r.task, r.payload_version, r.schema::jsonb,
       coalesce($5::timestamptz, now()), coalesce($5::timestamptz, now())
FROM unnest($2::text[], $3::int[], $4::text[]) AS r(task, payload_version, schema)
ON CONFLICT (scope, task, payload_version) DO UPDATE SET last_seen = excluded.last_seen
    WHERE t.schema = excluded.schema
RETURNING t.task, t.payload_version, (t.xmax = 0) AS created;

-- name: newest_task_schemas
-- Submission: per task, the newest payload version of the tenant's own scope, else of the
-- shared one, with its schema as JSON text (decoded only when not compiled yet).
SELECT DISTINCT ON (task) scope, task, payload_version, schema::text AS schema
FROM task_schemas
WHERE task = ANY($2::text[]) AND scope IN ($1::uuid::text, '*')
ORDER BY task, scope = '*', payload_version DESC;

-- name: task_schemas_of_scope
-- For display and tests: every schema registered in one scope ('*' for NULL), newest first.
SELECT scope, tenant_id, task, payload_version, schema::text AS schema, first_seen, last_seen
FROM task_schemas
WHERE scope = coalesce($1::uuid::text, '*')
ORDER BY task, payload_version DESC;
