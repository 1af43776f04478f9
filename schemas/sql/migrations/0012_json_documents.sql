-- 0012: event data and stored documents as `json`, not `jsonb`. Nothing queries inside them
-- in SQL (events are decoded by the code that reads them; payloads and outputs are handed back
-- whole), so the binary form only cost work: every append parsed ~400 bytes of JSON into jsonb
-- per event (6 µs; `json` checks the syntax and keeps the text, 2.8 µs), and every read printed
-- it back to text. `json` still refuses malformed documents, still answers `->` and `->>` for
-- an operator's ad-hoc query, and returns a document byte for byte as written (jsonb reordered
-- a payload's keys). The append-only trigger does not fire: a type change is not an UPDATE.
ALTER TABLE events ALTER COLUMN data TYPE json USING data::json;
ALTER TABLE blobs ALTER COLUMN data TYPE json USING data::json;
