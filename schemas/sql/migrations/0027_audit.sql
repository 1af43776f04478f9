-- 0027: the audit trail of control actions (docs/SECURITY.md "Audit trail"). One row per
-- attempt at a control action through the API: who (key id and name, role, the key's own
-- tenant), for which tenant, which request, on what (target kind and id), how it ended (the
-- HTTP status; outcome done, refused, rejected or error) and, where it applies, the state before
-- and after. A done row is written in the action's own transaction; a refused or rejected one
-- after the action rolled back. As append-only as the log: ostinato_app may only INSERT and
-- SELECT, and a trigger refuses UPDATE, DELETE and TRUNCATE to the owner too.
CREATE TABLE audit (
    id               uuid        PRIMARY KEY,
    tenant_id        uuid,                    -- the tenant acted on (null: no tenant, e.g. global)
    caller_tenant_id uuid,                    -- the key's own tenant (null: the admin key)
    key_id           uuid,                    -- null: the admin key
    key_name         text        NOT NULL DEFAULT '',
    role             text        NOT NULL,
    actor            text        NOT NULL,    -- as events name it (runtime.auth.actor_of)
    request_id       text        NOT NULL,
    action           text        NOT NULL,    -- e.g. job.pause, key.rotate, limit.set
    target_kind      text        NOT NULL,
    target_id        text        NOT NULL DEFAULT '',
    status           smallint    NOT NULL,
    outcome          text        NOT NULL CHECK (outcome IN ('done', 'refused', 'rejected', 'error')),
    detail           text        NOT NULL DEFAULT '',
    before           json,
    after            json,
    recorded_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- GET /v1/audit: a tenant's newest first, keyset-paginated; the admin's view of every tenant.
CREATE INDEX audit_tenant_recent ON audit (tenant_id, recorded_at DESC, id DESC);
CREATE INDEX audit_recent ON audit (recorded_at DESC, id DESC);

CREATE FUNCTION refuse_audit_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit trail is append-only: % on audit is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION refuse_audit_mutation();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_audit_mutation();

REVOKE UPDATE, DELETE ON audit FROM ostinato_app;
