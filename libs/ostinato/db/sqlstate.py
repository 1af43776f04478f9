"""Classify database errors by SQLSTATE, never by message text."""

from __future__ import annotations

from enum import StrEnum

import asyncpg


class DbErrorKind(StrEnum):
    TRANSIENT = "transient"  # connection lost, server shutting down, out of resources
    RETRY_TRANSACTION = "retry_transaction"  # serialization failure, deadlock
    CONFLICT = "conflict"  # unique violation
    PERMANENT = "permanent"


def classify(sqlstate: str | None) -> DbErrorKind:
    if not sqlstate:
        return DbErrorKind.TRANSIENT
    if sqlstate in ("40001", "40P01"):
        return DbErrorKind.RETRY_TRANSACTION
    if sqlstate == "23505":
        return DbErrorKind.CONFLICT
    if sqlstate[:2] in ("08", "53", "57"):
        return DbErrorKind.TRANSIENT
    return DbErrorKind.PERMANENT


# What a background loop retries after a pause instead of dying: the server gone or restarting
# (OSError, PostgresError) and a connection asyncpg found broken mid-operation (InterfaceError,
# InternalClientError: "the underlying connection is closed", "cannot switch to state").
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    OSError, asyncpg.PostgresError, asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError, TimeoutError,
)
