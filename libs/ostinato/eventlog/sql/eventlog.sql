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
-- Many documents at once (a batch of jobs, of completions).
INSERT INTO blobs (id, tenant_id, data, size_bytes, kind)
SELECT i, t, d::json, n, k
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::text[]) AS x(i, t, d, n, k);

-- name: expire_blobs
-- Retention: outputs and captured logs older than the cutoff go; payloads stay for replays,
-- workflow step outputs (kind 'step') for as long as a run may resume from them.
DELETE FROM blobs WHERE id IN (
    SELECT id FROM blobs WHERE kind IN ('output', 'logs') AND created_at < $1 LIMIT $2
);

-- name: get_blobs
-- Documents by id, tenant-scoped.
SELECT id, data::text AS data FROM blobs WHERE id = ANY($1::uuid[]) AND tenant_id = $2;

-- name: get_blobs_any_tenant
-- Documents by id for the worker gateway, which has already checked the runs' tenant.
SELECT id, data::text AS data FROM blobs WHERE id = ANY($1::uuid[]);
