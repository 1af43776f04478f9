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
