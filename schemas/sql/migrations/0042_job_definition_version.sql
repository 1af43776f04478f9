-- Jobs edited in place (PATCH /v1/jobs/{id}, event JobUpdated): each edited job's definition
-- version, 1 at creation (no row) and one more per edit. The API shows it as the job's
-- `version` and ETag and compares If-Match with it. Not the stream version (jobs.version),
-- which every fired occurrence moves on: an ETag that changed at every fire would make a
-- recurring job's edit race its own schedule. A table of its own, not a column of `jobs`,
-- whose rows are read with SELECT * into a positional row type. Expand-only.
CREATE TABLE job_definitions (
    job_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    definition_version integer NOT NULL CHECK (definition_version >= 1),
    updated_at timestamptz NOT NULL
);
