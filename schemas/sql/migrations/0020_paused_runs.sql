-- 0020: pausing an in-flight workflow run (POST /v1/runs/{id}/pause): `paused` until resumed;
-- a paused suspended run's timer and deadline move out of the wake poll's index (runs_wake reads
-- wake_at and deadline_at) into frozen_wake_at and frozen_deadline_at, and come back on resume.
ALTER TABLE runs ADD COLUMN paused boolean NOT NULL DEFAULT false,
                 ADD COLUMN paused_at timestamptz,
                 ADD COLUMN frozen_wake_at timestamptz,
                 ADD COLUMN frozen_deadline_at timestamptz;
