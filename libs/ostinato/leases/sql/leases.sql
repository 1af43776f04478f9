-- The only SQL for attempt_leases. Expiry is always computed by the database clock
-- (coalesce($now, now()) lets tests pin it).

-- name: grant_leases
-- A claim grants (or replaces) each run's lease with its new, higher fencing token.
INSERT INTO attempt_leases (run_id, tenant_id, fencing_token, worker_id, expires_at)
SELECT r, t, f, $4, coalesce($5::timestamptz, now()) + $6::interval
FROM unnest($1::uuid[], $2::uuid[], $3::bigint[]) AS x(r, t, f)
ON CONFLICT (run_id) DO UPDATE
    SET tenant_id = excluded.tenant_id, fencing_token = excluded.fencing_token,
        worker_id = excluded.worker_id, expires_at = excluded.expires_at
RETURNING run_id, expires_at;

-- name: extend_leases_if_token
-- Heartbeat: extend only leases whose token is current; a stale token extends nothing.
UPDATE attempt_leases AS l
SET expires_at = coalesce($4::timestamptz, now()) + $5::interval
FROM unnest($1::uuid[], $2::bigint[]) AS x(r, f)
WHERE l.run_id = x.r AND l.fencing_token = x.f AND l.tenant_id = $3
RETURNING l.run_id, l.expires_at;

-- name: current_tokens
-- The current token of each leased run (to tell a stale writer from an unknown run).
SELECT run_id, fencing_token, worker_id FROM attempt_leases
WHERE run_id = ANY($1::uuid[]) AND tenant_id = $2;

-- name: release_leases
-- A final outcome ends the lease.
DELETE FROM attempt_leases WHERE run_id = ANY($1::uuid[]);
