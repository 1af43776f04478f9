"""Migrations are expand-then-contract (docs/UPGRADES.md, issue 39 item 6): every migration
newer than the previous release's last one (tests/compat/PREVIOUS) only expands the schema,
unless it is marked `-- contract: <reason>`, and the migrations the previous release shipped
are unchanged (a database that ran them never runs an edited copy). The rule's reader,
tests/helpers/migration_rules.py, is checked on samples of each kind first."""

from __future__ import annotations

import pytest

from ostinato.db.migrate import MIGRATIONS_DIR, discover
from tests.helpers.compat import MIGRATIONS, git, previous_commit, previous_migrations
from tests.helpers.migration_rules import (
    added_to_star_tables,
    contract_operations,
    contract_reason,
    refusals,
    star_read_tables,
)

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


STAR_READS = {
    "select star": ("SELECT * FROM runs WHERE id = $1;", {"runs"}),
    "an alias's star": ("SELECT r.* FROM run_attributes a JOIN runs r ON r.id = a.run_id;",
                        {"runs"}),
    "named columns": ("SELECT id, state FROM runs WHERE id = $1;", set()),
    "a count": ("SELECT count(*) FROM jobs;", set()),
    "a snapshot (read into dicts)": ("-- name: snapshot_jobs\nSELECT * FROM jobs ORDER BY id;",
                                     set()),
}


@pytest.mark.parametrize(("sql", "tables"), STAR_READS.values(), ids=STAR_READS.keys())
def test_the_tables_a_query_file_reads_with_select_star(sql: str, tables: set[str]) -> None:
    assert star_read_tables(sql) == tables


def test_a_column_added_to_a_table_read_with_select_star_is_refused_unless_marked() -> None:
    sql = "ALTER TABLE runs ADD COLUMN IF NOT EXISTS workflow_id text;"
    assert added_to_star_tables("0099_x.sql", sql, {"runs"})
    assert added_to_star_tables("0099_x.sql", sql, {"jobs"}) == []
    assert added_to_star_tables("0099_x.sql", "CREATE TABLE run_x (run_id uuid);", {"runs"}) == []
    marked = f"-- contract: no running release reads runs with SELECT * any more\n{sql}"
    assert added_to_star_tables("0099_x.sql", marked, {"runs"}) == []


def _previous_star_tables(commit: str) -> set[str]:
    """The tables the previous release's query files read with `SELECT *`."""
    files = [f for f in git("ls-tree", "-r", "--name-only", commit).split()
             if f.endswith(".sql") and not f.startswith("schemas/")]
    return {t for f in files for t in star_read_tables(git("show", f"{commit}:{f}"))}


def test_no_column_is_added_to_a_table_the_previous_release_reads_with_select_star() -> None:
    commit = previous_commit()
    released = previous_migrations(commit)
    star = _previous_star_tables(commit)
    assert "runs" in star  # the reader finds what it is for (stores/sql/runs.sql)
    newer = [path for _, path in discover() if path.name > released[-1]]
    wrong = [r for path in newer
             for r in added_to_star_tables(path.name, path.read_text(), star)]
    assert not wrong, ("columns added to tables the previous release reads with SELECT * into "
                       f"positional rows (docs/UPGRADES.md): {wrong}")


def test_the_previous_releases_migrations_are_unchanged() -> None:
    commit = previous_commit()
    mine = {path.name: path.read_text() for _, path in discover(MIGRATIONS_DIR)}
    for name in previous_migrations(commit):
        assert mine.get(name) == git("show", f"{commit}:{MIGRATIONS}/{name}"), (
            f"{name} differs from the previous release's: a database migrated by it never "
            "runs the edit; add a new migration instead")
