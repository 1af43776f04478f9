-- 0017: child workflows (`ctx.child`, `ctx.start_child`; ostinato.runs.children).
--
-- A child is a run of its parent's job and occurrence (the same job_id and scheduled_for), so
-- the one-run-per-occurrence key now holds for runs without a parent only; a child's id derives
-- from its parent's and its workflow position, which keeps it unique.
ALTER TABLE runs ADD COLUMN parent_run_id uuid,
                 ADD COLUMN parent_notified boolean NOT NULL DEFAULT false,
                 ADD COLUMN wait_child uuid;
ALTER TABLE runs DROP CONSTRAINT runs_job_id_scheduled_for_key;
CREATE UNIQUE INDEX runs_job_slot ON runs (job_id, scheduled_for) WHERE parent_run_id IS NULL;

-- A parent's children (the cancel cascade, GET /v1/runs/{id}).
CREATE INDEX runs_children ON runs (parent_run_id, id) WHERE parent_run_id IS NOT NULL;

-- The scheduler's poll for final children whose parent has not been told yet: empty but for the
-- moment between a child's end and its parent's wake-up, whatever the number of runs.
CREATE INDEX runs_children_done ON runs (updated_at)
    WHERE parent_run_id IS NOT NULL AND NOT parent_notified
      AND state IN ('succeeded', 'dead_lettered', 'cancelled');
