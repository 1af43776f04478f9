"""Pins that only a database can check: the committed `schemas/sql/schema.sql` is the schema
the migrations produce when applied in order to an empty database."""

from __future__ import annotations

import difflib

import pytest

from ostinato.db.migrate import migrate
from ostinato.db.schema_dump import SCHEMA_FILE, dump_schema
from tests.helpers.env import drop_database, fresh_database, owner_url_for, url_for

pytestmark = pytest.mark.integration


async def test_committed_schema_equals_the_migrations_applied_from_empty() -> None:
    name = await fresh_database("template0")  # empty, not the migrated test template
    try:
        await migrate(owner_url_for(name))  # as in production: the owner migrates
        dumped = await dump_schema(url_for(name))
    finally:
        await drop_database(name)
    committed = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else ""
    if committed != dumped:
        diff = difflib.unified_diff(committed.splitlines(), dumped.splitlines(),
                                    "committed", "migrations", lineterm="", n=1)
        pytest.fail(f"{SCHEMA_FILE} differs from the migrations: run `ostinato schema-dump` "
                    "(`python -m ostinato schema-dump`) and commit the file\n"
                    + "\n".join(list(diff)[:60]))
