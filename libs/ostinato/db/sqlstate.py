"""Classify database errors by SQLSTATE, never by message text."""

from __future__ import annotations

from enum import StrEnum


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
