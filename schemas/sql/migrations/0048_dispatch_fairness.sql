-- 0048: The dispatcher's fair-queueing memory in storage (issue 39: two dispatchers). Each instance
-- kept its own (policy.fairness.FairState, per pool, class and tenant how far the tenant's
-- finish tag is ahead of the queue's virtual time); with two instances taking rounds in turn
-- (the advisory lock serialises them), each decided from the memory of its own last round, and
-- a tenant served by the other instance meanwhile got served again as if it had waited. One row:
-- the state after the last round that changed it, and which instance wrote it; an instance that
-- wrote the last one keeps using its memory, any other reads the row first (in the round's
-- transaction, under the lock). Soft state, like the token buckets beside it: not a read model.
CREATE TABLE IF NOT EXISTS dispatch_fairness (
    id smallint PRIMARY KEY CHECK (id = 1),
    tags jsonb NOT NULL,  -- [[pool, class, tenant, lag], ...]
    written_by uuid NOT NULL,  -- the dispatcher instance (a uuid drawn at its start)
    rounds bigint NOT NULL,  -- rounds that changed it: how often the memory changed hands
    updated_at timestamptz NOT NULL
);
