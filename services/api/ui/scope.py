"""Who is logged in to the web UI, and the guard every page and form goes through.

`ui_scope` turns the session cookie into a tenant-scoped `UiScope` (like the API's `TenantScope`:
one connection, the clock, the store, the settings), rechecking that the key that opened the
session still exists; without a live session a page redirects to the login form. `checked_form`
reads a POSTed form and refuses it (403) unless it carries the session's CSRF token.

The admin key's session has no tenant of its own: `admin_scope` serves its tenants page, and
`ui_scope` the tenant's pages it chose to act for (until then they redirect to the tenants
page)."""

from __future__ import annotations

import hmac
import math
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
from litestar import Request, Response
from litestar.datastructures import Cookie
from litestar.di import NamedDependency
from litestar.exceptions import HTTPException
from litestar.response import Redirect

from ostinato.clock import Clock
from ostinato.db.sqlstate import is_unavailable
from ostinato.domain import roles
from ostinato.domain.errors import Forbidden, OstinatoError, RateLimited, ServiceUnavailable
from ostinato.domain.roles import Principal
from ostinato.eventlog.store import EventStore
from ostinato.runtime import request_ids
from ostinato.runtime.auth import actor_of
from ostinato.runtime.problems import RETRY_AFTER_SECONDS, UNSTORABLE_TEXT
from ostinato.runtime.settings import Settings
from ostinato.stores import api_keys, tenants
from ostinato.telemetry.logging import get_logger
from services.api import auditing
from services.api.archived import Archive, archive_of
from services.api.auditing import Audit
from services.api.ui import html, render
from services.api.ui.render import SECURITY_HEADERS, Chrome, html_response
from services.api.ui.sessions import COOKIE, Session, Sessions, admin_proof

log = get_logger("ostinato.ui")
__all__ = ["SECURITY_HEADERS", "html_response"]  # their home is render; imported from here too


class LoginRequired(Exception):
    """No live session: the page redirects to the login form."""


class CsrfRejected(Forbidden):
    """A POST without this session's CSRF token: a 403, recorded in the audit trail as
    refused. (A session whose role may not change anything is refused as a role, with the
    role's own message: `checked_form`.)"""

    def __init__(self, detail: str = "the form was not sent from this session") -> None:
        super().__init__(detail)


class ChooseTenant(Exception):
    """An admin session on a tenant's page before choosing a tenant to act for: the page
    redirects to the tenants page."""


@dataclass(frozen=True, slots=True)
class UiScope:
    session_id: str
    session: Session
    tenant_id: uuid.UUID
    tenant: str  # the tenant's name (the one acted for, in an admin session)
    actor: str  # as the API's audit trail names the key: "tenant:<name>", or "admin"
    conn: asyncpg.Connection
    clock: Clock
    store: EventStore
    settings: Settings
    audit: Audit  # a form's control action is audited like the API's (services.api.auditing)
    archive: Archive | None = None  # archived runs read back (services.api.archived)

    @property
    def csrf(self) -> str:
        return self.session.csrf

    def chrome(self, section: str = "") -> Chrome:
        """The base layout's chrome for this session (takes its flash message)."""
        return render.chrome(section=section, tenant=self.tenant, csrf=self.csrf,
                             flash=self.session.take_flash(), role=self.session.role,
                             acting=self.session.acting_for is not None)

    def render(self, template: str, /, *, section: str = "", status: int = 200,
               **context: Any) -> Response[str]:
        """A page from a template extending base.html, inside this session's chrome."""
        return render.render(template, status=status, chrome=self.chrome(section), **context)



async def _caller(conn: asyncpg.Connection, state: Any, session_id: str,
                  session: Session) -> Principal | None:
    """The key that opened the session, checked again (None: it is gone, revoked or changed)."""
    admin_key = state.settings.admin_key
    if session.tenant_id is None:  # the admin key's session: the key must still be the admin's
        if admin_key and hmac.compare_digest(session.key_hash,
                                             admin_proof(session_id, admin_key)):
            return Principal(tenant_id=None, role=roles.ADMIN, name="admin")
        return None
    owner = await api_keys.authenticate(conn, session.key_hash, state.clock.now())
    if owner is None or owner.tenant_id != session.tenant_id:
        return None
    return Principal(tenant_id=owner.tenant_id, role=roles.canonical(owner.role),
                     name=owner.tenant_name, key_id=owner.id, key_name=owner.name,
                     pools=tuple(owner.pools))


@asynccontextmanager
async def _live_session(request: Request, sessions: Sessions
                        ) -> AsyncIterator[tuple[str, Session, Any, asyncpg.Connection, Principal]]:
    """The request's live session (read from PostgreSQL: any api instance may have opened it),
    a connection, and the key that opened the session, checked again (gone, revoked or changed:
    the session is deleted and the login form follows)."""
    session_id = request.cookies.get(COOKIE)
    if not session_id:
        raise LoginRequired
    state = request.app.state
    async with state.pool.acquire() as conn:
        session = await sessions.get(conn, state.clock, session_id)
        if session is None:
            raise LoginRequired
        caller = await _caller(conn, state, session_id, session)
        if caller is None:
            await sessions.drop(conn, session_id)
            raise LoginRequired
        yield session_id, session, state, conn, caller


async def _acting_name(conn: asyncpg.Connection, session: Session) -> str | None:
    """The name of the tenant an admin session acts for (None: none, or one since gone, which
    the session then forgets)."""
    if session.acting_for is None:
        return None
    name = await tenants.name_of(conn, session.acting_for)
    if name is None:
        session.acting_for = None
    return name


async def ui_scope(request: Request, sessions: NamedDependency[Sessions]) -> AsyncIterator[UiScope]:
    """A tenant's page: the session's tenant, or the one an admin session acts for (as the API
    answers the admin key with X-Ostinato-Tenant: events and audit rows name the actor admin)."""
    async with _live_session(request, sessions) as (session_id, session, state, conn, caller):
        if caller.tenant_id is None:
            name = await _acting_name(conn, session)
            if name is None or session.acting_for is None:
                raise ChooseTenant
            tenant_id = session.acting_for
        else:
            tenant_id, name = caller.tenant_id, caller.name
        async with auditing.recorded(conn, request, caller, tenant_id) as audit:
            yield UiScope(session_id=session_id, session=session, tenant_id=tenant_id,
                          tenant=name, actor=actor_of(caller), conn=conn, clock=state.clock,
                          store=state.store, settings=state.settings, audit=audit,
                          archive=archive_of(state))
            # in the action's transaction, before the answer (its redirect may reach another
            # instance): a flash set or shown
            await sessions.save(conn, session_id, session)


@dataclass(frozen=True, slots=True)
class AdminScope:
    """A page of the admin's own (the tenants): any live session gets one, and the page refuses
    (403, audited for a form) a key whose role may not administer."""

    session_id: str
    session: Session
    caller: Principal
    actor: str
    conn: asyncpg.Connection
    clock: Clock
    store: EventStore
    settings: Settings
    audit: Audit
    acting_name: str | None  # the tenant the session acts for, if it does

    @property
    def csrf(self) -> str:
        return self.session.csrf

    @property
    def tenant_id(self) -> uuid.UUID | None:
        return self.caller.tenant_id

    def need_admin(self) -> None:
        if not roles.may(self.caller.role, roles.ADMINISTER):
            raise Forbidden(roles.refusal(self.caller.role, roles.ADMINISTER))

    def chrome(self, section: str = "") -> Chrome:
        tenant = self.acting_name if self.caller.tenant_id is None else self.caller.name
        return render.chrome(section=section, tenant=tenant, csrf=self.csrf,
                             flash=self.session.take_flash(), role=self.session.role,
                             acting=self.acting_name is not None)

    def render(self, template: str, /, *, section: str = "", status: int = 200,
               **context: Any) -> Response[str]:
        return render.render(template, status=status, chrome=self.chrome(section), **context)


async def admin_scope(request: Request,
                      sessions: NamedDependency[Sessions]) -> AsyncIterator[AdminScope]:
    async with _live_session(request, sessions) as (session_id, session, state, conn, caller):
        acting = await _acting_name(conn, session) if caller.tenant_id is None else None
        async with auditing.recorded(conn, request, caller, caller.tenant_id) as audit:
            yield AdminScope(session_id=session_id, session=session, caller=caller,
                             actor=actor_of(caller), conn=conn, clock=state.clock,
                             store=state.store, settings=state.settings, audit=audit,
                             acting_name=acting)
            # with the action's audit row: the tenant acted for (or no longer), a flash
            await sessions.save(conn, session_id, session)


Ui = NamedDependency[UiScope]
AdminUi = NamedDependency[AdminScope]


async def checked_form(request: Request, ui: UiScope | AdminScope,
                       action: str | None = roles.OPERATE) -> dict[str, Any]:
    """The POSTed form, once the session's role may do `action` (None: any session, e.g. to
    log out) and the form carries its CSRF token. A viewer's form is refused for its role (403
    with what the role may do, the same detail its audit row records), not as a forged form:
    its token may well be right."""
    form = await request.form()
    if action is not None and not roles.may(ui.session.role, action):
        raise Forbidden(roles.refusal(ui.session.role, action))
    if not ui.session.csrf_ok(form.get("_csrf")):
        log.warning("ui_csrf_rejected", path=request.url.path, tenant_id=str(ui.tenant_id))
        raise CsrfRejected
    return {k: form.get(k) for k in form}


def redirect(path: str, cookies: list[Cookie] | None = None) -> Redirect:
    return Redirect(path, status_code=303, headers=SECURITY_HEADERS, cookies=cookies or [])


BACK = ("/ui/runs", "Back to runs")


def _error_page(status: int, title: str, detail: str, headers: dict[str, str] | None = None,
                ways: list[tuple[str, str]] | None = None) -> Response[str]:
    """Every error a browser gets under /ui: one page (templates/error.html) saying what
    happened, the status and the request id to quote, and a way back; never the API's JSON."""
    return render.render("error.html", status=status, headers=headers, code=status, title=title,
                         detail=detail, request_id=request_ids.current(),
                         ways=ways or [BACK])


def on_login_required(request: Request, exc: LoginRequired) -> Response[Any]:
    if request.method == "GET" and "x-ui-fragment" not in request.headers:
        return redirect(html.url("/ui/login", next=request.url.path))
    return _error_page(401, "Logged out", "Your session has ended; log in again.",
                       ways=[("/ui/login", "Log in"), BACK])


def on_choose_tenant(request: Request, exc: ChooseTenant) -> Response[Any]:
    if request.method == "GET" and "x-ui-fragment" not in request.headers:
        return redirect("/ui/tenants")
    return _error_page(409, "No tenant chosen", "The admin key acts for a tenant chosen on the "
                                                "tenants page; nothing was changed.")


def on_csrf(request: Request, exc: CsrfRejected) -> Response[str]:
    return _error_page(403, "Forbidden", "The form was not sent from this session (missing or "
                                         "wrong CSRF token); nothing was changed.")


def on_ostinato_error(request: Request, exc: OstinatoError) -> Response[str]:
    if isinstance(exc, RateLimited | ServiceUnavailable):  # when to ask again, as the API says
        return _error_page(exc.status, exc.title, exc.detail, {
            "Retry-After": str(max(1, math.ceil(exc.retry_after_seconds)))},
            _again(request))
    return _error_page(exc.status, exc.title, exc.detail)


def _again(request: Request) -> list[tuple[str, str]]:
    """A page that may work in a moment: 'Try again' (a page, not a form: a GET only)."""
    again = [(request.url.path + (f"?{request.url.query}" if request.url.query else ""),
              "Try again")] if request.method == "GET" else []
    return [*again, BACK]


def on_http_error(request: Request, exc: HTTPException) -> Response[str]:
    if exc.status_code == 404:
        return _error_page(404, "Not found", f"There is no page {request.url.path} (is its id "
                                             "complete?).")
    return _error_page(exc.status_code, "Request refused", str(exc.detail),
                       exc.headers)  # a 405's Allow


def is_ui_path(path: str) -> bool:
    return path == "/ui" or path.startswith("/ui/")


def with_ui_pages(api_handlers: dict[Any, Any]) -> dict[Any, Any]:
    """The app's own handlers, but an HTTP error raised before any UI route is matched (an
    unknown /ui path, a malformed id in one such as /ui/runs/not-a-uuid, a method it lacks) is
    an HTML page with a way back for a browser, not the API's JSON problem."""
    api_http = api_handlers[HTTPException]

    def on_unmatched(request: Request, exc: HTTPException) -> Response[Any]:
        if is_ui_path(request.url.path):
            return on_http_error(request, exc)
        return api_http(request, exc)

    return {**api_handlers, HTTPException: on_unmatched}


def on_unstorable_text(request: Request, exc: Exception) -> Response[str]:
    """A value holding U+0000 (a filter or a form field): bad input, as the API answers it."""
    return _error_page(400, "Bad request", "A value holds a character that cannot be stored "
                                           "(U+0000, NUL); nothing was changed.")


def on_unexpected(request: Request, exc: Exception) -> Response[str]:
    if is_unavailable(exc):  # the database restarting, failing over, out of connections
        log.warning("ui_database_unavailable", path=request.url.path, error=type(exc).__name__)
        return _error_page(503, "Service unavailable", "The database cannot serve this page "
                           f"now ({type(exc).__name__}). Try again in a moment.",
                           {"Retry-After": str(RETRY_AFTER_SECONDS)}, _again(request))
    log.exception("ui_error", path=request.url.path)
    return _error_page(500, "Something went wrong", "The error was logged; quote the request id "
                       "below when you report it.")


EXCEPTION_HANDLERS: dict[Any, Any] = {
    LoginRequired: on_login_required,
    ChooseTenant: on_choose_tenant,
    CsrfRejected: on_csrf,
    OstinatoError: on_ostinato_error,
    HTTPException: on_http_error,
    **dict.fromkeys(UNSTORABLE_TEXT, on_unstorable_text),
    Exception: on_unexpected,
}
