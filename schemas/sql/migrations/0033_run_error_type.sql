-- 0033: the run list filtered by the last attempt's error type (GET /v1/runs?error_type=, the
-- web UI): only runs with an error are in the index, newest occurrence first per type.
CREATE INDEX runs_tenant_error_type ON runs (tenant_id, (last_error->>'type'), scheduled_for DESC, id)
    WHERE last_error IS NOT NULL;
