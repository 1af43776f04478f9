"""The tenant and its API keys (for a session whose key may manage keys: an operator's): the
keys with their role, pools and last use; issue, rotate (with a grace period) and revoke, as
/v1/keys does. A new key's secret is shown once, in the answer to the form that made it (never
kept in the session, never shown again)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
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
from services.api.ui import actions
from services.api.ui.scope import Ui, UiScope, redirect

ROLES = [(r, r) for r in roles.TENANT_ROLES]
GRACES = [("0", "now"), ("3600", "in 1 hour"), ("86400", "in 24 hours"),
          ("604800", "in 7 days")]


def may_manage(ui: UiScope) -> bool:
    return roles.may(ui.session.role, roles.MANAGE_KEYS)


def _need(ui: UiScope) -> None:
    if not may_manage(ui):
        raise Forbidden(roles.refusal(ui.session.role, roles.MANAGE_KEYS))


@dataclass(frozen=True, slots=True)
class KeyLine:
    """One row of the keys table: the key, its role by its canonical name, its state (active,
    rotating: revoked at a time still to come, revoked) and the badge that colours it."""

    row: api_keys.KeyRow
    role: str
    state: str
    last_operator: bool  # the tenant's last operator key: the API refuses its revoke (409)

    @property
    def badge(self) -> str:
        return {"active": "active", "rotating": "paused", "revoked": "cancelled"}[self.state]


@get("/keys", include_in_schema=False)
async def keys_page(ui: Ui, role: FromQuery[str | None] = None,
                    show: FromQuery[str | None] = None) -> Response[str]:
    _need(ui)
    now = ui.clock.now()
    rows = await api_keys.list_keys(ui.conn, ui.tenant_id)
    operators = [r for r in rows if roles.canonical(r.role) == roles.OPERATOR
                 and r.revoked_at is None]
    lines = []
    for r in rows:
        active = r.revoked_at is None or r.revoked_at > now
        if (role and roles.canonical(r.role) != role) or (show != "all" and not active):
            continue
        state = "active" if r.revoked_at is None else "rotating" if active else "revoked"
        lines.append(KeyLine(r, roles.canonical(r.role), state, operators == [r]))
    return ui.render("keys.html", section="keys", lines=lines, roles=ROLES, graces=GRACES,
                     f={"role": role, "show": show}, csrf=ui.csrf, tenant=ui.tenant,
                     tenant_id=ui.tenant_id, actor=ui.actor)


def _shown_once(ui: UiScope, title: str, issued: tenancy.IssuedKey, note: str) -> Response[str]:
    return ui.render("key_issued.html", section="keys", title=title, note=note, issued=issued)


@post("/keys", include_in_schema=False, opt=audited("key.issue", "key"))
async def issue(request: Request, ui: Ui) -> Response[Any]:
    form = (await actions.posted(request, ui)).form  # the reason: in the audit row only
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
    actions.done(ui, f"Key {issued.name} issued.")  # shown on the page with its secret
    return _shown_once(ui, "Key issued", issued, f"A {issued.role} key named {issued.name}.")


@post("/keys/{key_id:uuid}/rotate", include_in_schema=False,
      opt=audited("key.rotate", "key", "key_id"))
async def rotate(request: Request, key_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    form = (await actions.posted(request, ui)).form  # the reason: in the audit row only
    _need(ui)
    grace = str(form.get("grace_seconds") or "0")
    if grace not in {g for g, _ in GRACES}:
        raise InvalidInput(f"grace_seconds: {grace!r} is not offered",
                           errors=[{"field": "grace_seconds", "message": "unknown"}])
    issued, ends = await tenancy.rotate_key(ui.conn, ui.store, ui.tenant_id, key_id,
                                            now=ui.clock.now(),
                                            grace=timedelta(seconds=int(grace)), actor=ui.actor)
    actions.done(ui, f"Key {issued.name} rotated.")
    return _shown_once(ui, "Key rotated", issued,
                       f"The new key for {issued.name}; the old one works until "
                       f"{ends.strftime('%Y-%m-%d %H:%M:%S')} UTC.")


@post("/keys/{key_id:uuid}/revoke", include_in_schema=False,
      opt=audited("key.revoke", "key", "key_id"))
async def revoke(request: Request, key_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    sent = await actions.posted(request, ui)
    _need(ui)
    row = await tenancy.revoke_key(ui.conn, ui.store, ui.tenant_id, key_id, now=ui.clock.now(),
                                   actor=ui.actor, reason=sent.reason or "")
    actions.done(ui, f"Key {row.name} revoked: a request made with it is refused.")
    return redirect("/ui/keys")


ROUTES = [keys_page, issue, rotate, revoke]
