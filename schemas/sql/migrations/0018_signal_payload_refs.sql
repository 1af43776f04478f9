-- 0018: a signal's payload over the inline limit (16 KiB) is kept in the blob store and
-- referenced from its events; the pending signal keeps the reference until a wait takes it.
ALTER TABLE run_signals ADD COLUMN payload_ref uuid;
