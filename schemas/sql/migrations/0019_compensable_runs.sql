-- 0019: a workflow run with a completed step that registered a compensation (a saga's step,
-- `ctx.step(..., compensate=)`): cancelling it while it waits wakes it to run its
-- compensations instead of ending it at once.
ALTER TABLE runs ADD COLUMN compensable boolean NOT NULL DEFAULT false;
