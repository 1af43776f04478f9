-- 0012: event data, stored documents and the schedule and retry-policy documents of jobs and
-- runs as `json`, not `jsonb`. No SQL reads inside them (events and policies are decoded by the
-- code that reads them; payloads and outputs are handed back whole), so the binary form only
-- cost work: every append parsed each event's few hundred bytes into jsonb (6 µs an event;
-- `json` checks the syntax and keeps the text, 2.8 µs), each new job and run parsed its
-- documents again into the read models, and every read printed them back to text. `json` still
-- refuses malformed documents, still answers `->` and `->>` for an operator's ad-hoc query, and
-- returns a document byte for byte as written (jsonb reordered a payload's keys). The
-- append-only trigger does not fire: a type change is not an UPDATE.
ALTER TABLE events ALTER COLUMN data TYPE json USING data::json;
ALTER TABLE blobs ALTER COLUMN data TYPE json USING data::json;
ALTER TABLE jobs ALTER COLUMN schedule TYPE json USING schedule::json,
                 ALTER COLUMN retry_policy TYPE json USING retry_policy::json;
ALTER TABLE runs ALTER COLUMN retry_policy TYPE json USING retry_policy::json;
