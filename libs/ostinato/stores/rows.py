"""Records → typed rows: the one conversion every store uses.

Rows are built positionally (`Row(*record)`: 1 µs for a 29-column run, where `Row(**record)`
took 8 µs through the record's mapping protocol, on the hot paths of claims, outcomes and
dispatch rounds), so a row type declares its fields in the order its queries return their
columns. That order is checked once per (row type, column list): a query whose columns differ
from its row type, in name or in order, is an error naming both, never a silent mix-up
(tests/integration/test_stores.py checks every store query the same way).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import msgspec

T = TypeVar("T", bound=msgspec.Struct)
_checked: set[tuple[type, tuple[str, ...]]] = set()


def columns_of(row_type: type[msgspec.Struct]) -> tuple[str, ...]:
    return tuple(f.name for f in msgspec.structs.fields(row_type))


def _check(row_type: type[T], record: Any) -> None:
    names = tuple(record.keys())
    if (row_type, names) in _checked:
        return
    expected = columns_of(row_type)
    if names != expected:
        raise TypeError(f"{row_type.__name__} takes the columns {expected}; the query returned "
                        f"{names}")
    _checked.add((row_type, names))


def one(row_type: type[T], record: Any) -> T | None:
    """The row as `row_type`, or None."""
    if record is None:
        return None
    _check(row_type, record)
    return row_type(*record)


def many(row_type: type[T], records: Iterable[Any]) -> list[T]:
    rows = list(records)
    if not rows:
        return []
    _check(row_type, rows[0])
    return [row_type(*r) for r in rows]
