-- The dispatcher's operational state: holds (why a waiting run waits), token buckets and the
-- fair-queueing memory; a round's reads and writes of them, one statement each.

-- name: dispatch_lock
-- One decision at a time across dispatcher instances, so global limits hold.
SELECT pg_advisory_xact_lock(7286135501);

-- name: prune_holds
-- Holds of runs that are no longer waiting (cancelled, expired, admitted by another instance).
DELETE FROM dispatch_holds h
WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = h.run_id
                  AND (r.state = 'scheduled' OR (r.state = 'retry_scheduled' AND r.retry_at IS NULL)));

-- name: snapshot
-- A round's small reads in one statement, after the lock (six statements were 0.44 ms of a round
-- and 0.2 ms of its client CPU): the fair-queueing memory unless this instance ($1) wrote it
-- last (it has it in memory), then the rows of the stores' tenant_weights, all_limits,
-- paused_pools and in_flight_runs, and the token buckets as the last decision saved them, each
-- an array of records in its store query's column order (test_dispatch.py holds them to the
-- stores' own reads).
SELECT
    (SELECT CASE WHEN written_by = $1 THEN NULL ELSE tags END
     FROM dispatch_fairness WHERE id = 1) AS fairness,
    ARRAY(SELECT (id, name, weight) FROM tenants) AS tenants,
    ARRAY(SELECT (tenant_id, scope, name, max_concurrency, rate_per_second, burst)
          FROM limits) AS limits,
    ARRAY(SELECT (tenant_id, pool, reason, actor, changed_at)
          FROM pool_controls WHERE paused) AS paused,
    ARRAY(SELECT (tenant_id, pool, priority, task, concurrency_key, count(*))
          FROM run_slots GROUP BY tenant_id, pool, priority, task, concurrency_key) AS in_flight,
    ARRAY(SELECT (tenant_id, scope, name, tokens, updated_at) FROM token_buckets) AS buckets;

-- name: save_round
-- What a round leaves, in one statement: the reasons that changed ($1-$3 at $4; never one of
-- the admitted runs), the admitted runs' holds dropped ($5), the token buckets ($6-$10), and the
-- fair-queueing memory when it changed ($11, NULL: unchanged) as this instance's ($12).
WITH held AS (
    INSERT INTO dispatch_holds (run_id, tenant_id, reason, updated_at)
    SELECT run_id, tenant_id, reason, $4::timestamptz
    FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS h (run_id, tenant_id, reason)
    WHERE run_id <> ALL ($5::uuid[])
    ON CONFLICT (run_id) DO UPDATE SET reason = excluded.reason, updated_at = excluded.updated_at
), dropped AS (
    DELETE FROM dispatch_holds WHERE run_id = ANY ($5::uuid[])
), buckets AS (
    INSERT INTO token_buckets (tenant_id, scope, name, tokens, updated_at)
    SELECT * FROM unnest($6::uuid[], $7::text[], $8::text[], $9::float8[], $10::timestamptz[])
    ON CONFLICT (tenant_id, scope, name) DO UPDATE
        SET tokens = excluded.tokens, updated_at = excluded.updated_at
), fairness AS (
    INSERT INTO dispatch_fairness AS f (id, tags, written_by, rounds, updated_at)
    SELECT 1, $11::jsonb, $12::uuid, 1, now() WHERE $11::jsonb IS NOT NULL
    ON CONFLICT (id) DO UPDATE
        SET tags = excluded.tags, written_by = excluded.written_by, rounds = f.rounds + 1,
            updated_at = excluded.updated_at
)
SELECT 1;
