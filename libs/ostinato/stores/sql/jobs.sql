-- name: job_by_id
-- One job of one tenant.
SELECT * FROM jobs WHERE id = $1 AND tenant_id = $2;

-- name: job_by_idempotency_key
-- A repeated submission with the same key returns the first job.
SELECT * FROM jobs WHERE tenant_id = $1 AND idempotency_key = $2;

-- name: list_jobs
-- Newest first, keyset-paginated by (created_at, id), one tenant only.
SELECT * FROM jobs
WHERE tenant_id = $1
  AND ($2::text IS NULL OR status = $2)
  AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4::uuid))
ORDER BY created_at DESC, id DESC
LIMIT $5;
