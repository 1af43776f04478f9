"""Rendering answers: a rich table for people, JSON or JSON lines for programs.

JSON field names and values are the API's own (msgspec's encoding of the same models), so
`-o json` is a stable contract and `ostinato runs list -o jsonl | jq` sees what the API sent.
Tables pick a few columns and print times in UTC without microseconds; they are not a
contract. When stdout is not a terminal, tables are not cut to 80 columns.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import msgspec
from rich import box
from rich.console import Console
from rich.table import Table

from ostinato.cli.context import Output

Column = tuple[str, Callable[[Any], Any]]  # header, value of a row


def stdout() -> Console:
    terminal = sys.stdout.isatty()
    return Console(highlight=False, soft_wrap=not terminal, width=None if terminal else 400)


def plain(value: Any) -> Any:
    """A model as JSON-ready builtins (datetimes as RFC 3339, ids as text)."""
    return msgspec.to_builtins(value)


def text(value: Any) -> str:
    """One table cell."""
    if value is None or value == "":
        return "-"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds").replace("+00:00", "Z")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list | msgspec.Struct):
        return msgspec.json.encode(value).decode()
    return str(value)


def emit(output: Output, value: Any, columns: Sequence[Column] | None = None) -> None:
    """One object: a FIELD/VALUE table (or the given columns), a JSON document or one line."""
    if output is Output.table:
        if columns:
            _table([value], columns)
        elif isinstance(value, msgspec.Struct):
            _table([(f, getattr(value, f)) for f in value.__struct_fields__],
                   [("FIELD", lambda kv: kv[0]), ("VALUE", lambda kv: kv[1])])
        else:
            _table([("value", value)], [("FIELD", lambda kv: kv[0]), ("VALUE", lambda kv: kv[1])])
        return
    _write(plain(value), indent=output is Output.json)


def emit_many(output: Output, items: Iterable[Any], columns: Sequence[Column]) -> int:
    """Many objects: a table, a JSON array, or one object a line as they arrive (jsonl streams
    page after page; the others wait for the last). Returns how many."""
    if output is Output.jsonl:
        n = 0
        for item in items:
            _write(plain(item), indent=False)
            n += 1
        return n
    rows = list(items)
    if output is Output.json:
        _write([plain(r) for r in rows], indent=True)
    else:
        _table(rows, columns)
    return len(rows)


def _write(value: Any, *, indent: bool) -> None:
    data = msgspec.json.encode(value)
    if indent:
        data = msgspec.json.format(data, indent=2)
    sys.stdout.write(data.decode() + "\n")
    sys.stdout.flush()


def _table(rows: Sequence[Any], columns: Sequence[Column]) -> None:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for header, _ in columns:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(text(get(row)) for _, get in columns))
    console = stdout()
    with console.capture() as captured:
        console.print(table)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    sys.stdout.flush()


def schedule_text(schedule: dict[str, Any]) -> str:
    """A job's schedule in a few words: `cron 30 2 * * * Europe/Berlin`, `every 15m`, `at ...`."""
    if schedule.get("cron"):
        return f"cron {schedule['cron']} {schedule.get('timezone', 'UTC')}"
    if schedule.get("every"):
        return f"every {schedule['every']}"
    if schedule.get("at"):
        return f"at {schedule['at']}"
    return "now"
