-- 0034: two of the reconciler's periodic reads stop growing with the tables (issue #19).
-- OstinatoLedgerDisagreement read every event of its 24-hour window through the BRIN index (the
-- window is the whole log on a young database: 21 ms an evaluation at 40,000 runs); a partial
-- index holds the few events it looks for and costs other appends nothing.
CREATE INDEX events_ledger_disagreements ON events (occurred_at)
    WHERE type = 'LedgerDisagreement';
-- The gap check's sweep of recurring jobs read every job, one-off ones included (8.5 ms a page
-- at 40,000 one-off jobs, and linear in them): only recurring jobs that can fire are indexed.
CREATE INDEX jobs_recurring ON jobs (id)
    WHERE kind IN ('cron', 'every') AND status IN ('active', 'paused');
