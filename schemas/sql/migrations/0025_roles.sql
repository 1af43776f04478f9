-- 0025: least privilege. Migrations run as the owner role (ostinato_owner: it owns the schema
-- objects and every table); the services connect as ostinato_app, which owns nothing and gets
-- only the table privileges granted here. Both roles are created outside the migrations, by
-- whoever administers the server (infra/postgres/up.sh locally, infra/k8s/postgres.yaml in a
-- cluster): creating roles needs CREATEROLE, which the owner does not have.
--
-- What ostinato_app can NOT do, by construction (tests/integration/test_db_privileges.py):
--   * ALTER, DROP, TRUNCATE, or disable a trigger of any table (those need ownership or the
--     TRUNCATE/TRIGGER privileges, never granted), create objects in schema public (PG 15:
--     only the database owner may), SET session_replication_role (superuser only);
--   * UPDATE or DELETE the run-event log `events`, nor the other history that is written once:
--     `occurrence_skips`, `run_steps_set_aside` (insert-only), `blobs` (immutable documents:
--     insert, and delete by retention), `schema_migrations` (read-only: /readyz reads it).
--
-- THE RULE FOR LATER MIGRATIONS (0026 and on): run as the owner (`ostinato migrate` with
-- OSTINATO_OWNER_DATABASE_URL). The default privileges below then give ostinato_app
-- SELECT, INSERT, UPDATE, DELETE on every new table and USAGE, SELECT on every new sequence,
-- with nothing more to write. A new table that must be append-only (a log, a history) or
-- read-only for the services must REVOKE what it must not have, in the same migration:
--     REVOKE UPDATE, DELETE ON new_history FROM ostinato_app;
-- and add itself to APPEND_ONLY (or READ_ONLY) in tests/integration/test_db_privileges.py,
-- which checks every table's grants against those lists.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ostinato_app') THEN
        RAISE EXCEPTION 'role ostinato_app does not exist'
            USING HINT = 'create it first (infra/postgres/up.sh, infra/k8s/postgres.yaml): '
                         'CREATE ROLE ostinato_app LOGIN';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_class
               WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p', 'S', 'v')
                 AND relowner <> current_user::regrole) THEN
        RAISE EXCEPTION 'migrations must run as the owner of every table (now: %)', current_user
            USING HINT = 'run them with OSTINATO_OWNER_DATABASE_URL, or hand the tables over: '
                         'REASSIGN OWNED BY <old owner> TO ostinato_owner';
    END IF;
    IF (SELECT rolsuper OR rolcreaterole OR rolbypassrls FROM pg_roles
        WHERE rolname = 'ostinato_app') THEN
        RAISE EXCEPTION 'ostinato_app must be NOSUPERUSER NOCREATEROLE NOBYPASSRLS';
    END IF;
END
$$;

-- Nothing from PUBLIC beyond PostgreSQL's defaults (CONNECT, TEMP, EXECUTE).
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM PUBLIC;

GRANT USAGE ON SCHEMA public TO ostinato_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ostinato_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO ostinato_app;

-- The log and the history written once.
REVOKE UPDATE, DELETE ON events, occurrence_skips, run_steps_set_aside FROM ostinato_app;
REVOKE UPDATE ON blobs FROM ostinato_app;
REVOKE INSERT, UPDATE, DELETE ON schema_migrations FROM ostinato_app;

-- Tables and sequences the owner creates in later migrations.
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ostinato_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO ostinato_app;
