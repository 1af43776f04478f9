-- 0015: suspended workflow runs (docs/WORKFLOWS.md). A run waiting for a timer or a signal
-- holds no worker: `runs` keeps what it waits for (the workflow position and name, the reason,
-- the signal's name, when it wakes). The scheduler's wake poll descends `runs_wake`, which holds
-- only suspended runs with a due time, oldest first: a poll costs one index descent however
-- many runs sleep (the same discipline as `jobs_due`). `run_signals` keeps every signal sent to
-- a run until a wait of its name takes it (`delivered_seq`).

ALTER TABLE runs ADD COLUMN wait_reason text,
                 ADD COLUMN wait_seq integer,
                 ADD COLUMN wait_name text,
                 ADD COLUMN wait_signal text,
                 ADD COLUMN wake_at timestamptz;

CREATE INDEX runs_wake ON runs (wake_at) WHERE state = 'suspended' AND wake_at IS NOT NULL;

CREATE TABLE run_signals (
    run_id        uuid        NOT NULL,
    signal_id     uuid        NOT NULL,
    tenant_id     uuid        NOT NULL,
    name          text        NOT NULL,
    payload       json,
    received_at   timestamptz NOT NULL,
    delivered_seq integer,
    PRIMARY KEY (run_id, signal_id)
);

-- A wait takes the oldest undelivered signal of its name.
CREATE INDEX run_signals_pending ON run_signals (run_id, name, received_at)
    WHERE delivered_seq IS NULL;
