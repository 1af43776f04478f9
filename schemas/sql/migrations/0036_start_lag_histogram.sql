-- 0036: OstinatoLagSLOBreach reads a per-minute histogram of schedule lags instead of the log.
-- The rule read every first RunStarted of its 15-minute window joined to runs (127-157 ms an
-- evaluation after 75,000 runs, every 10 s, and linear in the runs started: 1.8 M rows at
-- 2,000 runs/s). The RunStarted projection (eventlog/sql/readmodels.sql project_run_started)
-- now counts each first attempt's start here, in the statement that marks the run running, so
-- an evaluation reads at most (tenants x pools x buckets) rows per minute of its window,
-- however many runs started.
--
-- One row per (minute of the start, tenant, pool, lag bucket):
--   minute      date_trunc('minute', started_at) in UTC;
--   bucket      the schedule lag's log-scale bucket, lag = greatest(0, started_at -
--               coalesce(due_at, scheduled_for)) in seconds: 0 for lag < 1 ms (0 included),
--               else k = 1 + floor(ln(lag / 1 ms) / ln(1.1)), i.e. [1 ms * 1.1^(k-1),
--               1 ms * 1.1^k): each bucket is 10 % wide (1 s is bucket 73, 60 s 116, a day 192);
--   starts      how many first attempts started with a lag in that bucket;
--   max_seconds the largest of those lags (what the rule reports as the p99: exact when the
--               bucket's lags are equal, otherwise at most 10 % above the true one).
-- The minute leads the key: the rule reads a range of minutes, the retention duty (reconciler,
-- checks/retention.py) deletes the oldest ones. A read model like the others (the projector is
-- its only writer, a rebuild recomputes it), kept only for as long as the rule looks back.
CREATE TABLE start_lag_minutes (
    minute      timestamptz NOT NULL,
    tenant_id   uuid        NOT NULL,
    pool        text        NOT NULL,
    bucket      smallint    NOT NULL CHECK (bucket >= 0),
    starts      integer     NOT NULL CHECK (starts > 0),
    max_seconds float8      NOT NULL CHECK (max_seconds >= 0),
    PRIMARY KEY (minute, tenant_id, pool, bucket)
) WITH (fillfactor = 70);
-- Every claim updates the current minute's few rows in place (no indexed column changes: HOT
-- updates, which the free space per page keeps on the page); like the tables of 0035, the
-- dead versions are vacuumed after a fixed number, not after 20 % of a small table.
ALTER TABLE start_lag_minutes SET (autovacuum_vacuum_scale_factor = 0,
                                   autovacuum_vacuum_threshold = 2000,
                                   autovacuum_vacuum_cost_delay = 0);
-- Privileges: the default ones of 0025 (SELECT, INSERT, UPDATE, DELETE for ostinato_app): the
-- projector inserts and updates rows, the retention duty deletes them.
