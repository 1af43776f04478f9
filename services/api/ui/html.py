"""HTML for the web UI without a template engine: every value goes through `esc` unless it is
already `Safe` (markup this module built), so a value can only ever render as text.

`fmt("<td>{name}</td>", name=job.name)` escapes `name`; `Safe` parts (built by `fmt`, `join`,
`badge`, ...) pass through unchanged. No other function here takes raw markup from a caller."""

from __future__ import annotations

import html
import json
import string
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from ostinato.domain import roles

_FORMATTER = string.Formatter()


class Safe(str):
    """Markup built by this module: inserted as it is."""

    __slots__ = ()


def esc(value: Any) -> Safe:
    if isinstance(value, Safe):
        return value
    if value is None:
        return Safe("")
    return Safe(html.escape(str(value), quote=True))


def fmt(template: str, /, **values: Any) -> Safe:
    """`template` (a literal of the caller's) with every `{name}` replaced by its escaped value."""
    return Safe(_FORMATTER.vformat(template, (), {k: esc(v) for k, v in values.items()}))


def join(parts: Iterable[Any], sep: str = "") -> Safe:
    return Safe(sep.join(esc(p) for p in parts))


def url(path: str, **query: Any) -> str:
    """A path with a query string of the given non-empty values (escape it where it is used)."""
    q = {k: str(v) for k, v in query.items() if v not in (None, "")}
    return f"{path}?{urlencode(q)}" if q else path


STATE_CLASSES = {
    "succeeded": "ok", "active": "ok", "fixed": "ok",
    "running": "busy", "queued": "busy", "scheduled": "wait", "retry_scheduled": "wait",
    "suspended": "wait", "paused": "wait", "new": "wait", "acknowledged": "wait",
    "failed": "bad", "dead_lettered": "bad", "cancelled": "off", "deleted": "off",
    "completed": "off", "wont_fix": "off",
    "pending": "wait", "waiting": "wait", "upstream_failed": "bad", "skipped": "off",  # DAGs
    "done": "ok", "rejected": "wait", "refused": "bad", "error": "bad",  # audit outcomes
}


def badge(state: str | None) -> Safe:
    if not state:
        return Safe("")
    return fmt('<span class="badge {cls}">{state}</span>', cls=STATE_CLASSES.get(state, "off"),
               state=state)


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
    return fmt("<pre>{text}</pre>", text=json.dumps(value, indent=2, sort_keys=True,
                                                   default=str, ensure_ascii=False))


def link(href: str, text: Any) -> Safe:
    return fmt('<a href="{href}">{text}</a>', href=href, text=text)


def short(value: Any) -> str:
    """The first block of a UUID: enough to tell rows apart in a table."""
    return str(value).split("-", 1)[0]


def table(headers: Iterable[str], rows: Iterable[Iterable[Any]], empty: str = "Nothing yet.",
          cls: str = "") -> Safe:
    body = [fmt("<tr>{cells}</tr>", cells=join(fmt("<td>{c}</td>", c=c) for c in row))
            for row in rows]
    if not body:
        return fmt('<p class="empty">{empty}</p>', empty=empty)
    return fmt('<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>',
               cls=cls, head=join(fmt("<th>{h}</th>", h=h) for h in headers), body=join(body))


def kv(pairs: Iterable[tuple[str, Any]]) -> Safe:
    """A two-column table of labels and values; a row whose value is None is left out."""
    return fmt('<table class="kv"><tbody>{rows}</tbody></table>', rows=join(
        fmt("<tr><th>{k}</th><td>{v}</td></tr>", k=k, v=v) for k, v in pairs if v is not None))


def hidden(name: str, value: Any) -> Safe:
    return fmt('<input type="hidden" name="{name}" value="{value}">', name=name, value=value)


def post_button(action: str, label: str, csrf: str, *, fields: dict[str, Any] | None = None,
                cls: str = "", extra: Safe | None = None) -> Safe:
    """A one-button POST form carrying the session's CSRF token."""
    inputs = join([hidden("_csrf", csrf), *(hidden(k, v) for k, v in (fields or {}).items())])
    return fmt('<form method="post" action="{action}" class="inline">{inputs}{extra}'
               '<button type="submit" class="{cls}">{label}</button></form>',
               action=action, inputs=inputs, extra=extra or Safe(""), cls=cls, label=label)


def select(name: str, options: Iterable[tuple[str, str]], chosen: str | None) -> Safe:
    return fmt('<select name="{name}" id="f-{name}">{opts}</select>', name=name, opts=join(
        fmt('<option value="{v}"{sel}>{label}</option>', v=v, label=label,
            sel=Safe(" selected") if v == (chosen or "") else Safe(""))
        for v, label in options))


# (section, path, label, the action a session's role needs to be offered it)
NAV = (("tenants", "/ui/tenants", "Tenants", roles.ADMINISTER),
       ("runs", "/ui/runs", "Runs", roles.READ),
       ("jobs", "/ui/jobs", "Jobs & schedules", roles.READ),
       ("dags", "/ui/dags", "DAGs", roles.READ),
       ("dead-letters", "/ui/dead-letters", "Dead letters", roles.READ),
       ("operations", "/ui/operations", "Bulk operations", roles.READ),
       ("pools", "/ui/pools", "Pools", roles.READ),
       ("workers", "/ui/workers", "Workers", roles.READ),
       ("keys", "/ui/keys", "Keys", roles.MANAGE_KEYS),
       ("audit", "/ui/audit", "Audit", roles.READ_AUDIT))


def page(title: str, body: Safe, *, section: str = "", tenant: str | None = None,
         csrf: str | None = None, flash: str | None = None, role: str | None = None,
         acting: bool = False) -> str:
    """A whole page. `tenant` is the tenant whose pages the session shows (None: an admin session
    acting for none, offered only the admin's pages); `acting`: an admin session acting for it."""
    nav = Safe("")
    banner = Safe("")
    if csrf is not None and (tenant is not None or role == roles.ADMIN):
        who = (fmt('<span class="who">admin for tenant <b>{t}</b></span>', t=tenant) if acting
               else fmt('<span class="who">tenant <b>{t}</b></span>', t=tenant)
               if tenant is not None else Safe('<span class="who"><b>admin</b></span>'))
        nav = fmt('<nav>{links}{who}{logout}</nav>',
                  links=join(fmt('<a href="{href}" class="{cls}">{label}</a>', href=href,
                                 label=label, cls="here" if key == section else "")
                             for key, href, label, action in NAV
                             if (role is None or roles.may(role, action))
                             and (tenant is not None or action == roles.ADMINISTER)),
                  who=who, logout=post_button("/ui/logout", "Log out", csrf, cls="link"))
        if acting:
            banner = fmt('<div class="acting" role="status">Acting for tenant <b>{t}</b> with '
                         'the admin key: its pages, as the API shows them to the admin key with '
                         'X-Ostinato-Tenant; every action is audited with actor admin. {stop}'
                         '</div>', t=tenant, stop=post_button(
                             "/ui/tenants/stop-acting", "Back to the tenants", csrf))
    note = fmt('<p class="flash" role="status">{flash}</p>', flash=flash) if flash else Safe("")
    return fmt(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<title>{title} · Ostinato</title>'
        '<link rel="icon" href="data:,">'
        '<link rel="stylesheet" href="/ui/static/ui.css">'
        '<script src="/ui/static/ui.js" defer></script></head>'
        '<body><header><a class="brand" href="/ui/runs">Ostinato</a>{nav}</header>'
        '<main>{banner}{note}<h1>{title}</h1>{body}</main></body></html>',
        title=title, nav=nav, banner=banner, note=note, body=body)
