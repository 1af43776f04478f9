-- name: pending_signals
-- The oldest signal not yet delivered per (run, name) asked for (index run_signals_pending).
SELECT DISTINCT ON (run_id, name) run_id, signal_id, name, payload, received_at, payload_ref
FROM run_signals
WHERE run_id = ANY($1::uuid[]) AND name = ANY($2::text[]) AND delivered_seq IS NULL
ORDER BY run_id, name, received_at, signal_id;

-- name: signal_by_id
-- A signal already received (a repeated send with the same idempotency key).
SELECT run_id, signal_id, name, payload, received_at, delivered_seq, payload_ref
FROM run_signals WHERE run_id = $1 AND signal_id = $2 AND tenant_id = $3;

-- name: database_now
-- The time authority: what the database's clock says now.
SELECT clock_timestamp();
