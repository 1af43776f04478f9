-- 0010: one descent answers "is anything due at all?" before the scheduler's per-shard poll
-- (readmodels.sql claim_due_jobs). Without it an idle poll descended jobs_due once per shard,
-- and each descent grew with the number of future jobs (135 -> 314 µs per poll with 100,000
-- of them); with it an idle poll costs one descent of this index, whatever waits in the future.
CREATE INDEX jobs_next_due ON jobs (next_run_at)
    WHERE status = 'active' AND next_run_at IS NOT NULL;
