-- name: insert_operation
-- A new tracked operation (its items are selected right after, in the same transaction).
INSERT INTO operations (id, tenant_id, kind, filter, total, actor, created_at)
VALUES ($1, $2, $3, $4, 0, $5, $6);

-- name: set_operation_total
-- The size of the frozen selection; an empty one is completed at once.
UPDATE operations SET total = $2,
       state = CASE WHEN $2 = 0 THEN 'completed' ELSE state END,
       finished_at = CASE WHEN $2 = 0 THEN created_at ELSE finished_at END
WHERE id = $1;

-- name: count_runs_matching
-- How many of a tenant's runs a cancel or retry filter selects (the dry run and the count the
-- operator confirms): states $2 (NULL: any), job $3, task $4, pool $5, scheduled_for in [$6, $7),
-- and with $8 the searchable attributes (list_runs_by_attributes' $12-$20 as $9-$17); at most
-- $18 of them (NULL: all; a list page's offer says "1,000+" rather than count 50,000).
SELECT count(*) FROM (SELECT 1 FROM runs
WHERE tenant_id = $1
  AND ($2::text[] IS NULL OR state = ANY ($2))
  AND ($3::uuid IS NULL OR job_id = $3)
  AND ($4::text IS NULL OR task = $4)
  AND ($5::text IS NULL OR pool = $5)
  AND ($6::timestamptz IS NULL OR scheduled_for >= $6)
  AND ($7::timestamptz IS NULL OR scheduled_for < $7)
  AND (NOT $8::bool OR EXISTS (
      SELECT 1 FROM run_attributes a
      WHERE a.run_id = runs.id AND a.tenant_id = $1 AND a.attributes @> $9::jsonb
        AND NOT EXISTS (
            SELECT 1 FROM unnest($10::text[], $11::text[], $12::jsonb[]) AS f (name, op, val)
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
        AND ($13::text IS NULL OR EXISTS (
            SELECT 1 FROM run_attribute_numbers v
            WHERE v.run_id = a.run_id AND v.tenant_id = $1 AND v.name = $13
              AND ($14::numeric IS NULL OR v.num > $14) AND ($15::numeric IS NULL OR v.num >= $15)
              AND ($16::numeric IS NULL OR v.num < $16)
              AND ($17::numeric IS NULL OR v.num <= $17)))))
LIMIT $18::bigint) AS matching;

-- name: select_run_items
-- Freeze the runs count_runs_matching counts (same arguments, $18 the operation), oldest first.
INSERT INTO operation_items (operation_id, seq, item_id)
SELECT $18, row_number() OVER (ORDER BY scheduled_for, id), id FROM runs
WHERE tenant_id = $1
  AND ($2::text[] IS NULL OR state = ANY ($2))
  AND ($3::uuid IS NULL OR job_id = $3)
  AND ($4::text IS NULL OR task = $4)
  AND ($5::text IS NULL OR pool = $5)
  AND ($6::timestamptz IS NULL OR scheduled_for >= $6)
  AND ($7::timestamptz IS NULL OR scheduled_for < $7)
  AND (NOT $8::bool OR EXISTS (
      SELECT 1 FROM run_attributes a
      WHERE a.run_id = runs.id AND a.tenant_id = $1 AND a.attributes @> $9::jsonb
        AND NOT EXISTS (
            SELECT 1 FROM unnest($10::text[], $11::text[], $12::jsonb[]) AS f (name, op, val)
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
        AND ($13::text IS NULL OR EXISTS (
            SELECT 1 FROM run_attribute_numbers v
            WHERE v.run_id = a.run_id AND v.tenant_id = $1 AND v.name = $13
              AND ($14::numeric IS NULL OR v.num > $14) AND ($15::numeric IS NULL OR v.num >= $15)
              AND ($16::numeric IS NULL OR v.num < $16)
              AND ($17::numeric IS NULL OR v.num <= $17)))));

-- name: count_letters_matching
-- How many of a tenant's dead letters a replay filter selects: job $2, error type $3, triage $4.
SELECT count(*) FROM dead_letters
WHERE tenant_id = $1
  AND ($2::uuid IS NULL OR job_id = $2)
  AND ($3::text IS NULL OR error_type = $3)
  AND ($4::text IS NULL OR triage_state = $4);

-- name: select_letter_items
-- Freeze the dead letters count_letters_matching counts ($5 the operation), oldest first.
INSERT INTO operation_items (operation_id, seq, item_id)
SELECT $5, row_number() OVER (ORDER BY dead_lettered_at, run_id), run_id FROM dead_letters
WHERE tenant_id = $1
  AND ($2::uuid IS NULL OR job_id = $2)
  AND ($3::text IS NULL OR error_type = $3)
  AND ($4::text IS NULL OR triage_state = $4);

-- name: count_jobs_matching
-- How many of a tenant's jobs a pause filter selects: status $2, task $3, pool $4.
SELECT count(*) FROM jobs
WHERE tenant_id = $1
  AND ($2::text IS NULL OR status = $2)
  AND ($3::text IS NULL OR task = $3)
  AND ($4::text IS NULL OR pool = $4);

-- name: select_job_items
-- Freeze the jobs count_jobs_matching counts ($5 the operation), oldest first.
INSERT INTO operation_items (operation_id, seq, item_id)
SELECT $5, row_number() OVER (ORDER BY created_at, id), id FROM jobs
WHERE tenant_id = $1
  AND ($2::text IS NULL OR status = $2)
  AND ($3::text IS NULL OR task = $3)
  AND ($4::text IS NULL OR pool = $4);

-- name: operation_by_id
-- One operation of one tenant.
SELECT id, tenant_id, kind, filter, total, position, done, skipped, failed, state, actor,
       created_at, finished_at, cancelled_by
FROM operations WHERE id = $1 AND tenant_id = $2;

-- name: list_operations
-- A tenant's operations, newest first, keyset-paginated by (created_at, id); state $2 or any.
SELECT id, tenant_id, kind, filter, total, position, done, skipped, failed, state, actor,
       created_at, finished_at, cancelled_by
FROM operations
WHERE tenant_id = $1
  AND ($2::text IS NULL OR state = $2)
  AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4::uuid))
ORDER BY created_at DESC, id DESC
LIMIT $5;

-- name: claim_running_operation
-- The duty's next batch: the oldest running operation no other api process is working on,
-- locked until the batch commits (a cancel waits for it).
SELECT id, tenant_id, kind, filter, total, position, done, skipped, failed, state, actor,
       created_at, finished_at, cancelled_by
FROM operations WHERE state = 'running'
ORDER BY created_at, id
LIMIT 1
FOR UPDATE SKIP LOCKED;

-- name: operation_items_after
-- The next batch of an operation's frozen selection: seq after $2, up to $3 of them.
SELECT seq, item_id FROM operation_items
WHERE operation_id = $1 AND seq > $2
ORDER BY seq
LIMIT $3;

-- name: record_operation_failures
-- The items of a batch that were skipped or refused, with why (parallel arrays).
INSERT INTO operation_failures (operation_id, seq, item_id, outcome, detail)
SELECT $1, * FROM unnest($2::int[], $3::uuid[], $4::text[], $5::text[]);

-- name: advance_operation
-- A batch handled: move the position and counters; the last batch completes the operation.
UPDATE operations
SET position = position + $2, done = done + $3, skipped = skipped + $4, failed = failed + $5,
    state = CASE WHEN position + $2 >= total THEN 'completed' ELSE state END,
    finished_at = CASE WHEN position + $2 >= total THEN $6 ELSE finished_at END
WHERE id = $1;

-- name: cancel_operation
-- Stop a running operation of one tenant after the batch in hand (it holds the row's lock):
-- the items not reached yet are left alone. Returns nothing when it was not running.
UPDATE operations SET state = 'cancelled', finished_at = $3, cancelled_by = $4
WHERE id = $1 AND tenant_id = $2 AND state = 'running'
RETURNING id;

-- name: operation_failures_of
-- The first items of an operation that were skipped or refused, in order.
SELECT seq, item_id, outcome, detail FROM operation_failures
WHERE operation_id = $1
ORDER BY seq
LIMIT $2;
