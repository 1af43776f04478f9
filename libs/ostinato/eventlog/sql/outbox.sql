-- Rows (one per append: its messages as parallel arrays) are inserted by eventlog.sql's
-- append_events, in the statement that appends the events.

-- name: any_messages
-- Whether any row waits, asked without a transaction after a batch that found none: the idle
-- relay's poll (each service's, five times a second) is this one read.
SELECT EXISTS (SELECT 1 FROM outbox);

-- name: take_messages
-- The relay takes a few rows (each an append's messages) in id order and deletes them in one
-- statement; the deletion holds their locks until the relay commits, after the broker's acks
-- (a failed send rolls it back: the rows wait for the next batch). SKIP LOCKED lets a second
-- relay take the next ones. RETURNING gives no order: the relay sorts by id. One statement
-- where a lock and a delete were two (a relay's batch: BEGIN, this, COMMIT).
WITH taken AS (
    SELECT id FROM outbox
    ORDER BY id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
DELETE FROM outbox o
USING taken
WHERE o.id = taken.id
RETURNING o.id, o.topics, o.keys, o.payloads, o.headers;

-- name: outbox_lag
-- How many messages wait and how old the oldest row is (database clock).
SELECT coalesce(sum(cardinality(topics)), 0)::bigint AS unpublished,
       coalesce(extract(epoch FROM (coalesce($1::timestamptz, now()) - min(created_at))), 0)::float8
           AS oldest_age_seconds
FROM outbox;

-- name: outbox_waiting_by_tenant
-- OstinatoOutboxBacklog: per tenant (each message is keyed by its tenant id as text), the
-- messages in rows older than $2 before $1 (the database clock for NULL), and the oldest row.
SELECT t.id AS tenant_id, t.name AS tenant, count(*)::int AS n, min(o.created_at) AS since
FROM outbox o
CROSS JOIN LATERAL unnest(o.keys) AS k(key)
JOIN tenants t ON t.id::text = encode(k.key, 'escape')
WHERE o.created_at < coalesce($1::timestamptz, now()) - $2::interval
GROUP BY t.id, t.name
ORDER BY t.id
LIMIT $3;
