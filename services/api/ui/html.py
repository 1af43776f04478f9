"""The few cells still built in Python (a run page's tables, a JSON block) for the templates
(services/api/ui/templates, rendered by `render`): every value goes through `esc` unless it is
already `Safe` (markup this module or a template built), so a value can only ever render as text.

`fmt("<td>{name}</td>", name=job.name)` escapes `name`; `Safe` parts (built by `fmt`, `join`,
`table`, ...) pass through unchanged, in a template too (`Safe.__html__`). No other function
here takes raw markup from a caller. Every page is a template: there is no page built here."""

from __future__ import annotations

import html
import json
import string
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from services.api.ui import render
from services.api.ui.render import url

__all__ = ["Safe", "esc", "fmt", "ident", "join", "pre_json", "short", "table",
           "url", "when"]
_FORMATTER = string.Formatter()


class Safe(str):
    """Markup built by this module: inserted as it is (a template too: `__html__`)."""

    __slots__ = ()

    def __html__(self) -> str:
        return self


def esc(value: Any) -> Safe:
    if isinstance(value, Safe):
        return value
    if hasattr(value, "__html__"):  # a template's or a macro's markup
        return Safe(value.__html__())
    if value is None:
        return Safe("")
    return Safe(html.escape(str(value), quote=True))


def fmt(template: str, /, **values: Any) -> Safe:
    """`template` (a literal of the caller's) with every `{name}` replaced by its escaped value."""
    return Safe(_FORMATTER.vformat(template, (), {k: esc(v) for k, v in values.items()}))


def join(parts: Iterable[Any], sep: str = "") -> Safe:
    return Safe(sep.join(esc(p) for p in parts))


def when(at: datetime | None, zone: str | None = None) -> Safe:
    """A UTC instant as text (and, given the schedule's zone, its local time beside it)."""
    if at is None:
        return Safe('<span class="muted">—</span>')
    utc = at.astimezone(ZoneInfo("UTC"))
    text = utc.strftime("%Y-%m-%d %H:%M:%S") + " UTC"
    local = ""
    if zone and zone != "UTC":
        try:
            local = at.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")
        except (KeyError, ValueError):
            local = ""
    if local:
        return fmt('<time datetime="{iso}">{text}</time><br><span class="muted">{local} '
                   '({zone})</span>', iso=utc.isoformat(), text=text, local=local, zone=zone)
    return fmt('<time datetime="{iso}">{text}</time>', iso=utc.isoformat(), text=text)


def pre_json(value: Any) -> Safe:
    if value is None:
        return Safe('<span class="muted">—</span>')
    # tabindex: a <pre> that scrolls is reachable from the keyboard (axe: scrollable-region)
    return fmt('<pre tabindex="0">{text}</pre>', text=json.dumps(value, indent=2, sort_keys=True,
                                                   default=str, ensure_ascii=False))


def short(value: Any) -> str:
    """An id as plain text where no markup fits (a page's title): its random tail
    (`…4f2a9c1b`, render.id_tail), never its first block, which for a time-ordered UUIDv7 is the
    minute it was made in. In a page's body use `ident`."""
    return render.id_tail(value)


def ident(value: Any, href: str | None = None, label: Any = None) -> Safe:
    """An id that never looks like another, as the `id` macro shows it: the name (label) or the
    id's random tail, the full id on hover, a copy button; a link when given `href`."""
    return Safe(render.macro("id", value, href, label))


def table(headers: Iterable[str], rows: Iterable[Iterable[Any]], empty: str = "Nothing yet.",
          cls: str = "") -> Safe:
    body = [fmt("<tr>{cells}</tr>", cells=join(fmt("<td>{c}</td>", c=c) for c in row))
            for row in rows]
    if not body:
        return fmt('<p class="empty">{empty}</p>', empty=empty)
    return fmt('<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>',
               cls=cls, head=join(fmt("<th>{h}</th>", h=h) for h in headers), body=join(body))
