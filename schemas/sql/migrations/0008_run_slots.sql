-- 0008: the runs that hold a dispatch slot (queued or running), for the dispatcher's count on
-- every decision. A narrow read model of its own rather than a query over `runs`: each state
-- change of a run leaves a dead entry in the index on `state` until vacuum, and under load the
-- count visited 19,000 of them to find 256 live runs (16 ms a decision); here dead rows are
-- pruned page by page and the live set stays as small as the pools. Kept by
-- readmodels.apply (`sync_run_slots`) in the transaction of every append that changes a run's
-- state, rebuilt with the other read models.

CREATE TABLE run_slots (
    run_id          uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL,
    pool            text NOT NULL,
    priority        text NOT NULL,
    task            text NOT NULL,
    concurrency_key text
);

INSERT INTO run_slots (run_id, tenant_id, pool, priority, task, concurrency_key)
SELECT id, tenant_id, pool, priority, task, concurrency_key FROM runs
WHERE state IN ('queued', 'running');

-- No query reads the log by tenant: one index fewer to write on every append.
DROP INDEX IF EXISTS events_tenant_seq;
