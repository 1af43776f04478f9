-- 0005: what each stored document is, so outputs and captured logs can expire while payloads
-- (needed to replay) are kept.
ALTER TABLE blobs ADD COLUMN kind text NOT NULL DEFAULT 'payload';  -- payload | output | logs
CREATE INDEX blobs_expiring ON blobs (created_at) WHERE kind <> 'payload';
