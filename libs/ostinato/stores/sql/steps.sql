-- name: steps_of_run
-- A run's recorded workflow steps after position $3, in order, a page at a time: one descent
-- of the primary key (run_id, seq), whatever the length of the history.
SELECT seq, name, succeeded, output, output_ref, error_type, message, attempt, tries,
       duration_ms, recorded_at
FROM run_steps
WHERE run_id = $1 AND tenant_id = $2 AND seq > $3
ORDER BY seq
LIMIT $4;
