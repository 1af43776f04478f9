-- 0014: workflow steps (docs/WORKFLOWS.md). `run_steps` is the read model of StepCompleted and
-- StepFailed, one row per recorded step, written by the projector in the transaction of the
-- append and rebuilt with the other read models. A resuming workflow pages through its run's
-- steps by the primary key (run_id, seq), so resuming costs the same whatever the length of the
-- run's history. Small outputs are kept inline (`output`), large ones in the blob store
-- (`output_ref`).

ALTER TABLE runs ADD COLUMN steps_done integer NOT NULL DEFAULT 0;

CREATE TABLE run_steps (
    run_id      uuid        NOT NULL,
    seq         integer     NOT NULL,
    tenant_id   uuid        NOT NULL,
    name        text        NOT NULL,
    succeeded   boolean     NOT NULL,
    output      json,
    output_ref  uuid,
    error_type  text,
    message     text,
    attempt     integer     NOT NULL,
    tries       integer     NOT NULL,
    duration_ms double precision NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, seq)
);
