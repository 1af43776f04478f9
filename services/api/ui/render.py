"""The web UI's one template engine: Jinja2 over `services/api/ui/templates/`, every value
escaped (autoescape on for every template) and every name a template uses required
(StrictUndefined: a misspelt variable is an error, not an empty string).

A plain `jinja2.Environment` owned by the UI, not Litestar's TemplateConfig: pages answer
through the UI's own `Response` (the strict CSP and the other SECURITY_HEADERS, cookies, the
fragments live regions poll, error pages rendered by exception handlers outside any route).

Templates extend `base.html` (blocks `title`, `heading`, `content`) and import what they need
from `macros.html` (`id`, `when`, `duration`, `badge`, `post_button`, `empty`); a page answers
`ui.render("x.html", section="runs", **context)` (scope.UiScope.render), or
`render("x.html", chrome=..., **context)` where it has no session."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from litestar import MediaType, Response
from litestar.datastructures import Cookie
from markupsafe import Markup

from ostinato.domain import narrative, roles

TEMPLATES = Path(__file__).resolve().parent / "templates"

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'; object-src 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

STATE_CLASSES = {
    "succeeded": "ok", "active": "ok", "fixed": "ok",
    "running": "busy", "queued": "busy", "scheduled": "wait", "retry_scheduled": "wait",
    "suspended": "wait", "paused": "wait", "new": "wait", "acknowledged": "wait",
    "failed": "bad", "dead_lettered": "bad", "cancelled": "off", "deleted": "off",
    "completed": "off", "wont_fix": "off",
    "pending": "wait", "waiting": "wait", "upstream_failed": "bad", "skipped": "off",  # DAGs
    "done": "ok", "rejected": "wait", "refused": "bad", "error": "bad",  # audit outcomes
}

# (section, path, label, the action a session's role needs to be offered it)
NAV = (("tenants", "/ui/tenants", "Tenants", roles.ADMINISTER),
       ("overview", "/ui/overview", "Overview", roles.READ),
       ("runs", "/ui/runs", "Runs", roles.READ),
       ("jobs", "/ui/jobs", "Jobs & schedules", roles.READ),
       ("dags", "/ui/dags", "DAGs", roles.READ),
       ("dead-letters", "/ui/dead-letters", "Dead letters", roles.READ),
       ("operations", "/ui/operations", "Bulk operations", roles.READ),
       ("pools", "/ui/pools", "Pools", roles.READ),
       ("workers", "/ui/workers", "Workers", roles.READ),
       ("keys", "/ui/keys", "Keys", roles.MANAGE_KEYS),
       ("audit", "/ui/audit", "Audit", roles.READ_AUDIT))

TAIL = 8  # hex digits an id is shown by: a UUIDv7's last 8 are random, its first 8 a minute


def url(path: str, **query: Any) -> str:
    """A path with a query string of the given non-empty values (escaped where it is used)."""
    q = {k: str(v) for k, v in query.items() if v not in (None, "")}
    return f"{path}?{urlencode(q)}" if q else path


def id_tail(value: Any) -> str:
    """How an id is shown where there is no name: a UUID by its last 8 hex digits (`…4f2a9c1b`),
    the random part of a time-ordered UUIDv7 and of a name-derived UUIDv5, so ids made in the
    same minute never look alike (their first 8 digits are that minute); anything else whole."""
    text = str(value)
    try:
        return "…" + uuid.UUID(text).hex[-TAIL:]
    except ValueError:
        return text


def utc_text(at: datetime) -> str:
    """An instant as the page prints it before the script shows it relative: UTC, seconds."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def iso(at: datetime) -> str:
    """An instant for `<time datetime>`: ISO 8601 in UTC (what ui.js parses)."""
    return at.astimezone(UTC).isoformat()


def duration_text(seconds: float | None) -> str:
    """A duration as an operator reads it (`412 ms`, `3.4 s`, `2 min 5 s`, `3 h 12 min`,
    `2 d 4 h`): the timeline's words (ostinato.domain.narrative), empty for None."""
    return "" if seconds is None else narrative.duration_words(seconds)


def state_class(state: str | None) -> str:
    return STATE_CLASSES.get(state or "", "off")


@dataclass(frozen=True, slots=True)
class NavLink:
    href: str
    label: str
    here: bool


@dataclass(frozen=True, slots=True)
class Chrome:
    """What the base layout shows around a page: the session's navigation (None: no session,
    e.g. the login form or an error before one), who it is, its CSRF token, a flash message."""

    nav: list[NavLink] | None = None
    who: str = ""  # "tenant", "admin for tenant" or "admin"
    tenant: str | None = None
    csrf: str | None = None
    flash: str | None = None
    acting: bool = False


NO_CHROME = Chrome()


def chrome(*, section: str = "", tenant: str | None = None, csrf: str | None = None,
           flash: str | None = None, role: str | None = None, acting: bool = False) -> Chrome:
    """The layout's chrome for a session. `tenant`: the tenant whose pages the session shows
    (None: an admin session acting for none, offered only the admin's pages); `acting`: an admin
    session acting for it. Without a CSRF token (no session) there is no navigation."""
    if csrf is None or (tenant is None and role != roles.ADMIN):
        return Chrome(flash=flash)
    nav = [NavLink(href, label, key == section) for key, href, label, action in NAV
           if (role is None or roles.may(role, action))
           and (tenant is not None or action == roles.ADMINISTER)]
    who = "admin for tenant" if acting else "tenant" if tenant is not None else "admin"
    return Chrome(nav=nav, who=who, tenant=tenant, csrf=csrf, flash=flash, acting=acting)


ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,  # every template, whatever its name
    undefined=jinja2.StrictUndefined,
    trim_blocks=True, lstrip_blocks=True,
    auto_reload=False,
)
ENV.filters.update(id_tail=id_tail, utc=utc_text, iso=iso, duration=duration_text,
                   state_class=state_class)
ENV.globals.update(url=url)


def render_text(template: str, /, **context: Any) -> str:
    """The template rendered to a string (`chrome` defaults to none: no session)."""
    context.setdefault("chrome", NO_CHROME)
    return ENV.get_template(template).render(**context)


def html_response(text: str, status: int = 200, cookies: list[Cookie] | None = None,
                  headers: dict[str, str] | None = None) -> Response[str]:
    """An HTML answer with the UI's security headers (strict CSP: no inline script or style)."""
    return Response(text, status_code=status, media_type=MediaType.HTML,
                    headers={**SECURITY_HEADERS, **(headers or {})}, cookies=cookies or [])


def render(template: str, /, *, status: int = 200, cookies: list[Cookie] | None = None,
           headers: dict[str, str] | None = None, **context: Any) -> Response[str]:
    """The one way a page answers with a template: rendered, as an HTML response."""
    return html_response(render_text(template, **context), status, cookies, headers)


def macro(name: str, /, *args: Any, **kwargs: Any) -> Markup:
    """A macro of macros.html called from Python (the pages still built as strings show ids and
    times exactly as the templates do: one home for each)."""
    return Markup(getattr(ENV.get_template("macros.html").module, name)(*args, **kwargs))
