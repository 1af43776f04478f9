-- name: ledger_jobs
-- The ledger check's sweep: active and paused recurring jobs after an id (keyset pages).
SELECT id, tenant_id, schedule, status, next_slot, overlap, calendar, version, shard,
       last_missing_slot
FROM jobs
WHERE kind IN ('cron', 'every') AND status IN ('active', 'paused') AND id > $1
ORDER BY id
LIMIT $2;

-- name: ledger_runs_of_job
-- The ledger: a tenant's job's scheduled runs (not manual, not children, not a DAG's node runs)
-- with slots in [from, to), and a DAG job's DAG runs (its occurrences; `dag` true, their state a
-- DAG run's: the node runs share the job and slot, and none of them is the occurrence).
SELECT id, scheduled_for, state, false AS dag FROM runs
WHERE job_id = $1 AND tenant_id = $2 AND scheduled_for >= $3 AND scheduled_for < $4
  AND trigger NOT IN ('manual', 'dag') AND parent_run_id IS NULL
UNION ALL
SELECT id, scheduled_for, state, true AS dag FROM dag_runs
WHERE job_id = $1 AND tenant_id = $2 AND scheduled_for >= $3 AND scheduled_for < $4
ORDER BY scheduled_for;

-- name: ledger_skips_of_job
-- The ledger: a tenant's job's recorded skips overlapping [from, to), by first slot.
SELECT first_slot, last_slot, reason FROM occurrence_skips
WHERE job_id = $1 AND tenant_id = $2 AND last_slot >= $3 AND first_slot < $4
ORDER BY first_slot;

-- name: ledger_findings_recorded
-- The ledger check: which of these finding event ids (job + slot + kind) the log already holds.
SELECT event_id FROM events WHERE event_id = ANY($1::uuid[]);

-- name: ledger_unresolved_missing
-- The ledger check: a tenant's job's slots in [from, to) recorded missing (LedgerSlotMissing)
-- and not corrected since (no LedgerSlotResolved), through the partial index
-- events_ledger_slots (a job's few findings, never its whole stream).
SELECT (m.data->>'scheduled_for')::timestamptz AS slot FROM events m
WHERE m.stream_id = $1 AND m.tenant_id = $2 AND m.type = 'LedgerSlotMissing'
  AND (m.data->>'scheduled_for')::timestamptz >= $3
  AND (m.data->>'scheduled_for')::timestamptz < $4
  AND NOT EXISTS (SELECT 1 FROM events r
                  WHERE r.stream_id = $1 AND r.type = 'LedgerSlotResolved'
                    AND (r.data->>'scheduled_for')::timestamptz
                        = (m.data->>'scheduled_for')::timestamptz)
ORDER BY 1;

-- name: ledger_carried_of_job
-- The ledger: a tenant's job's slots whose runs retention removed (migration 0046's
-- ledger_carried), ranges of one state overlapping [from, to), by first slot.
SELECT first_slot, last_slot, state FROM ledger_carried
WHERE job_id = $1 AND tenant_id = $2 AND last_slot >= $3 AND first_slot < $4
ORDER BY first_slot;
