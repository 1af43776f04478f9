-- 0007: fair dispatch (docs/FAIRNESS.md). Runs wait in `scheduled` (or a released retry) until the
-- dispatcher admits them; limits and pool pauses are read models of events on tenant and pool
-- streams; holds and token buckets are the dispatcher's operational state.

ALTER TABLE jobs ADD COLUMN concurrency_key text, ADD COLUMN resource text;
ALTER TABLE runs ADD COLUMN concurrency_key text, ADD COLUMN resource text;
ALTER TABLE tenants ALTER COLUMN weight TYPE double precision;

-- The dispatcher's queue: waiting runs per (tenant, pool, class), oldest first.
CREATE INDEX runs_dispatchable ON runs (tenant_id, pool, priority, updated_at, id)
    WHERE state = 'scheduled' OR (state = 'retry_scheduled' AND retry_at IS NULL);

-- Read model of LimitSet: scope tenant (name ''), task (a job type) or resource (a named API).
CREATE TABLE limits (
    tenant_id        uuid        NOT NULL,
    scope            text        NOT NULL,
    name             text        NOT NULL,
    max_concurrency  integer,
    rate_per_second  double precision,
    burst            double precision,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, scope, name)
);

-- Read model of PoolPaused / PoolResumed: one stream per (scope, pool); tenant_id NULL = every
-- tenant (an operator), else one tenant's queue in that pool.
CREATE TABLE pool_controls (
    id          uuid        PRIMARY KEY,
    tenant_id   uuid,
    pool        text        NOT NULL,
    paused      boolean     NOT NULL,
    reason      text,
    actor       text        NOT NULL,
    changed_at  timestamptz NOT NULL,
    version     integer     NOT NULL
);

-- Why each waiting run the dispatcher looked at still waits (shown by GET /v1/runs/{id}).
CREATE TABLE dispatch_holds (
    run_id      uuid        PRIMARY KEY,
    tenant_id   uuid        NOT NULL,
    reason      text        NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- Token buckets as of the last decision, so a restarted dispatcher does not refill them.
CREATE TABLE token_buckets (
    tenant_id   uuid        NOT NULL,
    scope       text        NOT NULL,  -- tenant | resource
    name        text        NOT NULL,
    tokens      double precision NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, scope, name)
);
