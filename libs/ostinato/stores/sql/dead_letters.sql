-- name: list_dead_letters
-- The dead-letter queue of one tenant, newest first, with filters; keyset-paginated.
SELECT d.*, r.payload_ref, r.last_error FROM dead_letters d JOIN runs r ON r.id = d.run_id
WHERE d.tenant_id = $1
  AND ($2::uuid IS NULL OR d.job_id = $2)
  AND ($3::text IS NULL OR d.error_type = $3)
  AND ($4::text IS NULL OR d.triage_state = $4)
  AND ($5::timestamptz IS NULL OR d.dead_lettered_at <= $5)
  AND ($6::timestamptz IS NULL OR (d.dead_lettered_at, d.run_id) < ($6, $7::uuid))
ORDER BY d.dead_lettered_at DESC, d.run_id DESC
LIMIT $8;

-- name: dead_letter_counts
-- Counts of one tenant's dead letters by error type and triage state (same filters, no paging).
SELECT d.error_type, d.triage_state, count(*) AS n FROM dead_letters d
WHERE d.tenant_id = $1
  AND ($2::uuid IS NULL OR d.job_id = $2)
  AND ($3::text IS NULL OR d.error_type = $3)
  AND ($4::text IS NULL OR d.triage_state = $4)
  AND ($5::timestamptz IS NULL OR d.dead_lettered_at <= $5)
GROUP BY d.error_type, d.triage_state;

-- name: dead_letter_by_id
-- One dead letter of one tenant.
SELECT d.*, r.payload_ref, r.last_error FROM dead_letters d JOIN runs r ON r.id = d.run_id
WHERE d.run_id = $1 AND d.tenant_id = $2;
