-- Reads of job edits (PATCH /v1/jobs/{id}): definition versions, and the runs of a job still
-- waiting to be dispatched, which an edit with apply_to_scheduled amends.

-- name: definition_versions
-- The definition version of each job that has been edited (a job never edited: 1, no row).
SELECT job_id, definition_version FROM job_definitions WHERE job_id = ANY($1::uuid[]);

-- name: lock_scheduled_runs
-- The job's runs not yet dispatched and never started (state scheduled, attempt 0: a workflow
-- woken from a suspension is scheduled too, mid-way, and keeps what it started with), locked
-- for RunAmended: the dispatcher appending RunQueued to one of them meanwhile meets the stream
-- version this edit moved on.
SELECT id, tenant_id, version, state FROM runs
WHERE job_id = $1 AND tenant_id = $2 AND state = 'scheduled' AND attempt = 0
ORDER BY scheduled_for
FOR UPDATE;
