-- name: project_dag_defined
-- DagDefined: the version's definition, and the DAG's current version.
WITH v AS (
    INSERT INTO dag_versions (dag_id, version, tenant_id, version_hash, definition, created_at)
    VALUES ($1, $4, $2, $5, $6::text::json, $7)
)
INSERT INTO dags (id, tenant_id, name, version, version_hash, node_count, created_at,
                  updated_at, stream_version)
VALUES ($1, $2, $3, $4, $5, $9, $7, $7, $8)
ON CONFLICT (id) DO UPDATE SET version = $4, version_hash = $5, node_count = $9,
    updated_at = $7, stream_version = $8;

-- name: project_dag_run_started
-- DagRunStarted: the DAG run, pending until its first node is ready, and its nodes, waiting.
WITH n AS (
    INSERT INTO dag_run_nodes (dag_run_id, key, tenant_id, state, updated_at)
    SELECT $1, k, $2, 'waiting', $10 FROM unnest($5::text[]) AS k
)
INSERT INTO dag_runs (id, tenant_id, dag_id, dag_version, state, trigger, due_at, job_id,
                      scheduled_for, created_at, updated_at, version)
VALUES ($1, $2, $3, $4, 'pending', $7, $6, $8, $9, $10, $10, $11);

-- name: project_dag_node_ready
-- DagNodeReady: the node runs (its run was scheduled in the same transaction).
WITH n AS (
    UPDATE dag_run_nodes SET state = 'active', run_id = $3, generation = $4, ready_at = $5,
                             finished_at = NULL, updated_at = $5
    WHERE dag_run_id = $1 AND key = $2
)
UPDATE dag_runs SET state = CASE WHEN state = 'pending' THEN 'running' ELSE state END,
                    started_at = coalesce(started_at, $5), updated_at = $5, version = $6
WHERE id = $1;

-- name: project_dag_node_ended
-- DagNodeFinished / DagNodeSkipped: the node's final state.
WITH n AS (
    UPDATE dag_run_nodes SET state = $3, finished_at = $4, updated_at = $4
    WHERE dag_run_id = $1 AND key = $2
)
UPDATE dag_runs SET updated_at = $4, version = $5 WHERE id = $1;

-- name: project_dag_run_cancelled
-- DagRunCancelled: asked to stop; it finishes when its nodes have.
UPDATE dag_runs SET cancel_requested = true, updated_at = $2, version = $3 WHERE id = $1;

-- name: project_dag_run_retried
-- DagRunRetriedFromNode: the node and its downstream wait again; the DAG run runs again.
WITH n AS (
    UPDATE dag_run_nodes SET state = 'waiting', finished_at = NULL, updated_at = $3
    WHERE dag_run_id = $1 AND key = ANY($2::text[])
)
UPDATE dag_runs SET state = 'running', finished_at = NULL, cancel_requested = false,
                    updated_at = $3, version = $4
WHERE id = $1;

-- name: project_dag_run_finished
-- DagRunFinished: its outcome.
UPDATE dag_runs SET state = $2, finished_at = $3, updated_at = $3, version = $4 WHERE id = $1;

-- name: snapshot_dags
-- For the rebuild-equality check.
SELECT * FROM dags ORDER BY id;

-- name: snapshot_dag_versions
-- For the rebuild-equality check.
SELECT dag_id, version, tenant_id, version_hash, definition::text AS definition, created_at
FROM dag_versions ORDER BY dag_id, version;

-- name: snapshot_dag_runs
-- For the rebuild-equality check.
SELECT * FROM dag_runs ORDER BY id;

-- name: snapshot_dag_run_nodes
-- For the rebuild-equality check.
SELECT * FROM dag_run_nodes ORDER BY dag_run_id, key;
