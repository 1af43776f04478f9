-- name: dag_by_id
-- A tenant's DAG with its current version.
SELECT id, tenant_id, name, version, version_hash, node_count, created_at, updated_at,
       stream_version
FROM dags WHERE id = $1 AND tenant_id = $2;

-- name: dag_by_name
-- A tenant's DAG by its name (POST /v1/dags defines a new version of an existing name).
SELECT id, tenant_id, name, version, version_hash, node_count, created_at, updated_at,
       stream_version
FROM dags WHERE tenant_id = $1 AND name = $2;

-- name: lock_dag_by_name
-- The writer of a DAG's next version locks its row (two definitions at once: one waits).
SELECT id, tenant_id, name, version, version_hash, node_count, created_at, updated_at,
       stream_version
FROM dags WHERE tenant_id = $1 AND name = $2 FOR UPDATE;

-- name: list_dags
-- A tenant's DAGs by name, a page after the name `$2` ('' for the first).
SELECT id, tenant_id, name, version, version_hash, node_count, created_at, updated_at,
       stream_version
FROM dags WHERE tenant_id = $1 AND name > $2 ORDER BY name LIMIT $3;

-- name: dag_version
-- One version's definition.
SELECT dag_id, version, version_hash, definition, created_at
FROM dag_versions WHERE dag_id = $1 AND version = $2;

-- name: dag_versions_of
-- Versions of many DAGs at once (the advance duty's DAG runs), by (dag, version) pairs.
SELECT v.dag_id, v.version, v.version_hash, v.definition, v.created_at
FROM dag_versions v
JOIN unnest($1::uuid[], $2::int[]) AS k(dag_id, version)
  ON v.dag_id = k.dag_id AND v.version = k.version;

-- name: dag_run_by_id
-- A tenant's DAG run.
SELECT id, tenant_id, dag_id, dag_version, state, trigger, due_at, job_id, scheduled_for,
       cancel_requested, created_at, started_at, finished_at, updated_at, version
FROM dag_runs WHERE id = $1 AND tenant_id = $2;

-- name: lock_dag_run
-- A command on a tenant's DAG run locks it first (cancel, retry from node).
SELECT id, tenant_id, dag_id, dag_version, state, trigger, due_at, job_id, scheduled_for,
       cancel_requested, created_at, started_at, finished_at, updated_at, version
FROM dag_runs WHERE id = $1 AND tenant_id = $2 FOR UPDATE;

-- name: lock_dag_runs_skip
-- The advance duty locks the DAG runs it found, skipping those another writer holds.
SELECT id, tenant_id, dag_id, dag_version, state, trigger, due_at, job_id, scheduled_for,
       cancel_requested, created_at, started_at, finished_at, updated_at, version
FROM dag_runs WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE SKIP LOCKED;

-- name: dag_runs_of_dag
-- A DAG's runs, newest first.
SELECT id, tenant_id, dag_id, dag_version, state, trigger, due_at, job_id, scheduled_for,
       cancel_requested, created_at, started_at, finished_at, updated_at, version
FROM dag_runs WHERE tenant_id = $1 AND dag_id = $2 ORDER BY created_at DESC, id LIMIT $3;

-- name: dag_run_nodes
-- The nodes of DAG runs with their runs' progress (state, attempts, times, output).
SELECT n.dag_run_id, n.key, n.state, n.run_id, n.generation, n.ready_at, n.finished_at,
       r.state AS run_state, coalesce(r.attempt, 0) AS attempt, r.started_at AS run_started_at,
       r.finished_at AS run_finished_at, r.output_ref, r.last_error
FROM dag_run_nodes n LEFT JOIN runs r ON r.id = n.run_id
WHERE n.dag_run_id = ANY($1::uuid[])
ORDER BY n.dag_run_id, n.key;

-- name: first_starts
-- Each run's first attempt's start, from the log (the runs projection keeps the last one's):
-- for nodes that took more than one attempt. Each run's events by the primary key, each with
-- its tenant.
SELECT e.stream_id AS run_id, min(e.occurred_at) AS started_at
FROM events e JOIN unnest($1::uuid[], $2::uuid[]) AS r(id, tenant_id)
     ON e.stream_id = r.id AND e.tenant_id = r.tenant_id
WHERE e.type = 'RunStarted'
GROUP BY e.stream_id;

-- name: dag_runs_with_ended_nodes
-- The advance poll: DAG runs with an active node whose run is final (partial index
-- dag_run_nodes_active; each run looked up by its primary key).
SELECT DISTINCT n.dag_run_id
FROM dag_run_nodes n JOIN runs r ON r.id = n.run_id
WHERE n.state = 'active' AND r.state IN ('succeeded', 'dead_lettered', 'cancelled')
LIMIT $1;

-- name: dag_runs_due
-- The start poll: DAG runs asked for an instant that has come (partial index dag_runs_due).
SELECT id FROM dag_runs
WHERE state = 'pending' AND due_at <= $1::timestamptz
ORDER BY due_at LIMIT $2;

-- name: any_dag_work
-- Whether a DAG run has a node whose run ended, or a start time that has come: asked before
-- the scheduler opens a transaction to advance DAG runs.
SELECT (SELECT true FROM dag_run_nodes n JOIN runs r ON r.id = n.run_id
        WHERE n.state = 'active' AND r.state IN ('succeeded', 'dead_lettered', 'cancelled')
        LIMIT 1) IS NOT NULL
    OR coalesce((SELECT due_at FROM dag_runs WHERE state = 'pending'
                 ORDER BY due_at LIMIT 1) <= $1::timestamptz, false);

-- name: current_definitions
-- The scheduler firing DAG jobs: each DAG's current version and definition (any tenant: the
-- caller checks the job's tenant).
SELECT d.id, d.tenant_id, d.version, v.definition
FROM dags d JOIN dag_versions v ON v.dag_id = d.id AND v.version = d.version
WHERE d.id = ANY($1::uuid[]);

-- name: existing_dag_ids
-- Job submission: which of these DAG ids are the tenant's.
SELECT id FROM dags WHERE tenant_id = $1 AND id = ANY($2::uuid[]);

-- name: dag_node_of_run
-- The web UI's run page: the DAG run and node a run executes, if any (index dag_run_nodes_run).
SELECT n.dag_run_id, n.key FROM dag_run_nodes n JOIN dag_runs d ON d.id = n.dag_run_id
WHERE n.run_id = $2 AND d.tenant_id = $1;
