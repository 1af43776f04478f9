"""Text PostgreSQL can store. Its `text`, `json` and `jsonb` hold no U+0000 (NUL), so a value
holding one is refused before any statement (naming the field), rather than by the database
half-way through a command: the same answer over HTTP and Kafka, and nothing to retry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

NUL = "\x00"


def fields_holding_nul(value: Any, path: str = "") -> list[str]:
    """The paths (`schedule.cron`, `retry.retryable_types[2]`) of the strings in a decoded JSON
    document (dicts, lists, scalars) that hold NUL, a dict key with one counting as its field."""
    return list(_walk(value, path))


def _walk(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, str):
        if NUL in value:
            yield path or "body"
    elif isinstance(value, dict):
        for key, item in value.items():
            name = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and NUL in key:
                yield name
            else:
                yield from _walk(item, name)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
