-- 0023: audited operator interventions on a workflow run (docs/WORKFLOWS.md, "Operator
-- interventions"): retry a failed step in place, skip a step with a supplied output, restart
-- from a position, mark a run succeeded or failed.
--
-- Retrying, skipping and restarting set recorded steps aside: their `run_steps` rows move to
-- `run_steps_set_aside`, keyed by the run-stream version of the event that set them aside, so
-- the history keeps every outcome while the run's current steps (run_steps, PRIMARY KEY
-- (run_id, seq)) start again at that position. Both are read models, written only by the
-- projector from those events and rebuilt with the others.
--
-- run_steps.supplied_by: who supplied a skipped step's output (StepSkipped); NULL for a step
-- the workflow recorded itself.

ALTER TABLE run_steps ADD COLUMN supplied_by text;

CREATE TABLE run_steps_set_aside (
    run_id            uuid        NOT NULL,
    set_aside_version integer     NOT NULL,  -- version of StepRetried / StepSkipped / RunRestarted
    seq               integer     NOT NULL,
    tenant_id         uuid        NOT NULL,
    name              text        NOT NULL,
    succeeded         boolean     NOT NULL,
    output            json,
    output_ref        uuid,
    error_type        text,
    message           text,
    attempt           integer     NOT NULL,
    tries             integer     NOT NULL,
    duration_ms       double precision NOT NULL,
    recorded_at       timestamptz NOT NULL,
    supplied_by       text,
    set_aside_at      timestamptz NOT NULL,
    PRIMARY KEY (run_id, set_aside_version, seq)
);
