"""The tenant and its API keys (for a session whose key may manage keys: an operator's): the
keys with their role, pools and last use; issue, rotate (with a grace period) and revoke, as
/v1/keys does. A new key's secret is shown once, in the answer to the form that made it (never
kept in the session, never shown again)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery

from ostinato import tenancy
from ostinato.domain import roles
from ostinato.domain.errors import Forbidden, InvalidInput
from ostinato.stores import api_keys
from ostinato.wire.api import KeyRequest
from services.api.auditing import audited
from services.api.ui import html
from services.api.ui.html import Safe, badge, fmt, ident, join, when
from services.api.ui.scope import Ui, UiScope, checked_form, redirect

ROLES = [(r, r) for r in roles.TENANT_ROLES]
GRACES = [("0", "now"), ("3600", "in 1 hour"), ("86400", "in 24 hours"),
          ("604800", "in 7 days")]


def may_manage(ui: UiScope) -> bool:
    return roles.may(ui.session.role, roles.MANAGE_KEYS)


def _need(ui: UiScope) -> None:
    if not may_manage(ui):
        raise Forbidden(roles.refusal(ui.session.role, roles.MANAGE_KEYS))


def _controls(ui: UiScope, row: api_keys.KeyRow, active: bool, last_operator: bool) -> Safe:
    if not active:
        return Safe("")
    rotate = html.post_button(f"/ui/keys/{row.id}/rotate", "Rotate", ui.csrf,
                              extra=fmt('<label class="inline">old key ends {s}</label> ',
                                        s=html.select("grace_seconds", GRACES, "3600")))
    if last_operator:  # the API refuses it (409): not offered
        return rotate
    revoke = html.post_button(f"/ui/keys/{row.id}/revoke", "Revoke", ui.csrf, cls="danger")
    return join([rotate, revoke], " ")


@get("/keys", include_in_schema=False)
async def keys_page(ui: Ui, role: FromQuery[str | None] = None,
                    show: FromQuery[str | None] = None) -> Response[str]:
    _need(ui)
    now = ui.clock.now()
    rows = await api_keys.list_keys(ui.conn, ui.tenant_id)
    operators = [r for r in rows if roles.canonical(r.role) == roles.OPERATOR
                 and r.revoked_at is None]
    table_rows = []
    for r in rows:
        active = r.revoked_at is None or r.revoked_at > now
        if role and roles.canonical(r.role) != role:
            continue
        if show != "all" and not active:
            continue
        state = "active" if r.revoked_at is None else (
            "rotating" if active else "revoked")
        # names need not be unique: the key's id beside it tells two apart
        table_rows.append([join([fmt('<span class="key-name">{n}</span>', n=r.name) if r.name
                                 else Safe('<span class="muted">(unnamed)</span>'),
                                 " ", ident(r.id)]),
                           roles.canonical(r.role), ", ".join(r.pools) or "every pool",
                           when(r.created_at), badge({"active": "active", "rotating": "paused",
                                                      "revoked": "cancelled"}[state]),
                           fmt("{s}{until}", s=state, until=fmt(" until {t}", t=when(
                               r.revoked_at)) if state == "rotating" else ""),
                           when(r.last_used_at) if r.last_used_at else
                           Safe('<span class="muted">never</span>'),
                           _controls(ui, r, active, operators == [r])])
    info = html.kv([("tenant", ui.tenant), ("tenant id", fmt("<code>{i}</code>",
                                                                     i=ui.tenant_id)),
                    ("signed in with", ui.actor)])
    form = fmt('<form method="get" action="/ui/keys" class="filters"><label>role {r}</label>'
               '<label>show {s}</label><button type="submit">Filter</button> '
               '<a href="/ui/keys">clear</a></form>',
               r=html.select("role", [("", "any role"), *ROLES], role),
               s=html.select("show", [("", "active keys"), ("all", "revoked ones too")], show))
    issue = fmt(
        '<form method="post" action="/ui/keys" class="filters issue">{csrf}'
        '<label>name <input name="name" id="key-name" required maxlength="100" size="18">'
        '</label><label>role {role}</label><label>pools (worker keys; blank: every pool) '
        '<input name="pools" size="18" placeholder="default, etl"></label>'
        '<button type="submit">Issue key</button></form>',
        csrf=html.hidden("_csrf", ui.csrf), role=html.select("role", ROLES, "viewer"))
    body = join([
        fmt("<section><h2>Tenant</h2>{i}</section>", i=info),
        fmt("<section><h2>API keys</h2>{f}{t}<p class=\"muted\">Last use is kept to the minute. "
            "The tenant's last operator key cannot be revoked.</p></section>", f=form,
            t=html.table(["name", "role", "pools", "created", "", "state", "last used", ""],
                         table_rows, "No keys match.", "keys")),
        fmt("<section><h2>Issue a key</h2>{f}</section>", f=issue),
    ])
    return ui.page("Tenant & API keys", body, "keys")


def _shown_once(ui: UiScope, title: str, issued: tenancy.IssuedKey, note: str) -> Response[str]:
    body = fmt('<section class="issued"><p>{note}</p><p>Copy it now: it is shown <b>once</b> and '
               'only its hash is kept.</p><pre id="new-key">{key}</pre>{kv}'
               '<p><a href="/ui/keys">Back to the keys</a></p></section>',
               note=note, key=issued.key, kv=html.kv([
                   ("name", issued.name), ("role", issued.role),
                   ("pools", ", ".join(issued.pools) or "every pool")]))
    return ui.page(title, body, "keys")


@post("/keys", include_in_schema=False, opt=audited("key.issue", "key"))
async def issue(request: Request, ui: Ui) -> Response[Any]:
    form = await checked_form(request, ui)
    _need(ui)
    pools = sorted({p.strip() for p in str(form.get("pools") or "").split(",") if p.strip()})
    try:
        data = msgspec.convert({"name": (form.get("name") or "").strip(),
                                "role": form.get("role"), "pools": pools}, KeyRequest)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"the key: {exc}", errors=[{"field": "key",
                                                       "message": str(exc)}]) from exc
    unknown = sorted(set(data.pools) - set(ui.settings.pool_names))
    if unknown:
        raise InvalidInput(f"unknown pool(s) {', '.join(unknown)}",
                           errors=[{"field": "pools", "message": "unknown"}])
    issued = await tenancy.issue_key(ui.conn, ui.store, ui.tenant_id, name=data.name,
                                     role=data.role, pools=data.pools, actor=ui.actor)
    ui.audit.target_id = str(issued.key_id)
    ui.audit.after = {"name": issued.name, "role": issued.role, "pools": issued.pools}
    return _shown_once(ui, "Key issued", issued, f"A {issued.role} key named {issued.name}.")


@post("/keys/{key_id:uuid}/rotate", include_in_schema=False,
      opt=audited("key.rotate", "key", "key_id"))
async def rotate(request: Request, key_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    form = await checked_form(request, ui)
    _need(ui)
    grace = str(form.get("grace_seconds") or "0")
    if grace not in {g for g, _ in GRACES}:
        raise InvalidInput(f"grace_seconds: {grace!r} is not offered",
                           errors=[{"field": "grace_seconds", "message": "unknown"}])
    issued, ends = await tenancy.rotate_key(ui.conn, ui.store, ui.tenant_id, key_id,
                                            now=ui.clock.now(),
                                            grace=timedelta(seconds=int(grace)), actor=ui.actor)
    return _shown_once(ui, "Key rotated", issued,
                       f"The new key for {issued.name}; the old one works until "
                       f"{ends.strftime('%Y-%m-%d %H:%M:%S')} UTC.")


@post("/keys/{key_id:uuid}/revoke", include_in_schema=False,
      opt=audited("key.revoke", "key", "key_id"))
async def revoke(request: Request, key_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    await checked_form(request, ui)
    _need(ui)
    row = await tenancy.revoke_key(ui.conn, ui.store, ui.tenant_id, key_id, now=ui.clock.now(),
                                   actor=ui.actor)
    ui.session.flash = f"Key {row.name} revoked."
    return redirect("/ui/keys")


ROUTES = [keys_page, issue, rotate, revoke]
