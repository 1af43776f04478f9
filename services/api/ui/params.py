"""Filter values of the UI's query strings and forms, read as the API reads them: a bad one is a
422 naming the field."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from ostinato.domain.errors import InvalidInput


def time_filter(name: str, value: str | None) -> datetime | None:
    """A `datetime-local` value (read as UTC) or a full ISO 8601 instant."""
    if not value:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidInput(f"{name}: not a date and time: {value!r}",
                           errors=[{"field": name, "message": "invalid"}]) from exc
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def uuid_filter(name: str, value: str | None) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError as exc:
        raise InvalidInput(f"{name}: not an id: {value!r}",
                           errors=[{"field": name, "message": "invalid"}]) from exc
