-- 0028: bulk actions by query, as tracked operations (docs/OPERATIONS.md, POST /v1/operations).
--
-- An operation is one operator's "cancel (retry, replay, pause) everything matching this
-- filter", with no page cap. Creating it freezes the selection: every matching id goes into
-- `operation_items` under a gap-free `seq`, in the same transaction as the `operations` row, so
-- the count the operator confirmed is exactly what is acted on (rows that start matching later
-- are not touched). The api's `operations` duty then works through the items in batches: one
-- transaction per batch locks the operation row, acts on each item with the single-item command
-- (each in its own savepoint), records refusals in `operation_failures`, and moves `position`
-- (the last seq handled) and the counters. A crash rolls the batch back as a whole; a restarted
-- api resumes after `position`, so each item is acted on once.
--
-- `actor` is the key that asked (as the event log names it): every event an item's command
-- appends carries it too. The audit trail reads `operations` by (tenant, created_at).

CREATE TABLE operations (
    id           uuid        PRIMARY KEY,
    tenant_id    uuid        NOT NULL,
    kind         text        NOT NULL CHECK (kind IN ('cancel', 'retry', 'replay', 'pause')),
    filter       json        NOT NULL,  -- the request's filter, as given (checked, not queried)
    total        integer     NOT NULL CHECK (total >= 0),
    position     integer     NOT NULL DEFAULT 0,  -- items handled: seq 1..position
    done         integer     NOT NULL DEFAULT 0,  -- acted on
    skipped      integer     NOT NULL DEFAULT 0,  -- no longer applicable (a run finished)
    failed       integer     NOT NULL DEFAULT 0,  -- refused (operation_failures says why)
    state        text        NOT NULL DEFAULT 'running'
                             CHECK (state IN ('running', 'completed', 'cancelled')),
    actor        text        NOT NULL,
    created_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    cancelled_by text,
    CHECK (position <= total AND done + skipped + failed = position)
);

CREATE INDEX operations_of_tenant ON operations (tenant_id, created_at DESC, id DESC);
-- The duty's poll: the oldest running operation, one descent of a small partial index.
CREATE INDEX operations_running ON operations (created_at, id) WHERE state = 'running';

CREATE TABLE operation_items (
    operation_id uuid    NOT NULL REFERENCES operations (id) ON DELETE CASCADE,
    seq          integer NOT NULL,
    item_id      uuid    NOT NULL,  -- a run (cancel, retry, replay) or a job (pause)
    PRIMARY KEY (operation_id, seq)
);

CREATE TABLE operation_failures (
    operation_id uuid    NOT NULL REFERENCES operations (id) ON DELETE CASCADE,
    seq          integer NOT NULL,
    item_id      uuid    NOT NULL,
    outcome      text    NOT NULL CHECK (outcome IN ('skipped', 'failed')),
    detail       text    NOT NULL,
    PRIMARY KEY (operation_id, seq)
);

-- The selection and its outcomes are written once.
REVOKE UPDATE ON operation_items, operation_failures FROM ostinato_app;
