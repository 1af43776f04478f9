-- 0009: one outbox row per append, its messages as parallel arrays, instead of one row per
-- message. Every run put three rows through the outbox (insert, relay's locking read, delete,
-- each with its index entry); an append of a few hundred runs' events now writes one row. The
-- payloads go out of line uncompressed (EXTERNAL): compressing them would cost more CPU than
-- the bytes it saves, and the relay reads each row once.

CREATE TABLE outbox_batches (
    id         bigserial   PRIMARY KEY,
    topics     text[]      NOT NULL,
    keys       bytea[]     NOT NULL,
    payloads   bytea[]     NOT NULL,
    headers    text[]      NOT NULL,  -- JSON objects as text: the relay only passes them on
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (cardinality(topics) > 0 AND cardinality(keys) = cardinality(topics)
           AND cardinality(payloads) = cardinality(topics)
           AND cardinality(headers) = cardinality(topics))
);
ALTER TABLE outbox_batches ALTER COLUMN payloads SET STORAGE EXTERNAL;

-- Unpublished messages of the old layout keep their order, one row each.
INSERT INTO outbox_batches (topics, keys, payloads, headers, created_at)
SELECT ARRAY[topic], ARRAY[key], ARRAY[value], ARRAY[headers::text], created_at
FROM outbox ORDER BY id;

DROP TABLE outbox;
ALTER TABLE outbox_batches RENAME TO outbox;
ALTER INDEX outbox_batches_pkey RENAME TO outbox_pkey;
ALTER SEQUENCE outbox_batches_id_seq RENAME TO outbox_id_seq;
