-- The archiver's reads (services/reconciler/checks/archive.py, docs/RETENTION.md): which
-- finished runs are due to leave the hot tables, and each one's whole history, read in a few
-- set-based statements per batch. The removal itself is migration 0046's procedure.

-- name: archive_candidates
-- Up to $1 runs past their tenant's retention that no rule keeps ($2: the reconciler's checks
-- window), with their stream's head version (what a removal without an archive expects),
-- oldest end first, each tenant through runs_ended (tenant_id, finished_at); a run a
-- rule keeps is skipped here, so kept runs at the head of the index never stall the pick.
SELECT c.id AS run_id, t.id AS tenant_id,
       (SELECT max(e.version) FROM events e WHERE e.stream_id = c.id) AS version,
       coalesce(tr.archive, true) AS archive, c.finished_at
FROM tenants t
LEFT JOIN tenant_retention tr ON tr.tenant_id = t.id
CROSS JOIN LATERAL (
    SELECT r.id, r.finished_at FROM runs r
    WHERE r.tenant_id = t.id AND r.state IN ('succeeded', 'dead_lettered', 'cancelled')
      AND r.finished_at < now() - coalesce(tr.keep_seconds, 2592000) * interval '1 second'
      -- one filter on the ordered index scan, so the scan stops at the limit (joins for the
      -- cheap rules made the planner sort every expired run of the tenant first)
      AND cardinality(ostinato_run_kept(r.id, now(), $2::interval)) = 0
    ORDER BY r.finished_at
    LIMIT $1
) AS c
ORDER BY c.finished_at, c.id
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
-- The blobs the runs reference: payload, output, captured logs, step outputs, signal payloads.
WITH refs AS (
    SELECT id AS run_id, payload_ref AS ref FROM runs WHERE id = ANY($1::uuid[])
    UNION SELECT id, output_ref FROM runs WHERE id = ANY($1::uuid[])
    UNION SELECT id, logs_ref FROM runs WHERE id = ANY($1::uuid[])
    UNION SELECT run_id, output_ref FROM run_steps WHERE run_id = ANY($1::uuid[])
    UNION SELECT run_id, output_ref FROM run_steps_set_aside WHERE run_id = ANY($1::uuid[])
    UNION SELECT run_id, payload_ref FROM run_signals WHERE run_id = ANY($1::uuid[])
)
SELECT refs.run_id, b.id, b.kind, b.data, b.size_bytes, b.created_at
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
