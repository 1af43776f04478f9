-- 0050: blobs in object storage by content address (issue 38 item 4, docs/RETENTION.md "Blobs").
-- A blob over the inline limit (OSTINATO_BLOB_INLINE_MAX_BYTES) is put in the object store under
-- tenants/{tenant}/blobs/sha256/{hex[:2]}/{hex} before the transaction recording it commits; its
-- `blobs` row keeps the reference: `sha256` and `object_key` (NULL: the value is inline in
-- `data`, as every row the previous release writes), `size_bytes` the value's length, and in
-- `data` a JSON document naming the object (the previous release reads `data` as the value: it
-- meets that document, never a NULL; docs/UPGRADES.md). Expand only: nullable columns on `blobs`,
-- which no release reads with SELECT *.
ALTER TABLE blobs ADD COLUMN IF NOT EXISTS sha256 text;
ALTER TABLE blobs ADD COLUMN IF NOT EXISTS object_key text;
-- The collector's question "does any hot row still reference this object?"
CREATE INDEX IF NOT EXISTS blobs_objects ON blobs (tenant_id, sha256) WHERE sha256 IS NOT NULL;

-- One row per object the blob store put (content addressing: many `blobs` rows, of many runs,
-- may share one). A writer touches its row (upsert, `touched_at = now()`, under the row lock)
-- before it puts the object and inserts its `blobs` row, all in its transaction; the collector
-- deletes an object only under that row's lock, when no `blobs` row references it, nothing
-- touched it for the grace period and no archived run points at it (`archived_at`, set by the
-- archiver before it removes the runs whose archive documents keep the reference). So an
-- object is never deleted under a reference, hot or archived.
CREATE TABLE IF NOT EXISTS blob_objects (
    tenant_id uuid NOT NULL,
    sha256 text NOT NULL,
    object_key text NOT NULL,
    size_bytes bigint NOT NULL,
    touched_at timestamptz NOT NULL DEFAULT now(),
    archived_at timestamptz,  -- an archive document references it: kept as archives are
    PRIMARY KEY (tenant_id, sha256)
);
CREATE INDEX IF NOT EXISTS blob_objects_collectable ON blob_objects (touched_at)
    WHERE archived_at IS NULL;
