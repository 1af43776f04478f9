-- 0047: the storage state (issue 38 item 9; docs/RETENTION.md "The disk").
--
-- One row, upserted by the reconciler's `reconcile_storage` duty from what it measured (the
-- database's size, and the free space of its volume or a configured capacity) and decided
-- against the watermarks (ostinato.policy.storage); every api instance reads it through a cache
-- of a few seconds, so no api process measures anything per request. `level` = 'full' makes
-- the api refuse new work (503 storage-full) until the reconciler records a lower level.
-- No row: never measured, nothing refused. Not an event stream: a measurement of the platform,
-- not a state of a tenant's job or run (like the worker registry), overwritten each pass.
-- A new table only (expand-only, docs/UPGRADES.md): the previous release never reads it.
CREATE TABLE IF NOT EXISTS storage_state (
    id             boolean          PRIMARY KEY DEFAULT true CHECK (id),  -- the one row
    level          text             NOT NULL,  -- ok | filling | full | unmeasured
    used_ratio     double precision,           -- NULL when unmeasured
    database_bytes bigint           NOT NULL,  -- pg_database_size(current_database())
    total_bytes    bigint,                     -- the volume's usable size, or the capacity
    free_bytes     bigint,
    source         text             NOT NULL,  -- volume | capacity | none
    alert_ratio    double precision NOT NULL,  -- the watermarks it was judged by
    refuse_ratio   double precision NOT NULL,
    measured_at    timestamptz      NOT NULL,  -- the database's clock at the upsert
    measured_by    text             NOT NULL   -- the reconciler instance (host:pid)
);
