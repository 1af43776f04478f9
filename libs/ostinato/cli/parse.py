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


def attributes(pairs: list[str] | None, option: str = "--attribute") -> dict[str, Any]:
    """`NAME=VALUE` pairs as searchable attributes: a VALUE that is JSON is taken as such
    (`n=5` an int, `vip=true` a bool, `at="2026-01-01T00:00:00Z"` a string), any other text as
    a string (`customer=acme`); the API checks each against its declared type."""
    found: dict[str, Any] = {}
    for pair in pairs or []:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint=option)
        if name in found:
            raise typer.BadParameter(f"{name!r} given twice", param_hint=option)
        try:
            found[name] = msgspec.json.decode(text)
        except msgspec.DecodeError:
            found[name] = text
    return found
