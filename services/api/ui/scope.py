"""Who is logged in to the web UI, and the guard every page and form goes through.

`ui_scope` turns the session cookie into a tenant-scoped `UiScope` (like the API's `TenantScope`:
one connection, the clock, the store, the settings), rechecking that the key that opened the
session still exists; without a live session a page redirects to the login form. `checked_form`
reads a POSTed form and refuses it (403) unless it carries the session's CSRF token."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
from litestar import MediaType, Request, Response
from litestar.datastructures import Cookie
from litestar.di import NamedDependency
from litestar.exceptions import HTTPException
from litestar.response import Redirect

from ostinato.clock import Clock
from ostinato.domain import roles
from ostinato.domain.errors import Forbidden, OstinatoError
from ostinato.eventlog.store import EventStore
from ostinato.runtime.problems import UNSTORABLE_TEXT
from ostinato.runtime.settings import Settings
from ostinato.stores import api_keys
from ostinato.telemetry.logging import get_logger
from ostinato.tenancy import Principal
from services.api import auditing
from services.api.auditing import Audit
from services.api.ui import html
from services.api.ui.sessions import COOKIE, Session, Sessions

log = get_logger("ostinato.ui")
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'; object-src 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class LoginRequired(Exception):
    """No live session: the page redirects to the login form."""


class CsrfRejected(Forbidden):
    """A POST without this session's CSRF token (or from a session that may not change
    anything): a 403, recorded in the audit trail as refused."""

    def __init__(self, detail: str = "the form was not sent from this session") -> None:
        super().__init__(detail)


@dataclass(frozen=True, slots=True)
class UiScope:
    session_id: str
    session: Session
    tenant_id: uuid.UUID
    actor: str  # as the API's audit trail names a tenant's key: "tenant:<name>"
    conn: asyncpg.Connection
    clock: Clock
    store: EventStore
    settings: Settings
    audit: Audit  # a form's control action is audited like the API's (services.api.auditing)

    @property
    def csrf(self) -> str:
        return self.session.csrf

    def page(self, title: str, body: html.Safe, section: str = "",
             status: int = 200) -> Response[str]:
        return html_response(html.page(title, body, section=section, tenant=self.session.tenant,
                                       csrf=self.csrf, flash=self.session.take_flash(),
                                       role=self.session.role), status)


async def ui_scope(request: Request, sessions: NamedDependency[Sessions]) -> AsyncIterator[UiScope]:
    session_id = request.cookies.get(COOKIE)
    session = sessions.get(session_id)
    if session is None or session_id is None:
        raise LoginRequired
    state = request.app.state
    async with state.pool.acquire() as conn:
        owner = await api_keys.authenticate(conn, session.key_hash, state.clock.now())
        if owner is None or owner.tenant_id != session.tenant_id:  # the key is gone or revoked
            sessions.drop(session_id)
            raise LoginRequired
        actor = f"tenant:{owner.tenant_name}" + (f"/{owner.name}" if owner.name else "")
        caller = Principal(tenant_id=owner.tenant_id, role=roles.canonical(owner.role),
                           name=owner.tenant_name, key_id=owner.id, key_name=owner.name,
                           pools=tuple(owner.pools))
        async with auditing.recorded(conn, request, caller, session.tenant_id) as audit:
            yield UiScope(session_id=session_id, session=session, tenant_id=session.tenant_id,
                          actor=actor, conn=conn, clock=state.clock,
                          store=state.store, settings=state.settings, audit=audit)


Ui = NamedDependency[UiScope]


async def checked_form(request: Request, ui: UiScope) -> dict[str, Any]:
    form = await request.form()
    if not roles.may(ui.session.role, roles.OPERATE):  # a viewer's session changes nothing
        raise CsrfRejected
    if not ui.session.csrf_ok(form.get("_csrf")):
        log.warning("ui_csrf_rejected", path=request.url.path, tenant_id=str(ui.tenant_id))
        raise CsrfRejected
    return {k: form.get(k) for k in form}


def html_response(text: str, status: int = 200,
                  cookies: list[Cookie] | None = None) -> Response[str]:
    return Response(text, status_code=status, media_type=MediaType.HTML,
                    headers=SECURITY_HEADERS, cookies=cookies or [])


def redirect(path: str, cookies: list[Cookie] | None = None) -> Redirect:
    return Redirect(path, status_code=303, headers=SECURITY_HEADERS, cookies=cookies or [])


def _error_page(status: int, title: str, detail: str) -> Response[str]:
    body = html.fmt('<p class="error">{detail}</p><p><a href="/ui/runs">Back to runs</a></p>',
                    detail=detail)
    return html_response(html.page(title, body), status)


def on_login_required(request: Request, exc: LoginRequired) -> Response[Any]:
    if request.method == "GET" and "x-ui-fragment" not in request.headers:
        return redirect(html.url("/ui/login", next=request.url.path))
    return _error_page(401, "Logged out", "Your session has ended; log in again.")


def on_csrf(request: Request, exc: CsrfRejected) -> Response[str]:
    return _error_page(403, "Forbidden", "The form was not sent from this session (missing or "
                                         "wrong CSRF token); nothing was changed.")


def on_ostinato_error(request: Request, exc: OstinatoError) -> Response[str]:
    return _error_page(exc.status, exc.title, exc.detail)


def on_http_error(request: Request, exc: HTTPException) -> Response[str]:
    return _error_page(exc.status_code, "Request refused", str(exc.detail))


def on_unstorable_text(request: Request, exc: Exception) -> Response[str]:
    """A value holding U+0000 (a filter or a form field): bad input, as the API answers it."""
    return _error_page(400, "Bad request", "A value holds a character that cannot be stored "
                                           "(U+0000, NUL); nothing was changed.")


def on_unexpected(request: Request, exc: Exception) -> Response[str]:
    log.exception("ui_error", path=request.url.path)
    return _error_page(500, "Something went wrong", "The error was logged.")


EXCEPTION_HANDLERS: dict[Any, Any] = {
    LoginRequired: on_login_required,
    CsrfRejected: on_csrf,
    OstinatoError: on_ostinato_error,
    HTTPException: on_http_error,
    **dict.fromkeys(UNSTORABLE_TEXT, on_unstorable_text),
    Exception: on_unexpected,
}
