"""Selections shared by the resource modules: ids from the command line or from a filter."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TypeVar

from ostinato.cli.context import usage

T = TypeVar("T")


def first(items: Iterable[T], limit: int | None) -> Iterator[T]:
    return iter(items) if limit is None else islice(items, limit)


def need_selection(ids: list[str], filtered: bool, select_all: bool, hint: str) -> None:
    """A bulk verb acts on named ids, or on a filter's matches, or with --all on everything;
    never on everything by accident."""
    if ids and (filtered or select_all):
        raise usage("name ids or select with filters, not both")
    if not ids and not filtered and not select_all:
        raise usage(f"name one or more ids, or select with {hint} (or --all)")
