-- 0030: DAGs (docs/DAGS.md). Read models of the `dag` and `dag_run` streams, written only by
-- the projector (ostinato.eventlog.readmodels) and rebuilt with the others.
--
-- dags: a tenant's DAG by name, with its current version; dag_versions: every version's
-- normalised definition, by its content hash (a changed definition is a new version, never an
-- edit, so ostinato_app may not update or delete one). dag_runs: one execution of one version;
-- dag_run_nodes: each node of a DAG run, its state and the run that executes it (run_id is
-- derived from the DAG run, the node key and the node's generation: a retry from the node is
-- the next generation).

CREATE TABLE dags (
    id           uuid        PRIMARY KEY,
    tenant_id    uuid        NOT NULL,
    name         text        NOT NULL,
    version      integer     NOT NULL,  -- the current definition's number (1, 2, ...)
    version_hash text        NOT NULL,
    node_count   integer     NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    stream_version integer   NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE dag_versions (
    dag_id       uuid        NOT NULL,
    version      integer     NOT NULL,
    tenant_id    uuid        NOT NULL,
    version_hash text        NOT NULL,
    definition   json        NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (dag_id, version)  -- a definition may come back: A, B, then A again is v3
);
REVOKE UPDATE, DELETE ON dag_versions FROM ostinato_app;

CREATE TABLE dag_runs (
    id           uuid        PRIMARY KEY,
    tenant_id    uuid        NOT NULL,
    dag_id       uuid        NOT NULL,
    dag_version  integer     NOT NULL,
    state        text        NOT NULL,  -- pending | running | succeeded | failed | cancelled
    trigger      text        NOT NULL,  -- api | at | schedule | repair (the reconciler)
    due_at       timestamptz NOT NULL,
    job_id       uuid,                  -- the job whose occurrence started it (trigger schedule)
    scheduled_for timestamptz,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL,
    started_at   timestamptz,
    finished_at  timestamptz,
    updated_at   timestamptz NOT NULL,
    version      integer     NOT NULL
);
CREATE INDEX dag_runs_by_dag ON dag_runs (tenant_id, dag_id, created_at DESC);
-- A DAG job's occurrences (the reconciler's gap check: which slots have a DAG run).
CREATE INDEX dag_runs_job_slot ON dag_runs (job_id, scheduled_for) WHERE job_id IS NOT NULL;
-- The scheduler's start poll: DAG runs asked for an instant that has come.
CREATE INDEX dag_runs_due ON dag_runs (due_at) WHERE state = 'pending';

CREATE TABLE dag_run_nodes (
    dag_run_id   uuid        NOT NULL,
    key          text        NOT NULL,
    tenant_id    uuid        NOT NULL,
    state        text        NOT NULL,  -- waiting | active | succeeded | failed | cancelled
                                        -- | upstream_failed | skipped
    run_id       uuid,
    generation   integer     NOT NULL DEFAULT 0,
    ready_at     timestamptz,
    finished_at  timestamptz,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (dag_run_id, key)
);
-- The scheduler's advance poll: active nodes (their runs are looked up by id).
CREATE INDEX dag_run_nodes_active ON dag_run_nodes (run_id) WHERE state = 'active';
CREATE INDEX dag_run_nodes_run ON dag_run_nodes (run_id);

-- A DAG run's node runs share its job (the DAG, or the job whose occurrence started it) and
-- occurrence, as a workflow's children share their parent's: one run per occurrence holds for
-- runs the scheduler makes, and node runs are one per (DAG run, node, generation) by their id.
DROP INDEX runs_job_slot;
CREATE UNIQUE INDEX runs_job_slot ON runs (job_id, scheduled_for)
    WHERE parent_run_id IS NULL AND trigger <> 'dag';
