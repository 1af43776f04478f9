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
    """What a SQLSTATE (asyncpg's `exc.sqlstate`) means for a retry: the one classifier, used by
    `is_transient` and so by every background duty (`ostinato.runtime.duties`)."""
    if not sqlstate:
        return DbErrorKind.TRANSIENT
    if sqlstate in ("40001", "40P01"):
        return DbErrorKind.RETRY_TRANSACTION
    if sqlstate == "23505":
        return DbErrorKind.CONFLICT
    if sqlstate[:2] in ("08", "53", "57"):
        return DbErrorKind.TRANSIENT
    return DbErrorKind.PERMANENT


# Errors of the connection itself, whatever the SQLSTATE: the server gone or restarting
# (OSError and its ConnectionError, TimeoutError) and a connection asyncpg found broken
# mid-operation (InterfaceError, InternalClientError: "the underlying connection is closed",
# "cannot switch to state").
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError, ConnectionError, TimeoutError, asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the same work later may succeed: a broken connection, or a SQLSTATE
    `classify` calls transient or worth a new transaction (connection 08, resources 53,
    operator intervention 57, serialization 40001, deadlock 40P01). Anything else (a missing
    table, a syntax error, a constraint) fails again the same way."""
    if isinstance(exc, _CONNECTION_ERRORS):
        return True
    code = getattr(exc, "sqlstate", None)
    return isinstance(code, str) and bool(code) and classify(code) in (
        DbErrorKind.TRANSIENT, DbErrorKind.RETRY_TRANSACTION)


READ_ONLY = "25006"  # read_only_sql_transaction: a standby, or a server set read-only
IO_ERROR = "58030"  # the server could not write a data or WAL file


def is_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot serve now, not that the request was wrong: a
    transient error (`is_transient`: connection refused or lost, shutting down, starting up,
    out of connections or disk, a pool's acquire timing out) or a server refusing writes
    (read-only 25006 after a failover, I/O error 58030). The API answers these 503. A group
    (Litestar gathers what a request's dependencies raise on cleanup: a transaction's exit on
    a connection the primary's death cut, as a failover does) is one when all it holds are."""
    if isinstance(exc, BaseExceptionGroup):
        return all(is_unavailable(e) for e in exc.exceptions)
    code = getattr(exc, "sqlstate", None)
    return is_transient(exc) or code in (READ_ONLY, IO_ERROR)
