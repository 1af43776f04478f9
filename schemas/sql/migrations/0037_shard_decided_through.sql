-- 0037: the ledger never cries wolf after an outage (issue 42). Each shard lease row keeps the
-- instant up to which its scheduler has completed a pass (every job of the shard due by then
-- was decided), written with the lease renewal under the shard's epoch; the reconciler judges a
-- slot only once it is older than that.
ALTER TABLE shard_leases ADD COLUMN decided_through timestamptz NOT NULL DEFAULT '-infinity';
-- A slot recorded missing that later gets its run or skip is corrected (LedgerSlotResolved):
-- the job's latest unresolved missing slot is then re-read from its few ledger findings, never
-- from its whole stream (a job firing every second appends 86,400 events a day to it).
CREATE INDEX events_ledger_slots ON events (stream_id)
    WHERE type IN ('LedgerSlotMissing', 'LedgerSlotResolved');
