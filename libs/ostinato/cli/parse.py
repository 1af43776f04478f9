"""Command-line values the API needs typed: JSON documents and instants."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import typer


def json_value(text: str, option: str) -> Any:
    """Inline JSON, `@path` for a file's, or `-` for stdin's."""
    if text == "-":
        source = sys.stdin.read()
    elif text.startswith("@"):
        try:
            source = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise typer.BadParameter(f"cannot read {text[1:]}: {exc.strerror}",
                                     param_hint=option) from exc
    else:
        source = text
    try:
        return msgspec.json.decode(source)
    except msgspec.DecodeError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint=option) from exc


def instant(text: str, option: str) -> datetime:
    """RFC 3339 with an offset (`2026-12-01T09:00:00Z`); a local time would be ambiguous."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise typer.BadParameter(f"not an RFC 3339 instant: {text!r}",
                                 param_hint=option) from exc
    if value.tzinfo is None:
        raise typer.BadParameter(f"{text!r} has no UTC offset (add Z or +01:00)",
                                 param_hint=option)
    return value
