-- The archiver's reads (services/reconciler/checks/archive.py, docs/RETENTION.md): which
-- finished runs are due to leave the hot tables, and each one's whole history, read in a few
-- set-based statements per batch. The removal itself is migration 0046's procedure.

-- name: archive_candidates
-- Up to $1 runs past their tenant's retention that no rule keeps ($2: the reconciler's checks
-- window; $3: the operator's retention floor in seconds, OSTINATO_RETENTION_FLOOR_SECONDS: no
-- run leaves before greatest(keep, floor)), with their stream's head version (what a removal
-- without an archive expects). One statement a batch, every rule of docs/RETENTION.md's table
-- applied here in SQL (ostinato_retention_kept, the SQL twin of the pure rules, fed each
-- run's facts) plus the procedure's own two, so what it picks the procedure removes:
--   * tenants with an expired run, the one with the oldest end first (one probe of
--     runs_ended each), then each one's runs through runs_ended (tenant_id, finished_at),
--     oldest end first, lazily: the outer LIMIT stops the scan once $1 runs passed, so a pass
--     reads about $1 runs plus those kept at the head of the index (never every tenant's $1);
--   * the facts are columns of a fenced subquery (OFFSET 0: not flattened), each an index
--     probe by key evaluated per row as it is read, so the rules' function stays inlinable
--     (its arguments are plain columns) and the scan stays ordered (no join for the planner
--     to turn into a sort of every expired run): the facts ostinato_run_kept reads, read
--     the same way.
-- A parent with any child in the hot tables is not picked (the procedure's
-- child_in_hot_tables, made simple): its children leave first, it follows a pass later.
SELECT c.id AS run_id, t.id AS tenant_id,
       (SELECT max(e.version) FROM events e WHERE e.stream_id = c.id) AS version,
       t.archive, c.finished_at
FROM (
    SELECT t.id, coalesce(tr.archive, true) AS archive,
           greatest(coalesce(tr.keep_seconds, 2592000), $3::bigint) AS keep_seconds,
           o.oldest
    FROM tenants t
    LEFT JOIN tenant_retention tr ON tr.tenant_id = t.id
    CROSS JOIN LATERAL (
        SELECT min(r.finished_at) AS oldest FROM runs r
        WHERE r.tenant_id = t.id AND r.state IN ('succeeded', 'dead_lettered', 'cancelled')
    ) AS o
    WHERE o.oldest <= now()
          - greatest(coalesce(tr.keep_seconds, 2592000), $3::bigint) * interval '1 second'
    ORDER BY o.oldest, t.id
) AS t
CROSS JOIN LATERAL (
    SELECT f.id, f.finished_at
    FROM (
        SELECT r.id, r.state, r.finished_at, r.job_id, r.scheduled_for,
               EXISTS (SELECT 1 FROM run_holds h WHERE h.run_id = r.id) AS held,
               (SELECT d.triage_state FROM dead_letters d WHERE d.run_id = r.id)
                   AS triage_state,
               (SELECT d.triaged_at FROM dead_letters d WHERE d.run_id = r.id) AS triaged_at,
               -- any child in the hot tables (final or not) keeps its parent in the pick; a
               -- scalar probe of runs_children, not EXISTS (which the planner may hash over
               -- every run of the table: a sequential scan of `runs` each pass)
               (SELECT ch.id FROM runs ch WHERE ch.parent_run_id = r.id LIMIT 1) IS NOT NULL
                   AS has_children,
               CASE WHEN r.parent_run_id IS NOT NULL THEN (
                   SELECT p.state FROM runs p WHERE p.id = r.parent_run_id) END
                   AS parent_state,
               r.parent_run_id IS NULL OR r.parent_notified AS parent_notified,
               (SELECT dr.state FROM dag_run_nodes n JOIN dag_runs dr ON dr.id = n.dag_run_id
                WHERE n.run_id = r.id ORDER BY dr.created_at DESC LIMIT 1) AS dag_run_state,
               r.trigger, r.parent_run_id,
               (SELECT j.kind FROM jobs j WHERE j.id = r.job_id) AS job_kind,
               (SELECT j.status FROM jobs j WHERE j.id = r.job_id) AS job_status,
               (SELECT j.complete_within_seconds FROM jobs j WHERE j.id = r.job_id)
                   AS complete_within_seconds,
               (SELECT j.consecutive_failures FROM jobs j WHERE j.id = r.job_id)
                   AS consecutive_failures
        FROM runs r
        WHERE r.tenant_id = t.id AND r.state IN ('succeeded', 'dead_lettered', 'cancelled')
          AND r.finished_at <= now() - t.keep_seconds * interval '1 second'
        ORDER BY r.finished_at
        OFFSET 0
    ) AS f
    WHERE NOT f.has_children
      AND cardinality(ostinato_retention_kept(
              f.state, f.finished_at, f.held, f.triage_state, f.triaged_at,
              false,  -- children_not_final: has_children already keeps such a parent
              f.parent_state, f.parent_notified, f.dag_run_state,
              -- a slot the gap check (runs_of_job_between: every run not manual) reads
              CASE WHEN f.trigger <> 'manual' AND f.job_kind IN ('cron', 'every')
                        AND f.job_status IN ('active', 'paused')
                   THEN f.scheduled_for END,
              CASE WHEN f.parent_run_id IS NULL AND f.trigger <> 'dag'
                   THEN f.scheduled_for + f.complete_within_seconds * interval '1 second' END,
              -- the latest success of a recurring job, by slot or by end (runs_job_slot)
              f.state = 'succeeded' AND f.job_kind IN ('cron', 'every')
                  AND f.job_status <> 'deleted' AND f.trigger <> 'dag'
                  AND (NOT EXISTS (
                           SELECT 1 FROM runs s
                           WHERE s.job_id = f.job_id AND s.parent_run_id IS NULL
                             AND s.trigger <> 'dag' AND s.state = 'succeeded'
                             AND s.scheduled_for > f.scheduled_for)
                       OR NOT EXISTS (
                           SELECT 1 FROM runs s
                           WHERE s.job_id = f.job_id AND s.parent_run_id IS NULL
                             AND s.trigger <> 'dag' AND s.state = 'succeeded'
                             AND s.finished_at > f.finished_at)),
              t.keep_seconds, now(), $2::interval)) = 0
      -- the procedure's job_failure_streak: a dead letter its recurring job still counts
      AND NOT (f.state = 'dead_lettered' AND f.job_kind IN ('cron', 'every')
               AND f.consecutive_failures > 0
               AND NOT EXISTS (
                   SELECT 1 FROM runs s
                   WHERE s.job_id = f.job_id AND s.parent_run_id IS NULL
                     AND s.trigger <> 'dag' AND s.state = 'succeeded'
                     AND s.finished_at > f.finished_at))
    LIMIT $1
) AS c
LIMIT $1;

-- name: archive_run_rows
-- The runs rows as they stand, every column (to_json: a column added later is archived too).
SELECT r.id, to_json(r) AS row FROM runs r WHERE r.id = ANY($1::uuid[]) ORDER BY r.id;

-- name: archive_run_events
-- Every event of the runs' streams, in order (the primary key's index).
SELECT stream_id, seq, version, type, data, actor, epoch, traceparent, occurred_at,
       recorded_at, event_id
FROM events
WHERE stream_id = ANY($1::uuid[]) AND stream_type = 'run'
ORDER BY stream_id, version;

-- name: archive_job_rows
-- The one-off jobs among the runs' jobs (they leave with their last run, migration 0046).
SELECT j.id, to_json(j) AS row FROM jobs j
WHERE j.id = ANY($1::uuid[]) AND j.kind = 'at'
ORDER BY j.id;

-- name: archive_job_events
-- Every event of those jobs' streams, in order.
SELECT stream_id, seq, version, type, data, actor, epoch, traceparent, occurred_at,
       recorded_at, event_id
FROM events
WHERE stream_id = ANY($1::uuid[]) AND stream_type = 'job'
ORDER BY stream_id, version;

-- name: archive_run_steps
-- The workflow steps the runs recorded, and (set_aside_version not null) those an operator's
-- reset set aside.
SELECT run_id, seq, name, succeeded, attempt, tries, duration_ms, recorded_at, output,
       output_ref, error_type, message, supplied_by, NULL::int AS set_aside_version,
       NULL::timestamptz AS set_aside_at
FROM run_steps WHERE run_id = ANY($1::uuid[])
UNION ALL
SELECT run_id, seq, name, succeeded, attempt, tries, duration_ms, recorded_at, output,
       output_ref, error_type, message, supplied_by, set_aside_version, set_aside_at
FROM run_steps_set_aside WHERE run_id = ANY($1::uuid[])
ORDER BY run_id, set_aside_version NULLS FIRST, seq;

-- name: archive_run_blobs
-- The blobs the runs reference: payload, output, captured logs, step outputs, signal payloads
-- (one kept in the object store: its reference, which the archive document keeps).
WITH refs AS (
    SELECT id AS run_id, payload_ref AS ref FROM runs WHERE id = ANY($1::uuid[])
    UNION SELECT id, output_ref FROM runs WHERE id = ANY($1::uuid[])
    UNION SELECT id, logs_ref FROM runs WHERE id = ANY($1::uuid[])
    UNION SELECT run_id, output_ref FROM run_steps WHERE run_id = ANY($1::uuid[])
    UNION SELECT run_id, output_ref FROM run_steps_set_aside WHERE run_id = ANY($1::uuid[])
    UNION SELECT run_id, payload_ref FROM run_signals WHERE run_id = ANY($1::uuid[])
)
SELECT refs.run_id, b.id, b.kind, b.data, b.size_bytes, b.created_at, b.sha256, b.object_key
FROM refs JOIN blobs b ON b.id = refs.ref
ORDER BY refs.run_id, b.id;

-- name: archive_run_labels
-- The runs' workflow ids and search attributes (the index rows list them).
SELECT r.id AS run_id, w.workflow_id, a.attributes
FROM unnest($1::uuid[]) AS r(id)
LEFT JOIN run_workflow_ids w ON w.run_id = r.id
LEFT JOIN run_attributes a ON a.run_id = r.id
WHERE w.run_id IS NOT NULL OR a.run_id IS NOT NULL
ORDER BY r.id;

-- name: archive_remove_runs
-- Archive, then remove: migration 0046's owner-role procedure re-checks every rule under the
-- row lock and removes, in this transaction, each run it finds removable.
SELECT run_id, removed, kept_because
FROM ostinato_remove_runs($1::uuid[], $2::int[], $3::interval);

-- name: archive_passed
-- A pass that reached its end: failing no more (now(): the database's clock).
INSERT INTO archive_state (id, failing_since, last_error, last_success_at, updated_at)
VALUES (true, NULL, NULL, now(), now())
ON CONFLICT (id) DO UPDATE SET failing_since = NULL, last_error = NULL,
    last_success_at = now(), updated_at = now();

-- name: archive_failed
-- A pass that failed ($1: why): failing since the first failure after the last success.
INSERT INTO archive_state (id, failing_since, last_error, updated_at)
VALUES (true, now(), $1, now())
ON CONFLICT (id) DO UPDATE SET failing_since = coalesce(archive_state.failing_since, now()),
    last_error = $1, updated_at = now();

-- name: archive_health
-- The alert's read: since when archiving fails, and for how long (the database's clock).
SELECT failing_since, last_error, last_success_at,
       extract(epoch FROM now() - failing_since)::float8 AS failing_seconds
FROM archive_state WHERE id;

-- name: dag_run_candidates
-- Up to $1 finished DAG runs past their tenant's retention (and the operator's floor $3) that
-- no rule keeps (migration 0052's ostinato_dag_run_kept, $2 the checks window), with their
-- stream's head version: the tenant with the oldest end first (one probe of dag_runs_ended
-- each), then each one's DAG runs through dag_runs_ended, oldest end first, read lazily until
-- $1 passed. A DAG run whose node runs are still hot is passed over (node_run_in_hot_tables):
-- they leave first, the runs' pick before this one in the same pass.
SELECT c.id AS dag_run_id, t.id AS tenant_id,
       (SELECT max(e.version) FROM events e WHERE e.stream_id = c.id) AS version,
       t.archive, c.finished_at
FROM (
    SELECT t.id, coalesce(tr.archive, true) AS archive,
           greatest(coalesce(tr.keep_seconds, 2592000), $3::bigint) AS keep_seconds,
           o.oldest
    FROM tenants t
    LEFT JOIN tenant_retention tr ON tr.tenant_id = t.id
    CROSS JOIN LATERAL (
        SELECT min(d.finished_at) AS oldest FROM dag_runs d
        WHERE d.tenant_id = t.id AND d.state IN ('succeeded', 'failed', 'cancelled')
    ) AS o
    WHERE o.oldest <= now()
          - greatest(coalesce(tr.keep_seconds, 2592000), $3::bigint) * interval '1 second'
    ORDER BY o.oldest, t.id
) AS t
CROSS JOIN LATERAL (
    SELECT f.id, f.finished_at
    FROM (
        SELECT d.id, d.finished_at
        FROM dag_runs d
        WHERE d.tenant_id = t.id AND d.state IN ('succeeded', 'failed', 'cancelled')
          AND d.finished_at <= now() - t.keep_seconds * interval '1 second'
        ORDER BY d.finished_at
        OFFSET 0
    ) AS f
    WHERE cardinality(ostinato_dag_run_kept(f.id, now(), $2::interval)) = 0
    LIMIT $1
) AS c
LIMIT $1;

-- name: archive_dag_run_rows
-- The dag_runs rows as they stand, every column.
SELECT d.id, to_json(d) AS row FROM dag_runs d WHERE d.id = ANY($1::uuid[]) ORDER BY d.id;

-- name: archive_dag_run_nodes
-- Their nodes' rows, every column, by DAG run and key.
SELECT n.dag_run_id AS id, to_json(n) AS row FROM dag_run_nodes n
WHERE n.dag_run_id = ANY($1::uuid[])
ORDER BY n.dag_run_id, n.key;

-- name: archive_dag_run_events
-- Every event of the DAG runs' streams, in order.
SELECT stream_id, seq, version, type, data, actor, epoch, traceparent, occurred_at,
       recorded_at, event_id
FROM events
WHERE stream_id = ANY($1::uuid[]) AND stream_type = 'dag_run'
ORDER BY stream_id, version;

-- name: archive_remove_dag_runs
-- Archive, then remove: migration 0052's owner-role procedure re-checks the rules under the row
-- lock and removes, in this transaction, each DAG run it finds removable.
SELECT dag_run_id, removed, kept_because
FROM ostinato_remove_dag_runs($1::uuid[], $2::int[], $3::interval);
