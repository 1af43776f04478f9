-- 0001: the run-event log, its read models, the outbox, the consumer ledger, attempt leases.
-- Forward-only. Applied by `ostinato migrate`, which records it in schema_migrations.

-- The append-only log: the single source of truth (DESIGN invariant 1).
CREATE TABLE events (
    seq          bigserial   NOT NULL UNIQUE,          -- global position, for rebuilds
    stream_id    uuid        NOT NULL,
    version      integer     NOT NULL CHECK (version >= 1),
    stream_type  text        NOT NULL,                 -- tenant | job | run
    tenant_id    uuid        NOT NULL,
    event_id     uuid        NOT NULL UNIQUE,
    type         text        NOT NULL,
    data         jsonb       NOT NULL,
    actor        text        NOT NULL,
    epoch        bigint,                               -- fencing token / shard epoch of the writer
    traceparent  text,
    occurred_at  timestamptz NOT NULL,                 -- from the writer's Clock
    recorded_at  timestamptz NOT NULL DEFAULT now(),   -- from the database clock
    PRIMARY KEY (stream_id, version)                   -- optimistic concurrency
);
CREATE INDEX events_tenant_seq ON events (tenant_id, seq);

CREATE FUNCTION refuse_event_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the run-event log is append-only: % on events is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION refuse_event_mutation();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_event_mutation();

-- Immutable payload and output documents, referenced from events by id.
CREATE TABLE blobs (
    id         uuid        PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    data       jsonb       NOT NULL,
    size_bytes integer     NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Read models (projections): written only by ostinato.eventlog.projections, rebuildable.
CREATE TABLE tenants (
    id         uuid        PRIMARY KEY,
    name       text        NOT NULL UNIQUE,
    weight     integer     NOT NULL,
    created_at timestamptz NOT NULL,
    version    integer     NOT NULL
);

CREATE TABLE api_keys (
    key_hash   bytea       PRIMARY KEY,               -- sha256 of the key; the key itself is never stored
    tenant_id  uuid        NOT NULL,
    role       text        NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE jobs (
    id             uuid        PRIMARY KEY,
    tenant_id      uuid        NOT NULL,
    name           text        NOT NULL,
    task           text        NOT NULL,
    status         text        NOT NULL,              -- active | completed | deleted
    schedule       jsonb       NOT NULL,
    payload_ref    uuid        NOT NULL,
    pool           text        NOT NULL,
    priority       text        NOT NULL,
    idempotency_key text,
    traceparent    text,                              -- creation trace, continued by its runs
    next_run_at    timestamptz,
    last_run_at    timestamptz,
    runs_created   integer     NOT NULL,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    version        integer     NOT NULL
);
CREATE INDEX jobs_tenant_created ON jobs (tenant_id, created_at DESC, id);
-- The scheduler's poll: only rows that can fire are indexed, so future or finished jobs cost nothing.
CREATE INDEX jobs_due ON jobs (next_run_at) WHERE status = 'active' AND next_run_at IS NOT NULL;
CREATE UNIQUE INDEX jobs_idempotency ON jobs (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE runs (
    id             uuid        PRIMARY KEY,
    tenant_id      uuid        NOT NULL,
    job_id         uuid        NOT NULL,
    task           text        NOT NULL,
    pool           text        NOT NULL,
    priority       text        NOT NULL,
    payload_ref    uuid        NOT NULL,
    scheduled_for  timestamptz NOT NULL,
    state          text        NOT NULL,
    attempt        integer     NOT NULL,
    fencing_token  bigint      NOT NULL,
    worker_id      text,
    output_ref     uuid,
    last_error     jsonb,
    scheduled_at   timestamptz,
    queued_at      timestamptz,
    started_at     timestamptz,
    finished_at    timestamptz,
    updated_at     timestamptz NOT NULL,
    version        integer     NOT NULL,
    UNIQUE (job_id, scheduled_for)                    -- one run per occurrence (invariant 2)
);
CREATE INDEX runs_tenant_created ON runs (tenant_id, scheduled_for DESC, id);
CREATE INDEX runs_tenant_job ON runs (tenant_id, job_id, scheduled_for DESC);
CREATE INDEX runs_waiting ON runs (state, updated_at) WHERE state IN ('scheduled', 'queued', 'running');
-- The worker gateway's claim: one tenant's queued runs of some pools, oldest first.
CREATE INDEX runs_ready ON runs (tenant_id, pool, queued_at, id) WHERE state = 'queued';

-- Operational state (not read models): rows come and go.
CREATE TABLE outbox (
    id          bigserial   PRIMARY KEY,
    topic       text        NOT NULL,
    key         bytea       NOT NULL,
    value       bytea       NOT NULL,
    headers     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE consumer_ledger (
    consumer     text        NOT NULL,
    event_id     uuid        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

CREATE TABLE attempt_leases (
    run_id        uuid        PRIMARY KEY,
    tenant_id     uuid        NOT NULL,
    fencing_token bigint      NOT NULL,
    worker_id     text        NOT NULL,
    expires_at    timestamptz NOT NULL
);
CREATE INDEX attempt_leases_expiry ON attempt_leases (expires_at);
