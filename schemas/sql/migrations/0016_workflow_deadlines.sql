-- 0016: the reconciler's count of suspended workflow runs by what they wait for (a gauge), read
-- from this small partial index rather than the whole `runs` table.
CREATE INDEX runs_suspended ON runs (wait_reason) WHERE state = 'suspended';

-- A workflow's overall deadline (`@workflow(..., timeout=)`): a suspended run is also woken at
-- its deadline, to fail with `workflow_timed_out`. The wake poll's index orders suspended runs
-- by the earlier of their wait's due time and their deadline (least() skips a NULL).
ALTER TABLE runs ADD COLUMN deadline_at timestamptz;
DROP INDEX runs_wake;
CREATE INDEX runs_wake ON runs ((least(wake_at, deadline_at)))
    WHERE state = 'suspended' AND (wake_at IS NOT NULL OR deadline_at IS NOT NULL);
