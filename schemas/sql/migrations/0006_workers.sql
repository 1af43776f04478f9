-- 0006: the worker registry — who is connected, for which tenant (or all of them), in which
-- pools, with how many slots. Pool capacity for fair dispatch is the sum of live workers' slots.
-- A row is refreshed by the gateway on claims and heartbeats; liveness is judged by seen_at
-- against a TTL (OSTINATO_WORKER_TTL_SECONDS), by the database clock.

CREATE TABLE workers (
    worker_id text        NOT NULL,
    scope     text        NOT NULL,  -- the tenant id as text, or '*' for a shared worker
    tenant_id uuid,                  -- NULL: a shared worker serving every tenant
    pools     text[]      NOT NULL,
    slots     integer     NOT NULL CHECK (slots > 0),
    seen_at   timestamptz NOT NULL,
    PRIMARY KEY (worker_id, scope),
    CHECK (scope = coalesce(tenant_id::text, '*'))
);
CREATE INDEX workers_seen ON workers (seen_at);

-- Shared workers claim queued runs of every tenant: oldest first within the asked pools.
CREATE INDEX runs_ready_pool ON runs (pool, queued_at, id) WHERE state = 'queued';
