-- 0003: failure handling — retries with their due time, timeouts, cancellation, dead letters
-- with triage, replays linked to their origin.

ALTER TABLE runs
    ADD COLUMN failures          integer NOT NULL DEFAULT 0,   -- counted failures (not throttles)
    ADD COLUMN retry_at          timestamptz,                  -- when a retry_scheduled run is due
    ADD COLUMN retry_policy      jsonb,
    ADD COLUMN timeout_seconds   double precision,
    ADD COLUMN queue_wait_seconds double precision,
    ADD COLUMN on_queue_wait     text,                          -- dead_letter | skip
    ADD COLUMN cancel_requested  boolean NOT NULL DEFAULT false,
    ADD COLUMN replay_of         uuid,
    ADD COLUMN logs_ref          uuid;

-- The scheduler's retry poll: only runs waiting for a retry are indexed.
CREATE INDEX runs_retry_due ON runs (retry_at) WHERE state = 'retry_scheduled';

ALTER TABLE jobs
    ADD COLUMN retry_policy       jsonb,
    ADD COLUMN timeout_seconds    double precision,
    ADD COLUMN queue_wait_seconds double precision,
    ADD COLUMN on_queue_wait      text;

-- Read model: the dead-letter queue with its triage.
CREATE TABLE dead_letters (
    run_id          uuid        PRIMARY KEY,
    tenant_id       uuid        NOT NULL,
    job_id          uuid        NOT NULL,
    task            text        NOT NULL,
    reason          text        NOT NULL,          -- permanent | exhausted | queue_wait_expired
    error_type      text,
    message         text,
    attempts        integer     NOT NULL,
    dead_lettered_at timestamptz NOT NULL,
    triage_state    text        NOT NULL,          -- new | acknowledged | fixed | wont_fix
    triage_by       text,
    triage_comment  text,
    triaged_at      timestamptz,
    replays         integer     NOT NULL DEFAULT 0,
    last_replay_run uuid
);
CREATE INDEX dead_letters_tenant ON dead_letters (tenant_id, dead_lettered_at DESC, run_id);
