"""Least privilege in PostgreSQL (migration 0025_roles.sql, README.md "Database roles"):
connected as the services' own role, nothing can rewrite the event log or change the schema.

Each refusal is PostgreSQL's own, SQLSTATE 42501 (insufficient_privilege), checked on the
same clone of the migrated template the other tests use. That the app role CAN do everything
the services do is shown here for one run end to end through the scheduler's, dispatcher's and
gateway's code, and by the whole e2e and fault suites, whose services connect as this role
(tests/helpers/e2e.py, tests/faults/conftest.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from urllib.parse import urlsplit

import asyncpg
import pytest

from ostinato.db.migrate import migrate
from ostinato.db.pool import _init_connection, create_pool
from ostinato.eventlog.rebuild import rebuild
from ostinato.runtime.settings import Settings
from tests.helpers.env import (
    OWNER_URL,
    app_url_for,
    drop_database,
    fresh_database,
    owner_url_for,
    url_for,
)
from tests.helpers.integration import drive_one_run, event_count
from tests.helpers.privileges import APP_ROLE, database, refused

pytestmark = pytest.mark.integration

OWNER_ROLE = urlsplit(OWNER_URL).username
DML = ("SELECT", "INSERT", "UPDATE", "DELETE")
NEVER = ("TRUNCATE", "REFERENCES", "TRIGGER")
# Written once: the log and the histories (0025_roles.sql's rule: a later migration that adds
# such a table revokes UPDATE/DELETE in the same file and lists it here).
APPEND_ONLY = {"events", "occurrence_skips", "run_steps_set_aside",
               "audit", "dag_versions"}  # 0027, 0030
INSERT_DELETE = {"blobs",  # immutable documents, deleted by retention
                 "operation_items", "operation_failures"}  # an operation's frozen selection
READ_ONLY = {"schema_migrations",
             "usage_carried", "ledger_carried"}  # 0046: written by the owner's procedure only
NO_DELETE = {"fan_outs",  # read models only the projector writes and no duty deletes (0029)
             "alert_states"}  # an alert episode is resolved, never deleted


def expected_privileges(table: str) -> set[str]:
    if table in APPEND_ONLY:
        return {"SELECT", "INSERT"}
    if table in INSERT_DELETE:
        return {"SELECT", "INSERT", "DELETE"}
    if table in READ_ONLY:
        return {"SELECT"}
    if table in NO_DELETE:
        return {"SELECT", "INSERT", "UPDATE"}
    return set(DML)


async def tables(conn: asyncpg.Connection) -> list[str]:
    return [r["relname"] for r in await conn.fetch(
        "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"
        " AND relkind IN ('r', 'p') ORDER BY relname")]


def test_the_services_default_to_the_app_role() -> None:
    assert urlsplit(Settings().database_url).username == "ostinato_app"
    assert APP_ROLE != OWNER_ROLE


async def test_the_app_role_has_no_attribute_and_no_membership(app: asyncpg.Connection) -> None:
    role = await app.fetchrow(
        "SELECT current_user AS name, rolsuper, rolcreaterole, rolcreatedb, rolreplication,"
        " rolbypassrls FROM pg_roles WHERE rolname = current_user")
    assert role["name"] == APP_ROLE
    assert not any(role[a] for a in ("rolsuper", "rolcreaterole", "rolcreatedb",
                                     "rolreplication", "rolbypassrls")), dict(role)
    assert await app.fetchval(
        "SELECT count(*) FROM pg_auth_members WHERE member = current_user::regrole") == 0
    assert not await app.fetchval("SELECT pg_has_role(current_user, $1, 'USAGE')", OWNER_ROLE)


async def test_the_app_role_owns_nothing_and_the_owner_owns_every_table(
        app: asyncpg.Connection) -> None:
    owned = await app.fetch(
        "SELECT relname FROM pg_class WHERE relowner = current_user::regrole"
        " UNION ALL SELECT proname FROM pg_proc WHERE proowner = current_user::regrole"
        " UNION ALL SELECT typname FROM pg_type WHERE typowner = current_user::regrole"
        " UNION ALL SELECT nspname FROM pg_namespace WHERE nspowner = current_user::regrole")
    assert owned == []
    assert not await app.fetchval(
        "SELECT has_schema_privilege(current_user, 'public', 'CREATE')")
    others = await app.fetch(
        "SELECT relname, pg_get_userbyid(relowner) AS owner FROM pg_class"
        " WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p', 'S')"
        " AND relowner <> $1::regrole", OWNER_ROLE)
    assert [dict(r) for r in others] == []


async def test_replication_role_is_refused_so_the_log_trigger_cannot_be_skipped(
        app: asyncpg.Connection) -> None:
    """The finding: `SET LOCAL session_replication_role = replica` turns triggers off for the
    session; it needs a superuser (PostgreSQL 15), so the tampering below never runs."""
    assert await refused(app, "SET session_replication_role = replica") is None
    assert await refused(app, "SET LOCAL session_replication_role = replica") is None
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        async with app.transaction():
            await app.execute("SET LOCAL session_replication_role = replica")
            await app.execute("UPDATE events SET actor = 'tampered'")
    assert await app.fetchval("SHOW session_replication_role") == "origin"


async def test_every_table_refuses_alter_truncate_and_disabling_triggers(
        app: asyncpg.Connection) -> None:
    found = await tables(app)
    assert {"events", "runs", "jobs", "outbox", "schema_migrations"} <= set(found)
    failures = []
    for table in found:
        for statement in (f'ALTER TABLE "{table}" DISABLE TRIGGER ALL',
                          f'ALTER TABLE "{table}" ADD COLUMN tampered int',
                          f'ALTER TABLE "{table}" OWNER TO "{APP_ROLE}"',
                          f'TRUNCATE "{table}"',
                          f'DROP TABLE "{table}"',
                          f'CREATE TRIGGER tampered BEFORE INSERT ON "{table}" FOR EACH ROW'
                          " EXECUTE FUNCTION suppress_redundant_updates_trigger()"):
            failures.append(await refused(app, statement))
    failures += [await refused(app, "CREATE TABLE tampered (id int)"),
                 await refused(app, "CREATE FUNCTION tampered() RETURNS int LANGUAGE sql"
                                    " AS 'SELECT 1'"),
                 await refused(app, "ALTER FUNCTION refuse_event_mutation() RENAME TO t"),
                 await refused(app, "DROP TRIGGER events_append_only ON events")]
    assert [f for f in failures if f] == []


async def test_the_event_log_refuses_update_and_delete_by_privilege(
        app: asyncpg.Connection, pool: asyncpg.Pool) -> None:
    """Refused before the append-only trigger is reached: the role has no UPDATE or DELETE
    on `events` at all (the trigger stays, and also stops the owner: test_eventlog.py)."""
    await drive_one_run(pool, succeed=True)
    before = await app.fetch("SELECT * FROM events ORDER BY seq")
    assert before
    for statement in ("UPDATE events SET actor = 'tampered'", "DELETE FROM events",
                      "SELECT seq FROM events FOR UPDATE",
                      "DELETE FROM occurrence_skips", "UPDATE run_steps_set_aside SET seq = 0",
                      "UPDATE blobs SET data = '{}'", "DELETE FROM schema_migrations",
                      "INSERT INTO schema_migrations (version, name) VALUES (9999, 'x')"):
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
            await app.execute(statement)
    assert await app.fetch("SELECT * FROM events ORDER BY seq") == before


async def test_each_table_grants_exactly_what_the_services_need(
        app: asyncpg.Connection) -> None:
    wrong = {}
    for table in await tables(app):
        held = {p for p in (*DML, *NEVER) if await app.fetchval(
            "SELECT has_table_privilege(current_user, $1, $2)", f'public."{table}"', p)}
        if held != expected_privileges(table):
            wrong[table] = sorted(held)
    assert wrong == {}, "new table? see the rule in 0025_roles.sql"
    sequences = await app.fetch(
        "SELECT relname, has_sequence_privilege(current_user, oid, 'USAGE') AS usage,"
        " has_sequence_privilege(current_user, oid, 'UPDATE') AS setval FROM pg_class"
        " WHERE relnamespace = 'public'::regnamespace AND relkind = 'S'")
    assert sequences and all(s["usage"] and not s["setval"] for s in sequences)


async def test_the_app_role_runs_a_job_end_to_end(db_url: str) -> None:
    """Scheduler, dispatcher and worker-gateway code paths on a pool of the app role."""
    app_pool = await create_pool(app_url_for(database(db_url)), max_size=4)
    try:
        async with app_pool.acquire() as conn:
            assert await conn.fetchval("SELECT current_user") == APP_ROLE
        await drive_one_run(app_pool, succeed=False, stale_write=True)
        await drive_one_run(app_pool, succeed=True)
        async with app_pool.acquire() as conn:
            assert await event_count(conn) > 0
    finally:
        await app_pool.close()


async def test_rebuilding_read_models_needs_the_owner(db_url: str, pool: asyncpg.Pool) -> None:
    """`ostinato rebuild-projections` TRUNCATEs the read models: the owner can, the app role
    cannot (cli.py connects with OSTINATO_OWNER_DATABASE_URL)."""
    await drive_one_run(pool, succeed=True)
    app = await asyncpg.connect(app_url_for(database(db_url)))
    try:
        await _init_connection(app)
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await rebuild(app)
    finally:
        await app.close()
    owner = await asyncpg.connect(owner_url_for(database(db_url)))
    try:
        await _init_connection(owner)
        assert await rebuild(owner) > 0
    finally:
        await owner.close()


async def test_the_cli_migrates_and_rebuilds_as_the_owner_never_as_the_app_role() -> None:
    """`ostinato migrate` and `rebuild-projections` connect with OSTINATO_OWNER_DATABASE_URL
    (the services' OSTINATO_DATABASE_URL could do neither); the tables end up the owner's."""
    name = await fresh_database("template0")  # empty
    try:
        with pytest.raises(PermissionError, match="owner"):
            await migrate(app_url_for(name))
        env = {**os.environ, "OSTINATO_DATABASE_URL": app_url_for(name),
               "OSTINATO_OWNER_DATABASE_URL": owner_url_for(name)}
        for command in ("migrate", "rebuild-projections"):
            done = await asyncio.to_thread(
                subprocess.run, [sys.executable, "-m", "ostinato", command], env=env,
                capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
        conn = await asyncpg.connect(url_for(name))
        try:
            owners = {r["owner"] for r in await conn.fetch(
                "SELECT pg_get_userbyid(relowner) AS owner FROM pg_class"
                " WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'S')")}
        finally:
            await conn.close()
        assert owners == {OWNER_ROLE}
    finally:
        await drop_database(name)
