-- 0029: chunked fan-out (`ctx.fan_out`, ostinato.domain.fanout). One row per fan-out of a
-- workflow run at position `seq`: a read model, the fold of the parent's FanOutStarted,
-- FanOutProgressed and FanOutCompleted (the projector is its only writer). `admitted` chunks
-- (indices 0 .. admitted-1) have a child run; `succeeded` + `failed` of them are final and
-- their parent was told; the scheduler admits a chunk only in the transaction that records an
-- earlier child's end, so admitted - succeeded - failed never exceeds `max_concurrency`.
-- Chunk payloads live in `blobs` under ids derived from (parent, seq, index).
CREATE TABLE fan_outs (
    parent_run_id     uuid        NOT NULL,
    seq               int         NOT NULL,
    tenant_id         uuid        NOT NULL,
    name              text        NOT NULL,
    task              text        NOT NULL,
    pool              text        NOT NULL,
    priority          text        NOT NULL,
    total             int         NOT NULL CHECK (total > 0),
    max_concurrency   int         NOT NULL CHECK (max_concurrency > 0),
    on_failure        text        NOT NULL CHECK (on_failure IN ('fail', 'complete')),
    on_complete       text,
    retry             jsonb,                  -- each chunk run's retry policy document
    timeout_seconds   double precision,       -- each chunk attempt's limit
    admitted          int         NOT NULL,
    succeeded         int         NOT NULL DEFAULT 0,
    failed            int         NOT NULL DEFAULT 0,
    failures          jsonb       NOT NULL DEFAULT '[]',  -- the first failed chunks
    state             text        NOT NULL DEFAULT 'running'
                                  CHECK (state IN ('running', 'succeeded', 'failed')),
    completion_run_id uuid,
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz,
    version           int         NOT NULL,  -- the parent stream's version last applied
    PRIMARY KEY (parent_run_id, seq),
    CHECK (admitted - succeeded - failed BETWEEN 0 AND max_concurrency),
    CHECK (admitted <= total)
);

-- A parent's fan-out in progress (at most one: a workflow awaits one step at a time).
CREATE UNIQUE INDEX fan_outs_running ON fan_outs (parent_run_id) WHERE state = 'running';

-- A read model: the projector inserts and updates it; nothing deletes a row but a rebuild
-- (which runs as the owner).
REVOKE DELETE ON fan_outs FROM ostinato_app;
