-- Workflow ids (issue 40 item 3, signal-with-start): the user's own id for a workflow run,
-- unique per tenant and task while the run is not final. Expand-only: a nullable column
-- (runs without an id, and every run the previous release writes, keep NULL) and indexes.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS workflow_id text;

-- At most one non-final run per (tenant, task, workflow id): two concurrent starts never make
-- two runs (the second's insert fails here; ostinato.runs.workflow_ids serialises them first).
CREATE UNIQUE INDEX IF NOT EXISTS runs_workflow_id_running
    ON runs (tenant_id, task, workflow_id)
    WHERE workflow_id IS NOT NULL AND state NOT IN ('succeeded', 'dead_lettered', 'cancelled');

-- The runs of a workflow id, newest first: the reuse policy's look at the previous run and
-- GET /v1/runs?workflow_id=.
CREATE INDEX IF NOT EXISTS runs_workflow_id
    ON runs (tenant_id, workflow_id, scheduled_at DESC)
    WHERE workflow_id IS NOT NULL;
