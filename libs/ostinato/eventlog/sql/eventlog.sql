-- name: append_events
-- Multi-row append; the (stream_id, version) primary key is the optimistic-concurrency check.
-- occurred_at: when the writer decided, by its clock (the database's time, `DatabaseClock`);
-- recorded_at: when PostgreSQL wrote the row (clock_timestamp(), not the transaction's start),
-- so recorded_at is never before occurred_at.
-- The outbox row of the events' messages ($12..$15, built by eventlog/outbox.py `messages`;
-- none when no event travels) goes in with them, in the same statement: one round trip, and a
-- conflict writes neither.
-- $16: the run-end notices (eventlog/ended.py; none unless the append ends a run), sent with
-- pg_notify in the same statement, so PostgreSQL delivers them at commit and never otherwise.
-- `ended` is one row whatever it notifies (count), joined to make it run.
WITH queued AS (
    INSERT INTO outbox (topics, keys, payloads, headers)
    SELECT $12::text[], $13::bytea[], $14::bytea[], $15::text[]
    WHERE cardinality($12::text[]) > 0
), ended AS (
    SELECT count(pg_notify('ostinato_run_ended', n)) AS notified FROM unnest($16::text[]) AS n
)
INSERT INTO events (stream_id, version, stream_type, tenant_id, event_id, type, data, actor,
                    epoch, traceparent, occurred_at, recorded_at)
SELECT s, v, st, t, e, ty, d::json, a, ep, tp, $11::timestamptz, clock_timestamp()
FROM unnest($1::uuid[], $2::int[], $3::text[], $4::uuid[], $5::uuid[], $6::text[], $7::text[],
            $8::text[], $9::bigint[], $10::text[]) AS x(s, v, st, t, e, ty, d, a, ep, tp)
     CROSS JOIN ended
RETURNING seq, recorded_at, event_id;

-- name: append_run_queued
-- RunQueued for a batch of locked runs in one statement (eventlog/columns.py `append_queued`):
-- the events as append_events writes them, the runs as project_run_queued leaves them (the
-- same columns: tests/integration/test_columnar_append.py compares the two paths' rows), their
-- slots as sync_run_slots holds a queued run's, and the outbox row ($10..$13). $2: each run's
-- version after the event.
WITH x AS (
    SELECT * FROM unnest($1::uuid[], $2::int[], $3::uuid[], $4::uuid[], $5::text[], $6::text[],
                         $7::text[]) AS x(id, version, tenant_id, event_id, pool, data, tp)
), logged AS (
    INSERT INTO events (stream_id, version, stream_type, tenant_id, event_id, type, data, actor,
                        epoch, traceparent, occurred_at, recorded_at)
    SELECT id, version, 'run', tenant_id, event_id, 'RunQueued', data::json, $8, NULL, tp,
           $9::timestamptz, clock_timestamp()
    FROM x
), queued AS (
    INSERT INTO outbox (topics, keys, payloads, headers)
    SELECT $10::text[], $11::bytea[], $12::bytea[], $13::text[]
    WHERE cardinality($10::text[]) > 0
), moved AS (
    UPDATE runs SET state = 'queued', pool = x.pool, queued_at = $9::timestamptz,
                    updated_at = $9::timestamptz, version = x.version,
                    traceparent = coalesce(x.tp, runs.traceparent)
    FROM x WHERE runs.id = x.id
    RETURNING runs.id, runs.tenant_id, runs.pool, runs.priority, runs.task,
              runs.concurrency_key
)
INSERT INTO run_slots (run_id, tenant_id, pool, priority, task, concurrency_key)
SELECT id, tenant_id, pool, priority, task, concurrency_key FROM moved
ON CONFLICT (run_id) DO NOTHING;

-- name: append_run_fired
-- A due job's one fired slot for a batch of jobs in one statement (eventlog/columns.py
-- `append_fired`): RunScheduled (version 1 of the run) then OccurrenceFired (the job's) for each,
-- in that order, as append_events writes them; the runs as project_run_scheduled inserts them,
-- the jobs as project_occurrence_fired leaves them (the same columns:
-- tests/integration/test_columnar_append.py compares the two paths' rows), and the outbox row
-- ($31..$34).
WITH x AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::uuid[], $6::text[],
                         $7::int[], $8::bigint[], $9::text[], $10::timestamptz[],
                         $11::timestamptz[], $12::uuid[], $13::text[], $14::text[], $15::text[],
                         $16::uuid[], $17::timestamptz[], $18::text[], $19::timestamptz[],
                         $20::text[], $21::float8[], $22::float8[], $23::text[], $24::uuid[],
                         $25::text[], $26::text[], $27::uuid[], $28::int[]) WITH ORDINALITY
        AS x(id, tenant_id, event_id, data, fired_id, fired_data, job_version, epoch, tp,
             next_run_at, next_slot, job_id, task, pool, priority, payload_ref, scheduled_for,
             trigger, due_at, retry_policy, timeout_seconds, queue_wait_seconds, on_queue_wait,
             replay_of, concurrency_key, resource, parent_run_id, payload_version, n)
), logged AS (
    INSERT INTO events (stream_id, version, stream_type, tenant_id, event_id, type, data, actor,
                        epoch, traceparent, occurred_at, recorded_at)
    SELECT e.stream_id, e.version, e.stream_type, x.tenant_id, e.event_id, e.type, e.data::json,
           $29, x.epoch, x.tp, $30::timestamptz, clock_timestamp()
    FROM x CROSS JOIN LATERAL (VALUES
        (1, x.id, 1, 'run', x.event_id, 'RunScheduled', x.data),
        (2, x.job_id, x.job_version, 'job', x.fired_id, 'OccurrenceFired', x.fired_data)
    ) AS e(k, stream_id, version, stream_type, event_id, type, data)
    ORDER BY x.n, e.k
), queued AS (
    INSERT INTO outbox (topics, keys, payloads, headers)
    SELECT $31::text[], $32::bytea[], $33::bytea[], $34::text[]
    WHERE cardinality($31::text[]) > 0
), created AS (
    INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for,
                      state, attempt, fencing_token, scheduled_at, updated_at, version, trigger,
                      due_at, traceparent, retry_policy, timeout_seconds, queue_wait_seconds,
                      on_queue_wait, replay_of, concurrency_key, resource, parent_run_id,
                      payload_version)
    SELECT id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for, 'scheduled',
           0, 0, $30::timestamptz, $30::timestamptz, 1, trigger,
           coalesce(due_at, scheduled_for), tp, retry_policy::json, timeout_seconds,
           queue_wait_seconds, on_queue_wait, replay_of, concurrency_key, resource,
           parent_run_id, payload_version
    FROM x
)
UPDATE jobs SET next_run_at = x.next_run_at, next_slot = coalesce(x.next_slot, x.next_run_at),
                last_run_at = greatest(jobs.last_run_at, x.scheduled_for),
                runs_created = jobs.runs_created + 1, resume_policy = NULL,
                status = CASE WHEN x.next_run_at IS NULL AND jobs.status = 'active'
                              THEN 'completed' ELSE jobs.status END,
                updated_at = $30::timestamptz, version = x.job_version
FROM x WHERE jobs.id = x.job_id;

-- name: append_run_succeeded
-- RunSucceeded for a batch of locked runs in one statement (eventlog/columns.py
-- `append_succeeded`): the events as append_events writes them (with the outbox row, $12..$15,
-- and the run-end notices, $16), the runs and their jobs' streaks as project_run_succeeded
-- leaves them, the slots freed as sync_run_slots frees a finished run's (the same rows:
-- tests/integration/test_columnar_append.py compares the two paths'). One difference: the
-- outbox row (the `runs.finished` wake-up: "a slot is free") is written only while a run waits
-- for the dispatcher (runs_dispatchable's predicate, as any_dispatchable asks it). Under a
-- steady load most completions free a slot no run waits for, and each such wake-up cost a
-- relay's transaction, the broker, and a dispatcher's read that found nothing. A run that
-- starts waiting after this statement's snapshot wakes the dispatcher itself (`runs.due`),
-- and the dispatcher decides every dispatch_interval_seconds whatever wakes it.
-- $17..$21: a fan-out chunk's `ParentNotified` (its parent locked by the same transaction, which
-- counts the end), the event after its RunSucceeded (NULLs for a run without one): the row is
-- written once, at the later version with parent_notified set, as the two projections leave it,
-- not twice (services/worker_gateway/reports.py `tell_with_ends`).
WITH x AS (
    SELECT * FROM unnest($1::uuid[], $2::int[], $3::uuid[], $4::uuid[], $5::text[], $6::text[],
                         $7::bigint[], $8::text[], $9::uuid[], $10::uuid[], $17::uuid[],
                         $18::text[], $19::text[], $20::bigint[], $21::text[])
        AS x(id, version, tenant_id, event_id, data, actor, epoch, tp, output_ref, logs_ref,
             told_id, told_data, told_actor, told_epoch, told_tp)
), ended AS (
    SELECT count(pg_notify('ostinato_run_ended', n)) AS notified FROM unnest($16::text[]) AS n
), logged AS (
    INSERT INTO events (stream_id, version, stream_type, tenant_id, event_id, type, data, actor,
                        epoch, traceparent, occurred_at, recorded_at)
    SELECT id, version, 'run', tenant_id, event_id, type, data::json, actor, epoch, tp,
           $11::timestamptz, clock_timestamp()
    FROM (SELECT 1 AS k, id, version, tenant_id, event_id, 'RunSucceeded' AS type, data, actor,
                 epoch, tp
          FROM x CROSS JOIN ended
          UNION ALL
          SELECT 2, id, version + 1, tenant_id, told_id, 'ParentNotified', told_data, told_actor,
                 told_epoch, told_tp
          FROM x WHERE told_id IS NOT NULL) AS e
    ORDER BY k  -- a stream's versions in the log's order
), queued AS (
    INSERT INTO outbox (topics, keys, payloads, headers)
    SELECT $12::text[], $13::bytea[], $14::bytea[], $15::text[]
    WHERE cardinality($12::text[]) > 0
      AND EXISTS (SELECT 1 FROM runs
                  WHERE state = 'scheduled' OR (state = 'retry_scheduled' AND retry_at IS NULL))
), moved AS (
    UPDATE runs SET state = 'succeeded', output_ref = x.output_ref,
                    finished_at = $11::timestamptz, updated_at = $11::timestamptz,
                    version = CASE WHEN x.told_id IS NULL THEN x.version ELSE x.version + 1 END,
                    parent_notified = runs.parent_notified OR x.told_id IS NOT NULL,
                    logs_ref = coalesce(x.logs_ref, runs.logs_ref)
    FROM x WHERE runs.id = x.id
    RETURNING runs.id, runs.job_id
), freed AS (
    DELETE FROM run_slots s USING moved WHERE s.run_id = moved.id
)
UPDATE jobs SET consecutive_failures = 0
FROM moved WHERE jobs.id = moved.job_id AND jobs.consecutive_failures <> 0;

-- name: read_stream
-- One stream's events in order, tenant-scoped so a guessed id reveals nothing.
SELECT seq, event_id, stream_id, stream_type, version, tenant_id, type, data::text AS data, actor,
       epoch, traceparent, occurred_at, recorded_at
FROM events
WHERE stream_id = $1 AND tenant_id = $2
ORDER BY version;

-- name: read_stream_page
-- A page of one stream's events after version $3, tenant-scoped (a job's timeline can be long).
SELECT seq, event_id, stream_id, stream_type, version, tenant_id, type, data::text AS data, actor,
       epoch, traceparent, occurred_at, recorded_at
FROM events
WHERE stream_id = $1 AND tenant_id = $2 AND version > $3
ORDER BY version
LIMIT $4;

-- name: read_all_after
-- The whole log in global order, a page at a time, for rebuilding projections.
SELECT seq, event_id, stream_id, stream_type, version, tenant_id, type, data::text AS data, actor,
       epoch, traceparent, occurred_at, recorded_at
FROM events
WHERE seq > $1
ORDER BY seq
LIMIT $2;

-- name: insert_blobs
-- Many documents at once (a batch of jobs, of completions). A value in the object store: its
-- reference ($6 sha256, $7 key; `d` the reference document, `n` the value's length), else NULLs.
INSERT INTO blobs (id, tenant_id, data, size_bytes, kind, sha256, object_key)
SELECT i, t, d::json, n, k, s, o
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[])
    AS x(i, t, d, n, k, s, o);

-- name: touch_blob_objects
-- Each object's row inserted or touched (migration 0050), twice per write: on its own before
-- the object is put (`stage_blobs`: committed, so the collector leaves the object for its grace
-- period), and in the transaction that records the references (`put_blobs`: under this row's
-- lock, which the collector and the sweep delete under). `touched_at` is the clock's at the
-- lock (not the transaction's start), `inserted` whether the row was gone (deleted since the
-- first touch: its object may be too). In key order, so two writers lock them in one order.
INSERT INTO blob_objects AS o (tenant_id, sha256, object_key, size_bytes, touched_at)
SELECT t, s, k, n, clock_timestamp()
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[]) AS x(t, s, k, n)
ORDER BY t, s
ON CONFLICT (tenant_id, sha256) DO UPDATE SET touched_at = clock_timestamp()
RETURNING o.object_key, o.touched_at, (o.xmax = 0) AS inserted;

-- name: vouched_blob_objects
-- Of these objects ($1 tenants, $2 SHA-256s), whose rows the caller has locked, those a
-- committed reference vouches for: a hot `blobs` row or an archived run (`archived_at`). Read
-- after the lock (a fresh snapshot): the collector deletes an object only under that lock and
-- only when neither exists, so each one named here is in the store and needs no put.
SELECT o.object_key
FROM blob_objects o
JOIN unnest($1::uuid[], $2::text[]) AS x(t, s) ON o.tenant_id = x.t AND o.sha256 = x.s
WHERE o.archived_at IS NOT NULL
   OR EXISTS (SELECT 1 FROM blobs b WHERE b.tenant_id = o.tenant_id AND b.sha256 = o.sha256);

-- name: adopt_orphan_blob_objects
-- The bucket sweep: of the blob objects one listed page holds ($1 tenants, $2 SHA-256s, $3
-- keys, $4 sizes, $5 last writes by the store's clock), those with no row at all, last
-- written longer than the grace ($6) ago and no `blobs` row names, get a row in this
-- transaction. The rows returned are the orphans: inserted and not committed, so a writer
-- touching one waits for the sweep to delete the object and the row and commit, then puts it
-- again; a row that exists (a writer's touch, committed or not) leaves its object alone.
INSERT INTO blob_objects AS o (tenant_id, sha256, object_key, size_bytes, touched_at)
SELECT t, s, k, n, m
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[])
    AS x(t, s, k, n, m)
WHERE m < now() - $6::interval
  AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.tenant_id = x.t AND b.sha256 = x.s)
ORDER BY t, s
ON CONFLICT (tenant_id, sha256) DO NOTHING
RETURNING o.tenant_id, o.sha256, o.object_key;

-- name: expire_blobs
-- Retention: outputs and captured logs older than the cutoff go; payloads stay for replays,
-- workflow step outputs (kind 'step') for as long as a run may resume from them.
DELETE FROM blobs WHERE id IN (
    SELECT id FROM blobs WHERE kind IN ('output', 'logs') AND created_at < $1 LIMIT $2
);

-- name: get_blobs
-- Documents by id, tenant-scoped (a value in the object store: its reference).
SELECT id, tenant_id, data::text AS data, size_bytes, sha256, object_key
FROM blobs WHERE id = ANY($1::uuid[]) AND tenant_id = $2;

-- name: get_blobs_any_tenant
-- Documents by id for the worker gateway, which has already checked the runs' tenant.
SELECT id, tenant_id, data::text AS data, size_bytes, sha256, object_key
FROM blobs WHERE id = ANY($1::uuid[]);

-- name: collectable_blob_objects
-- The collector (issue 38 item 4): objects no `blobs` row references, that no archive document
-- points at and nothing touched for the grace period ($1), locked (a writer touching one
-- waits, and its touch is re-checked here after); the caller deletes each object, then its row,
-- and commits.
SELECT o.tenant_id, o.sha256, o.object_key
FROM blob_objects o
WHERE o.archived_at IS NULL AND o.touched_at < now() - $1::interval
  AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.tenant_id = o.tenant_id AND b.sha256 = o.sha256)
ORDER BY o.touched_at
LIMIT $2
FOR UPDATE OF o SKIP LOCKED;

-- name: forget_blob_objects
-- The rows of the objects the collector deleted.
DELETE FROM blob_objects o
USING unnest($1::uuid[], $2::text[]) AS x(t, s)
WHERE o.tenant_id = x.t AND o.sha256 = x.s;

-- name: pin_blob_objects
-- The blob objects archived runs' documents reference ($1 tenants, $2 SHA-256s: content
-- addresses) are kept as long as the archive is: the collector never deletes a row with
-- `archived_at` set. In the removal's transaction, before the references leave.
UPDATE blob_objects o SET archived_at = coalesce(o.archived_at, now())
FROM unnest($1::uuid[], $2::text[]) AS x(t, s)
WHERE o.tenant_id = x.t AND o.sha256 = x.s;

-- name: append_step_if
-- One workflow step's record (StepCompleted / StepFailed) appended with its read model in ONE
-- statement (autocommit: no BEGIN, no lock, no COMMIT round trips), only if the run is where
-- its writer predicted it: at version $2 - 1, running, under the fencing token $9. The run's
-- row is moved first (its lock; a concurrent writer waits, then the predicate is checked
-- again); nothing else is written when it does not match (no row returned: the caller takes
-- the locked path). $1..$15 as append_events (one event), $16.. the run_steps row.
WITH moved AS (
    UPDATE runs SET version = $2, steps_done = greatest(steps_done, $16 + 1),
                    compensable = compensable OR $26
    WHERE id = $1 AND version = $2 - 1 AND fencing_token = $9 AND state = 'running'
    RETURNING id
), queued AS (
    INSERT INTO outbox (topics, keys, payloads, headers)
    SELECT $12::text[], $13::bytea[], $14::bytea[], $15::text[]
    WHERE cardinality($12::text[]) > 0 AND EXISTS (SELECT 1 FROM moved)
), step AS (
    INSERT INTO run_steps (run_id, seq, tenant_id, name, succeeded, output, output_ref,
                           error_type, message, attempt, tries, duration_ms, recorded_at)
    SELECT $1, $16, $4, $17, $18, $19::json, $20, $21, $22, $23, $24, $25, $11::timestamptz
    FROM moved
)
INSERT INTO events (stream_id, version, stream_type, tenant_id, event_id, type, data, actor,
                    epoch, traceparent, occurred_at, recorded_at)
SELECT $1, $2, $3, $4, $5, $6, $7::text::json, $8, $9, $10, $11::timestamptz, clock_timestamp()
FROM moved
RETURNING seq, recorded_at;
