"""The services' database role: what it may not do (README.md "Database roles")."""

from __future__ import annotations

from urllib.parse import urlsplit

import asyncpg

from tests.helpers.env import (
    APP_URL,
)

APP_ROLE = urlsplit(APP_URL).username


def database(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


async def refused(conn: asyncpg.Connection, statement: str) -> str | None:
    """None if `statement` is refused with insufficient_privilege (rolled back either way),
    else what happened instead."""
    try:
        async with conn.transaction():
            await conn.execute(statement)
    except asyncpg.InsufficientPrivilegeError:
        return None
    except asyncpg.PostgresError as exc:
        return f"{statement}: {exc.sqlstate} {exc}"
    return f"{statement}: succeeded"
