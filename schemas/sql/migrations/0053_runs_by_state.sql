-- 0053: a tenant's failed, retrying, dead-lettered or cancelled runs, newest or oldest
-- occurrence first (issue 41 item 6: the web UI's runs list filtered by one of those states,
-- GET /v1/runs?state=, and the count of the bulk re-run's offer). Without it such a list read
-- the tenant's index runs_tenant_created and filtered by state: with 1,000,000 runs of the
-- tenant, 50,000 of them dead-lettered, the dead-lettered page took 186/267 ms (p50/p99,
-- bench/ui_pages.py), a state no run is in read every run of the tenant (1.2 s), and the
-- "re-run all N matching" count of the 50,000 read the whole table (150-290 ms).
--
-- Partial, for the run path's sake: `state` changes at every step and never as a HOT update
-- (it is in other indexes' keys and predicates, 0011), so an index over every state is written
-- at every step. Over all states this one cost 66 % more on the success path's three updates
-- and 46 % on the insert (bench/index_cost.py, bench/README.md `index_cost`); over these four
-- states a run that succeeds never enters it. The other states read runs_tenant_created and
-- filter: succeeded is most of a tenant's runs (a page of them at once), the live states are
-- its newest runs (newest first at once; oldest first reads past its finished runs).
-- Keyed in the list's order both ways: newest first (scheduled_for DESC, id DESC) read forward,
-- oldest first read backward. Expand-only (docs/UPGRADES.md): one index.
CREATE INDEX IF NOT EXISTS runs_tenant_state ON runs (tenant_id, state, scheduled_for DESC, id DESC)
    WHERE state IN ('failed', 'retry_scheduled', 'dead_lettered', 'cancelled');
