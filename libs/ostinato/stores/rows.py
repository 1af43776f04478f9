"""Records → typed rows: the one conversion every store uses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import msgspec

T = TypeVar("T", bound=msgspec.Struct)


def one(row_type: type[T], record: Any) -> T | None:
    """The row as `row_type`, or None; a column the type lacks is an error, not ignored."""
    return None if record is None else row_type(**record)


def many(row_type: type[T], records: Iterable[Any]) -> list[T]:
    return [row_type(**r) for r in records]
