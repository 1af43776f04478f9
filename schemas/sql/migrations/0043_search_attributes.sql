-- 0043: searchable attributes (issue 40 item 4, docs/SEARCH_ATTRIBUTES.md). A tenant declares
-- typed attribute names (a cap per tenant, checked by the api). A job's and a run's values are
-- one jsonb object in a side table, written only when some are set: creating a run without
-- attributes writes nothing more, and the runs and jobs rows keep their shape. Equality
-- filters (`attributes @> '{"customer": "acme"}'`) use the GIN index (jsonb_path_ops:
-- containment only, smaller than the default opclass); a filter that matches many runs walks
-- the tenant's newest-first index instead. Both are read models of the run and job events.
CREATE TABLE search_attributes (
    tenant_id uuid NOT NULL,
    name text NOT NULL,
    type text NOT NULL CHECK (type IN ('keyword', 'text', 'int', 'float', 'bool', 'datetime')),
    created_at timestamptz NOT NULL,
    actor text NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE run_attributes (
    run_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    scheduled_for timestamptz NOT NULL,  -- the run's, for newest-first pages
    attributes jsonb NOT NULL
);
CREATE INDEX run_attributes_values ON run_attributes USING gin (attributes jsonb_path_ops);
CREATE INDEX run_attributes_tenant_time ON run_attributes (tenant_id, scheduled_for DESC, run_id);

-- The numbers among them (int and float values) once more, one row a value, for range filters
-- that match few runs (amount>9990): the btree finds them where walking the tenant's runs
-- newest first would read them all. Written with run_attributes, in the same statement.
CREATE TABLE run_attribute_numbers (
    run_id uuid NOT NULL,
    name text NOT NULL,
    tenant_id uuid NOT NULL,
    scheduled_for timestamptz NOT NULL,
    num numeric NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX run_attribute_numbers_value ON run_attribute_numbers (tenant_id, name, num);

CREATE TABLE job_attributes (
    job_id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    attributes jsonb NOT NULL
);
