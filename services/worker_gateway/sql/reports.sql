-- name: lock_parents_without_waiting
-- The parents of chunk runs a report's transaction ended, locked only if free: that transaction
-- holds the chunks' rows, and the scheduler's poll and a cancel lock a parent before its
-- children, so waiting here could deadlock. A parent skipped leaves its chunks' ends to the
-- scheduler's poll (runs_children_done). The columns of stores/sql/runs.sql lock_runs.
SELECT id, tenant_id, job_id, task, pool, priority, state, attempt, fencing_token, payload_ref,
       scheduled_for, due_at, traceparent, version, failures, retry_policy, cancel_requested,
       timeout_seconds, queue_wait_seconds, on_queue_wait, worker_id, started_at, last_error,
       steps_done, wait_reason, wait_seq, wait_name, wait_signal, wake_at, deadline_at,
       parent_run_id, wait_child, compensable, paused, paused_at, frozen_wake_at
FROM runs WHERE id = ANY($1::uuid[])
ORDER BY id
FOR UPDATE SKIP LOCKED;

-- name: lock_ended_chunks
-- The chunk runs among $1 (a report's, final now in its transaction) and the other ended chunks
-- of the same parents not told yet (a report that found their parent busy left them): locked if
-- free, still final and not told. The others are looked for among the oldest 500 entries of
-- runs_children_done (the final children not told: few, as every end is told at once or by the
-- next poll); the rows are reached by their ids, so neither a parent's many chunks nor a
-- backlog of ends is ever scanned whole.
WITH left_over AS MATERIALIZED (
    SELECT id FROM runs
    WHERE parent_run_id IS NOT NULL AND NOT parent_notified
      AND state IN ('succeeded', 'dead_lettered', 'cancelled')
    ORDER BY updated_at
    LIMIT 500
), candidates AS MATERIALIZED (
    SELECT unnest($1::uuid[]) AS id UNION SELECT id FROM left_over
)
SELECT r.id, r.tenant_id, r.parent_run_id, r.task, r.state, r.version, r.traceparent,
       r.output_ref, r.last_error, r.parent_notified, r.trigger
FROM candidates AS c JOIN runs AS r ON r.id = c.id
WHERE r.parent_run_id IN (SELECT parent_run_id FROM runs WHERE id = ANY($1::uuid[]))
  AND r.trigger = 'fan_out' AND NOT r.parent_notified
  AND r.state IN ('succeeded', 'dead_lettered', 'cancelled')
ORDER BY r.id
FOR UPDATE OF r SKIP LOCKED;
