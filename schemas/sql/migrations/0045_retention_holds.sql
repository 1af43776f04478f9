-- 0045: retention per tenant and holds on runs (issue 38 items 1 and 8; docs/RETENTION.md).
--
-- Both tables are read models: the log stays the truth, they are written by the projector in
-- the transaction that appends the event, and a rebuild from the log gives the same rows.
-- New tables only (expand-only, docs/UPGRADES.md): the previous release never reads them.

-- The projection of `RetentionSet` (the tenant's stream): how long a finished run of the
-- tenant stays in the hot tables after it ended, and whether it is archived to object storage
-- before it is removed. No row = the default (30 days, archive), ostinato.domain.retention.
-- The minimum (1 hour) is the API's rule too; the CHECK keeps a wrong writer from removing
-- runs the moment they end.
CREATE TABLE IF NOT EXISTS tenant_retention (
    tenant_id    uuid        PRIMARY KEY,
    keep_seconds bigint      NOT NULL CHECK (keep_seconds >= 3600),
    archive      boolean     NOT NULL DEFAULT true,
    updated_at   timestamptz NOT NULL,  -- the RetentionSet's occurred_at
    updated_by   text        NOT NULL   -- its actor
);

-- The projection of `RunHeld` (a row) and `RunReleased` (no row) on the run's stream: a held
-- run is never archived or removed until released, whatever its tenant's retention says.
CREATE TABLE IF NOT EXISTS run_holds (
    run_id    uuid        PRIMARY KEY,
    tenant_id uuid        NOT NULL,
    reason    text        NOT NULL,
    held_by   text        NOT NULL,  -- the RunHeld's actor
    held_at   timestamptz NOT NULL   -- its occurred_at
);

-- A tenant's holds (listing them; the archiver skipping a tenant's held runs in one probe).
CREATE INDEX IF NOT EXISTS run_holds_by_tenant ON run_holds (tenant_id, held_at);
