"""Migrations are expand-then-contract (docs/UPGRADES.md, issue 39 item 6): every migration
newer than the previous release's last one (tests/compat/PREVIOUS) only expands the schema,
unless it is marked `-- contract: <reason>`, and the migrations the previous release shipped
are unchanged (a database that ran them never runs an edited copy). The rule's reader,
tests/helpers/migration_rules.py, is checked on samples of each kind first."""

from __future__ import annotations

import pytest

from ostinato.db.migrate import MIGRATIONS_DIR, discover
from tests.helpers.compat import MIGRATIONS, git, previous_commit, previous_migrations
from tests.helpers.migration_rules import contract_operations, contract_reason, refusals

CONTRACT = {
    "drop column": "ALTER TABLE runs DROP COLUMN last_error;",
    "drop column without the keyword": "ALTER TABLE runs DROP last_error;",
    "drop table": "DROP TABLE IF EXISTS workers;",
    "drop view": "DROP VIEW run_summary;",
    "drop index": "DROP INDEX runs_due;",
    "drop a constraint": "ALTER TABLE runs DROP CONSTRAINT runs_occurrence_key;",
    "drop a default": "ALTER TABLE jobs ALTER COLUMN priority DROP DEFAULT;",
    "rename a column": "ALTER TABLE jobs RENAME COLUMN payload TO body;",
    "rename a table": "ALTER TABLE jobs RENAME TO job_definitions;",
    "change a type": "ALTER TABLE tenants ALTER COLUMN weight TYPE bigint;",
    "change a type, long form": "ALTER TABLE tenants ALTER weight SET DATA TYPE bigint;",
    "set not null without a default": "ALTER TABLE jobs ALTER COLUMN pool SET NOT NULL;",
    "a new column not null without a default": "ALTER TABLE jobs ADD COLUMN owner text NOT NULL;",
    "a constraint on rows old code writes": "ALTER TABLE jobs ADD CONSTRAINT p CHECK (p > 0);",
}

EXPAND = {
    "a table": "CREATE TABLE gateway_instances (id text PRIMARY KEY, "
               "seen_at timestamptz NOT NULL);",
    "a nullable column": "ALTER TABLE workers ADD COLUMN liveness_seconds real "
                         "CHECK (liveness_seconds > 0);",
    "columns with defaults": "ALTER TABLE jobs ADD COLUMN a int NOT NULL DEFAULT 1, "
                             "ADD COLUMN b text;",
    "not null with its default set": "ALTER TABLE jobs ADD COLUMN c int; "
                                     "ALTER TABLE jobs ALTER COLUMN c SET DEFAULT 0; "
                                     "ALTER TABLE jobs ALTER COLUMN c SET NOT NULL;",
    "an index": "CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_x ON runs (tenant_id);",
    "an index replaced": "DROP INDEX runs_wake; CREATE INDEX runs_wake ON runs (wake_at);",
    "a trigger replaced": "DROP TRIGGER IF EXISTS t ON events; CREATE TRIGGER t BEFORE UPDATE "
                          "ON events FOR EACH ROW EXECUTE FUNCTION refuse();",
    "a function whose body says drop": "CREATE OR REPLACE FUNCTION f() RETURNS void AS $$ "
                                       "BEGIN DROP TABLE tmp; END $$ LANGUAGE plpgsql;",
    "an enum value": "ALTER TYPE run_state ADD VALUE 'paused';",
    "a relaxed column": "ALTER TABLE jobs ALTER COLUMN pool DROP NOT NULL;",
    "grants and comments": "-- we never DROP COLUMN here\nGRANT SELECT ON jobs TO ostinato_app;"
                           " COMMENT ON TABLE jobs IS 'drop me not';",
    "constraints of a table it creates": "CREATE TABLE t (a int); ALTER TABLE t ADD CONSTRAINT "
                                         "c CHECK (a > 0); ALTER TABLE t DROP COLUMN a;",
}


@pytest.mark.parametrize("sql", CONTRACT.values(), ids=CONTRACT.keys())
def test_a_contract_step_is_refused_unless_marked_with_a_reason(sql: str) -> None:
    assert contract_operations(sql), sql
    assert refusals("0099_x.sql", sql)
    marked = f"-- contract: the previous release no longer reads it (since 2026-12)\n{sql}"
    assert contract_reason(marked) and refusals("0099_x.sql", marked) == []
    assert refusals("0099_x.sql", f"-- contract:\n{sql}")  # a mark without a reason


@pytest.mark.parametrize("sql", EXPAND.values(), ids=EXPAND.keys())
def test_an_expand_step_passes(sql: str) -> None:
    assert contract_operations(sql) == []


def test_migrations_since_the_previous_release_only_expand() -> None:
    released = previous_migrations(previous_commit())
    assert released, "the previous release shipped no migration?"
    newer = [path for _, path in discover() if path.name > released[-1]]
    wrong = [r for path in newer for r in refusals(path.name, path.read_text())]
    assert not wrong, ("contract steps in migrations newer than the previous release "
                       "(docs/UPGRADES.md: expand now, contract a release later, marked "
                       f"'-- contract: <reason>'): {wrong}")


def test_the_previous_releases_migrations_are_unchanged() -> None:
    commit = previous_commit()
    mine = {path.name: path.read_text() for _, path in discover(MIGRATIONS_DIR)}
    for name in previous_migrations(commit):
        assert mine.get(name) == git("show", f"{commit}:{MIGRATIONS}/{name}"), (
            f"{name} differs from the previous release's: a database migrated by it never "
            "runs the edit; add a new migration instead")
