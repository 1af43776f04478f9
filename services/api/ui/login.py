"""Logging in to the web UI with an API key, and out again.

The key is checked exactly as the API checks a bearer key (`ostinato.runtime.auth.authenticate`).
A tenant's key opens that tenant's pages; the admin key opens the tenants page, from which it may
act for one tenant (`tenants.py`). The login form carries a
double-submit token (a cookie and a hidden field that must match), so another site cannot log a
browser in under a key of its own choosing."""

from __future__ import annotations

import secrets

from litestar import Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.di import NamedDependency
from litestar.params import FromQuery

from ostinato.domain import roles
from ostinato.runtime.auth import authenticate
from services.api.ui.render import render
from services.api.ui.scope import Ui, checked_form, log, redirect
from services.api.ui.sessions import COOKIE, LOGIN_COOKIE, MAX_AGE_SECONDS, Sessions

# where a login without a page to return to lands: the overview, what an operator reads first
# (runs by state, lag, failures, alerts per pool; docs/UI.md)
LANDING = "/ui/overview"


def cookie_for(request: Request, key: str, value: str, max_age: int | None) -> Cookie:
    return Cookie(key=key, value=value, path="/ui", max_age=max_age, httponly=True,
                  samesite="strict", secure=request.url.scheme == "https")


def _safe_next(target: str | None) -> str:
    """Only a page of this UI: never an absolute or protocol-relative URL (open redirect)."""
    if target and target.startswith("/ui/") and not target.startswith("/ui//") \
            and "\\" not in target and target != "/ui/login":
        return target
    return LANDING


def _login_page(request: Request, error: str | None = None, status: int = 200,
                next_path: str = LANDING) -> Response[str]:
    token = secrets.token_urlsafe(24)
    return render("login.html", status=status, error=error, token=token, next_path=next_path,
                  cookies=[cookie_for(request, LOGIN_COOKIE, token, 600)])


@get("/", include_in_schema=False)
async def home() -> Response[None]:
    return redirect(LANDING)


@get("/login", include_in_schema=False)
async def login_form(request: Request, next: FromQuery[str | None] = None) -> Response[str]:
    return _login_page(request, next_path=_safe_next(next))


@post("/login", include_in_schema=False)
async def login(request: Request, sessions: NamedDependency[Sessions]) -> Response[str]:
    form = await request.form()
    next_path = _safe_next(form.get("next"))
    token, expected = form.get("_login") or "", request.cookies.get(LOGIN_COOKIE) or ""
    if not token or not secrets.compare_digest(token.encode(), expected.encode()):
        return _login_page(request, "The login form expired; please try again.", 403, next_path)
    key = (form.get("api_key") or "").strip()
    state = request.app.state
    found = None
    async with state.pool.acquire() as conn:
        if key:
            found = await authenticate(conn, key, state.settings.admin_key, state.clock.now())
        if found is None:
            log.info("ui_login_refused", reason="unknown key")
            return _login_page(request, "Unknown API key.", 401, next_path)
        if found.tenant_id is None and next_path == LANDING:
            next_path = "/ui/tenants"  # the admin key has no runs of its own: choose one first
        if not roles.may(found.role, roles.READ):
            return _login_page(request, f"A {found.role} key cannot read; log in with an "
                                        "operator or viewer key.", 403, next_path)
        session_id, _ = await sessions.create(conn, state.clock, found.tenant_id, found.name,
                                              found.role, key)
    log.info("ui_login", tenant_id=str(found.tenant_id or ""), role=found.role)
    return redirect(next_path, cookies=[
        cookie_for(request, COOKIE, session_id, MAX_AGE_SECONDS),
        cookie_for(request, LOGIN_COOKIE, "", 0)])


@post("/logout", include_in_schema=False)
async def logout(request: Request, ui: Ui, sessions: NamedDependency[Sessions]) -> Response[str]:
    await checked_form(request, ui, action=None)  # any role may end its own session
    await sessions.drop(ui.conn, ui.session_id)  # on every instance at once: the row goes
    return redirect("/ui/login", cookies=[cookie_for(request, COOKIE, "", 0)])


ROUTES = [home, login_form, login, logout]
