-- 0022: payload schemas. A worker registers the JSON Schema of each task's payload under a
-- payload version (POST /v1/worker/tasks); submissions of the task are validated against the
-- newest version of the submitting tenant's scope (else the shared one) and the job records
-- that version (JobCreated.payload_version), which every run of the job copies
-- (RunScheduled.payload_version -> runs.payload_version, migration 0021), so a queued run is
-- only claimed by a worker whose handler reads that version.
--
-- scope: the tenant id as text, or '*' for schemas registered by shared workers (admin key), as
-- in `workers`. One (scope, task, payload_version) holds one schema for good: registering other
-- JSON under it is refused (the gateway compares jsonb, so key order and spacing do not
-- matter). Not a read model: registry state written by the gateway, like `workers`.
CREATE TABLE task_schemas (
    scope           text        NOT NULL,
    tenant_id       uuid,
    task            text        NOT NULL,
    payload_version integer     NOT NULL CHECK (payload_version >= 1),
    schema          jsonb       NOT NULL,
    first_seen      timestamptz NOT NULL,
    last_seen       timestamptz NOT NULL,
    PRIMARY KEY (scope, task, payload_version),
    CHECK (scope = coalesce(tenant_id::text, '*'))
);

ALTER TABLE jobs ADD COLUMN payload_version integer;
