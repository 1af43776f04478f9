-- 0011: two indexes on `runs` that another one already serves. A run's state changes three
-- times after it is scheduled, and each change (never a HOT update: `state` is in index
-- predicates) writes a new entry in every index whose predicate the new row meets; these two
-- cost five entries per run for no query of their own.
--
-- runs_tenant_job (tenant_id, job_id, scheduled_for DESC): a job's runs, newest first, are the
-- backward scan of the occurrence key `runs_job_id_scheduled_for_key` (job_id, scheduled_for);
-- a job id names one tenant, whose filter is then one comparison per row.
DROP INDEX IF EXISTS runs_tenant_job;

-- runs_ready (tenant_id, pool, queued_at, id) WHERE queued: a tenant's claim reads
-- runs_ready_pool (pool, queued_at, id) WHERE queued and filters the tenant. Queued runs hold
-- dispatch slots, so that index holds at most the pools' capacity whoever owns them.
DROP INDEX IF EXISTS runs_ready;
