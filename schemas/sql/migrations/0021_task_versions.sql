-- 0021: versioned handlers. A run remembers the handler version of the worker that started its
-- latest attempt (`task_version`); a workflow's first start pins it (`pinned`): from then on
-- only a worker serving that version may claim it, so a recorded history is never replayed by
-- other code. `payload_version`: the payload schema's version at submission (a queued run is
-- only given to a worker that accepts it). `stuck_version`: the run's version when the
-- reconciler last recorded RunStuck (one event per stuck episode). Workers declare the version
-- of each task they serve and the payload versions they accept with every claim.
ALTER TABLE runs ADD COLUMN task_version text,
                 ADD COLUMN pinned boolean NOT NULL DEFAULT false,
                 ADD COLUMN payload_version integer,
                 ADD COLUMN stuck_version integer;
ALTER TABLE workers ADD COLUMN versions jsonb,
                    ADD COLUMN payload_versions jsonb;

-- The reconciler's and GET /v1/tasks' per-version counts of runs not final.
CREATE INDEX runs_task_versions ON runs (tenant_id, task, task_version)
    WHERE state NOT IN ('succeeded', 'dead_lettered', 'cancelled');

-- The reconciler's stuck-run sweep (stuck_runs_by_reason): pinned runs waiting for a worker,
-- and dead letters of a failed compensation not yet triaged away.
CREATE INDEX runs_pinned_waiting ON runs (updated_at)
    WHERE pinned AND state IN ('scheduled', 'queued', 'retry_scheduled');
CREATE INDEX dead_letters_compensation_failed ON dead_letters (dead_lettered_at)
    WHERE error_type = 'compensation_failed' AND triage_state IN ('new', 'acknowledged');
