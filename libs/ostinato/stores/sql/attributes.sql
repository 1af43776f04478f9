-- name: declared
-- A tenant's declared search attributes (name → type), by name.
SELECT name, type, created_at, actor FROM search_attributes WHERE tenant_id = $1 ORDER BY name;

-- name: declared_of_tenants
-- The declarations of several tenants at once (the worker-gateway's upserts).
SELECT tenant_id, name, type FROM search_attributes WHERE tenant_id = ANY ($1::uuid[]);

-- name: declare
-- A new declaration; a repeat (same name) changes nothing (the api checks the type first).
INSERT INTO search_attributes (tenant_id, name, type, created_at, actor)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, name) DO NOTHING;

-- name: lock_declarations
-- Declarations of one tenant are serialised (the cap counts what is there).
SELECT pg_advisory_xact_lock(hashtextextended('search_attributes:' || $1::text, 0));

-- name: remove
-- Forget a declaration; values already stored stay, unmatched by filters on other types.
DELETE FROM search_attributes WHERE tenant_id = $1 AND name = $2 RETURNING name;

-- name: of_runs
-- The attributes of some runs of a tenant (a page of the run list, one run).
SELECT run_id, attributes FROM run_attributes WHERE run_id = ANY ($1::uuid[]) AND tenant_id = $2;

-- name: of_jobs
-- The attributes of some jobs of a tenant.
SELECT job_id, attributes FROM job_attributes WHERE job_id = ANY ($1::uuid[]) AND tenant_id = $2;

-- name: list_runs_by_attributes
-- GET /v1/runs?where=: the run list (list_runs_filtered's arguments $1-$11) of the runs whose
-- attributes contain $12 (the equalities, one jsonb object: the GIN index run_attributes_values
-- answers it) and pass every comparison ($13 names, $14 operators, $15 values as stored, all
-- bind parameters: the operator picks a branch of a fixed CASE). A missing attribute, or one
-- stored with another type (declared again since), never matches. Newest occurrence first from
-- run_attributes' own (tenant, scheduled_for) index, so a filter matching most runs stops at
-- the page's end. Planned for its parameters each time (`run_store.page`): which way is fast
-- depends on how many runs the values match.
SELECT r.* FROM run_attributes a JOIN runs r ON r.id = a.run_id
WHERE a.tenant_id = $1 AND r.tenant_id = $1
  AND a.attributes @> $12::jsonb
  AND NOT EXISTS (
      SELECT 1 FROM unnest($13::text[], $14::text[], $15::jsonb[]) AS f (name, op, val)
      WHERE NOT coalesce(CASE
          WHEN f.op = '~' THEN strpos(lower(a.attributes ->> f.name), f.val #>> '{}') > 0
          WHEN jsonb_typeof(a.attributes -> f.name) IS DISTINCT FROM jsonb_typeof(f.val)
              THEN false
          WHEN f.op = '!=' THEN a.attributes -> f.name <> f.val
          WHEN f.op = '>' THEN a.attributes -> f.name > f.val
          WHEN f.op = '>=' THEN a.attributes -> f.name >= f.val
          WHEN f.op = '<' THEN a.attributes -> f.name < f.val
          WHEN f.op = '<=' THEN a.attributes -> f.name <= f.val
      END, false))
  AND ($2::uuid IS NULL OR r.job_id = $2)
  AND ($3::text IS NULL OR r.state = $3)
  AND ($4::text IS NULL OR r.task = $4)
  AND ($5::text IS NULL OR r.pool = $5)
  AND ($6::text IS NULL OR r.priority = $6)
  AND ($7::timestamptz IS NULL OR a.scheduled_for >= $7)
  AND ($8::timestamptz IS NULL OR a.scheduled_for < $8)
  AND ($9::timestamptz IS NULL OR (a.scheduled_for, a.run_id) < ($9, $10::uuid))
ORDER BY a.scheduled_for DESC, a.run_id DESC
LIMIT $11;

-- name: list_runs_by_attribute_range
-- list_runs_by_attributes with a numeric comparison: also a semi-join with run_attribute_numbers
-- ($16 the first numeric attribute compared, $17-$20 its >, >=, <, <= bounds, NULL where
-- unbounded), which the planner drives from its btree when the range matches few runs and
-- probes per run (primary key) when it matches many.
SELECT r.* FROM run_attributes a JOIN runs r ON r.id = a.run_id
WHERE a.tenant_id = $1 AND r.tenant_id = $1
  AND a.attributes @> $12::jsonb
  AND NOT EXISTS (
      SELECT 1 FROM unnest($13::text[], $14::text[], $15::jsonb[]) AS f (name, op, val)
      WHERE NOT coalesce(CASE
          WHEN f.op = '~' THEN strpos(lower(a.attributes ->> f.name), f.val #>> '{}') > 0
          WHEN jsonb_typeof(a.attributes -> f.name) IS DISTINCT FROM jsonb_typeof(f.val)
              THEN false
          WHEN f.op = '!=' THEN a.attributes -> f.name <> f.val
          WHEN f.op = '>' THEN a.attributes -> f.name > f.val
          WHEN f.op = '>=' THEN a.attributes -> f.name >= f.val
          WHEN f.op = '<' THEN a.attributes -> f.name < f.val
          WHEN f.op = '<=' THEN a.attributes -> f.name <= f.val
      END, false))
  AND EXISTS (
      SELECT 1 FROM run_attribute_numbers v
      WHERE v.run_id = a.run_id AND v.tenant_id = $1 AND v.name = $16
        AND ($17::numeric IS NULL OR v.num > $17) AND ($18::numeric IS NULL OR v.num >= $18)
        AND ($19::numeric IS NULL OR v.num < $19) AND ($20::numeric IS NULL OR v.num <= $20))
  AND ($2::uuid IS NULL OR r.job_id = $2)
  AND ($3::text IS NULL OR r.state = $3)
  AND ($4::text IS NULL OR r.task = $4)
  AND ($5::text IS NULL OR r.pool = $5)
  AND ($6::text IS NULL OR r.priority = $6)
  AND ($7::timestamptz IS NULL OR a.scheduled_for >= $7)
  AND ($8::timestamptz IS NULL OR a.scheduled_for < $8)
  AND ($9::timestamptz IS NULL OR (a.scheduled_for, a.run_id) < ($9, $10::uuid))
ORDER BY a.scheduled_for DESC, a.run_id DESC
LIMIT $11;
