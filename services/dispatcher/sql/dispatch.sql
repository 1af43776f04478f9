-- The dispatcher's operational state: holds (why a waiting run waits) and token buckets.

-- name: dispatch_lock
-- One decision at a time across dispatcher instances, so global limits hold.
SELECT pg_advisory_xact_lock(7286135501);

-- name: save_holds
-- Create or refresh the reason of each held run.
INSERT INTO dispatch_holds (run_id, tenant_id, reason, updated_at)
SELECT run_id, tenant_id, reason, $4::timestamptz
FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS h (run_id, tenant_id, reason)
ON CONFLICT (run_id) DO UPDATE SET reason = excluded.reason, updated_at = excluded.updated_at;

-- name: drop_holds
-- Admitted runs wait no more.
DELETE FROM dispatch_holds WHERE run_id = ANY($1::uuid[]);

-- name: prune_holds
-- Holds of runs that are no longer waiting (cancelled, expired, admitted by another instance).
DELETE FROM dispatch_holds h
WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = h.run_id
                  AND (r.state = 'scheduled' OR (r.state = 'retry_scheduled' AND r.retry_at IS NULL)));

-- name: load_buckets
-- Token buckets as of the last decision.
SELECT tenant_id, scope, name, tokens, updated_at FROM token_buckets;

-- name: save_buckets
-- Token buckets after a decision.
INSERT INTO token_buckets (tenant_id, scope, name, tokens, updated_at)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::float8[], $5::timestamptz[])
ON CONFLICT (tenant_id, scope, name) DO UPDATE
    SET tokens = excluded.tokens, updated_at = excluded.updated_at;

-- name: load_fairness
-- The fair-queueing memory, unless this instance ($1) wrote it last (it has it in memory).
SELECT written_by, CASE WHEN written_by = $1 THEN NULL ELSE tags END AS tags
FROM dispatch_fairness WHERE id = 1;

-- name: save_fairness
-- The fair-queueing memory after a round that changed it.
INSERT INTO dispatch_fairness AS f (id, tags, written_by, rounds, updated_at)
VALUES (1, $1::jsonb, $2, 1, now())
ON CONFLICT (id) DO UPDATE
    SET tags = excluded.tags, written_by = excluded.written_by, rounds = f.rounds + 1,
        updated_at = excluded.updated_at;
