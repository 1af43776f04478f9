-- 0024: a job created with an idempotency key remembers what was asked (`request_hash`, the
-- SHA-256 of the canonical JSON of the request: JobCreated.request_hash), so the same key with
-- another request is a 409 instead of silently returning the first job. Jobs created before
-- this migration have none and are not compared.
ALTER TABLE jobs ADD COLUMN request_hash text;
