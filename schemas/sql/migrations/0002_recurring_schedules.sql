-- 0002: recurring schedules — nominal slots apart from (jittered) due instants, pause history,
-- recorded skips, exclusion calendars, and how each run came to be.

ALTER TABLE jobs
    ADD COLUMN kind                 text,
    ADD COLUMN next_slot            timestamptz,      -- nominal occurrence the scheduler waits for
    ADD COLUMN calendar             text,
    ADD COLUMN overlap              text,
    ADD COLUMN resume_policy        text,             -- misfire policy chosen at resume, used once
    ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0,
    ADD COLUMN paused_at            timestamptz;
UPDATE jobs SET kind = 'at', next_slot = next_run_at, overlap = 'allow';
ALTER TABLE jobs ALTER COLUMN kind SET NOT NULL, ALTER COLUMN overlap SET NOT NULL;

ALTER TABLE runs
    ADD COLUMN trigger text NOT NULL DEFAULT 'schedule',   -- schedule | manual | backfill | repair
    ADD COLUMN due_at  timestamptz,                        -- scheduled_for + jitter
    ADD COLUMN traceparent text;                           -- the run's trace, continued by each hop
UPDATE runs SET due_at = scheduled_for;
CREATE INDEX runs_job_active ON runs (job_id) WHERE state NOT IN ('succeeded', 'dead_lettered', 'cancelled', 'failed');

-- Read model: every recorded skip (a range of slots with one reason), so "nothing silent" is
-- checkable without reading job streams.
CREATE TABLE occurrence_skips (
    job_id      uuid        NOT NULL,
    tenant_id   uuid        NOT NULL,
    first_slot  timestamptz NOT NULL,
    last_slot   timestamptz NOT NULL,
    slots       integer,                                -- null when not enumerated (huge gaps)
    reason      text        NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (job_id, first_slot, reason)
);

-- Read model: pause history (the reconciler expects nothing inside a pause).
CREATE TABLE job_pauses (
    job_id        uuid        NOT NULL,
    tenant_id     uuid        NOT NULL,
    paused_at     timestamptz NOT NULL,
    resumed_at    timestamptz,
    reason        text        NOT NULL,
    resume_policy text,
    PRIMARY KEY (job_id, paused_at)
);

-- Read model: named exclusion calendars (dates in each schedule's own zone).
CREATE TABLE calendars (
    id         uuid        PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    name       text        NOT NULL,
    dates      date[]      NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    version    integer     NOT NULL,
    UNIQUE (tenant_id, name)
);
