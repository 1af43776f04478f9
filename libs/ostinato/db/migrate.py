"""Apply the numbered, forward-only SQL migrations in `schemas/sql/migrations`.

Each file runs in its own transaction and is recorded in `schema_migrations`; an advisory lock
lets several services start at once without racing. A gap in the numbering is refused.

Migrations run as the owner role (OSTINATO_OWNER_DATABASE_URL), which owns every table; the
services' role cannot create or alter anything (0025_roles.sql, README.md "Database roles").
"""

from __future__ import annotations

import re
from pathlib import Path

import asyncpg

MIGRATIONS_DIR = Path(__file__).resolve().parents[3] / "schemas" / "sql" / "migrations"
_LOCK_KEY = 0x05717A70  # arbitrary, fixed: "ostinato migrations"
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def discover(directory: Path = MIGRATIONS_DIR) -> list[tuple[int, Path]]:
    found: list[tuple[int, Path]] = []
    for path in sorted(directory.glob("*.sql")):
        match = _NAME.match(path.name)
        if not match:
            raise ValueError(f"migration file name not of the form NNNN_name.sql: {path.name}")
        found.append((int(match.group(1)), path))
    for expected, (number, path) in enumerate(found, start=1):
        if number != expected:
            raise ValueError(f"migration numbering has a gap or duplicate at {path.name}")
    return found


async def migrate(dsn: str, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply what is missing; return the names applied now."""
    conn = await asyncpg.connect(dsn)
    applied_now: list[str] = []
    try:
        await _apply(conn, directory, applied_now)
    except asyncpg.InsufficientPrivilegeError as exc:
        raise PermissionError(
            f"migration refused: {exc}; migrations run as the owner of the database and of "
            "every table (OSTINATO_OWNER_DATABASE_URL), not as the services' role; a "
            "database from before the roles is handed to the owner by infra/postgres/up.sh "
            "(REASSIGN OWNED)") from exc
    finally:
        await conn.close()
    return applied_now


async def _apply(conn: asyncpg.Connection, directory: Path, applied_now: list[str]) -> None:
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for number, path in discover(directory):
            if number in done:
                continue
            async with conn.transaction():
                await conn.execute(path.read_text(encoding="utf-8"))
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                    number,
                    path.name,
                )
            applied_now.append(path.name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)


async def current_version(conn: asyncpg.Connection) -> int:
    exists = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    if not exists:
        return 0
    return await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations")


def expected_version(directory: Path = MIGRATIONS_DIR) -> int:
    found = discover(directory)
    return found[-1][0] if found else 0
