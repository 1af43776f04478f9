-- Workflow ids (issue 40 item 3, signal-with-start): the user's own id for a workflow run,
-- at most one run not final per tenant, task and id. A side table of its own, not a column of
-- `runs`: the previous release reads `SELECT * FROM runs` into a positional row type that
-- refuses an extra column (docs/UPGRADES.md), so `runs` keeps its shape during the upgrade.
-- A read model: the projection of RunScheduled's optional workflow_id, written in the
-- transaction that creates the run (and by a rebuild, the same rows). Runs started without an
-- id write nothing here.
CREATE TABLE IF NOT EXISTS run_workflow_ids (
    run_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    task text NOT NULL,
    workflow_id text NOT NULL,
    created_at timestamptz NOT NULL,  -- the RunScheduled's occurred_at
    seq bigint NOT NULL  -- its position in the log: the order of an id's runs (never ties)
);

-- An id's runs, newest first: whether one still runs and the reuse policy's look at the last
-- (ostinato.runs.workflow_ids, under its advisory lock), and GET /v1/runs?workflow_id=.
CREATE INDEX IF NOT EXISTS run_workflow_ids_by_id
    ON run_workflow_ids (tenant_id, task, workflow_id, seq DESC);
-- GET /v1/runs?workflow_id= without a task.
CREATE INDEX IF NOT EXISTS run_workflow_ids_by_tenant
    ON run_workflow_ids (tenant_id, workflow_id, seq DESC);
