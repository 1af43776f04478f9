"""The admin's tenants page: every tenant with its weight and limits (cursor pages, as
GET /v1/tenants), creating a tenant (its API key shown once, in the answer to the form), setting
a tenant's weight and limits, its API request rate and its retention (as PUT
/v1/tenants/{id}/limits, /limits/api and /retention, through the same functions and with the
same audit rows), and choosing a tenant to
act for: the session then shows that tenant's pages as the API answers the admin key with
X-Ostinato-Tenant. Only for a session whose key may administer (the admin key): any other gets a
403, and a form from it leaves a refused row in the audit trail."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.di import Provide
from litestar.params import FromPath, FromQuery

from ostinato import tenancy
from ostinato.domain.errors import Forbidden, InvalidInput, NotFound
from ostinato.domain.retention import format_keep
from ostinato.runs import retention
from ostinato.stores import limits
from ostinato.stores import tenants as tenant_store
from ostinato.wire.api import ApiRateRequest, LimitRequest, TenantRequest
from services.api import kafka_access
from services.api.auditing import audited
from services.api.capacity import record_limit
from services.api.routes import decode_cursor, encode_cursor
from services.api.ui import actions
from services.api.ui.render import url
from services.api.ui.scope import AdminScope, AdminUi, admin_scope, checked_form, redirect

PAGE = 50
ADMIN = {"ui": Provide(admin_scope)}  # these pages' scope: the session's key, no tenant needed


def _number(value: Any) -> str:
    return "" if value is None else f"{value:g}"


def _fields(form: dict[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    """The form's non-blank fields among `names` (a blank one: no limit of that kind)."""
    return {n: v.strip() for n in names if isinstance(v := form.get(n), str) and v.strip()}


def _convert(what: str, values: dict[str, Any], kind: type[Any]) -> Any:
    """The form's values as the API's request body (checked like the API checks it)."""
    try:
        return msgspec.convert(values, kind, strict=False)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"{what}: {exc}", errors=[{"field": what,
                                                      "message": str(exc)}]) from exc


def _limit_text(rows: list[limits.LimitRow], scope: str) -> str:
    """A tenant's own limit of `scope` in words ("7 at a time, 20/s (burst 40)"), "" for none."""
    row = next((r for r in rows if (r.scope, r.name) == (scope, "")), None)
    if row is None:
        return ""
    parts = []
    if row.max_concurrency is not None:
        parts.append(f"{row.max_concurrency} at a time")
    if row.rate_per_second is not None:
        parts.append(f"{row.rate_per_second:g}/s" + (
            f" (burst {row.burst:g})" if row.burst is not None else ""))
    return ", ".join(parts)


def _may_act(ui: AdminScope) -> bool:
    """A tenant's own admin-role key acts for its tenant only: offered no Act for."""
    return ui.caller.tenant_id is None


@get("/tenants", include_in_schema=False, dependencies=ADMIN)
async def tenants_page(ui: AdminUi, cursor: FromQuery[str | None] = None) -> Response[str]:
    ui.need_admin()
    rows = await tenant_store.page(ui.conn, decode_cursor(cursor), PAGE + 1)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    lines = []
    for r in rows:
        of = await limits.of_tenant(ui.conn, r.id)
        lines.append({"row": r, "runs_limit": _limit_text(of, "tenant"),
                      "api_rate": _limit_text(of, "api")})
    return ui.render("tenants.html", section="tenants", lines=lines, number=_number,
                     csrf=ui.csrf, may_act=_may_act(ui),
                     next_page=url("/ui/tenants", cursor=encode_cursor(
                         rows[-1].created_at, rows[-1].id)) if more else None)


@post("/tenants", include_in_schema=False, dependencies=ADMIN,
      opt=audited("tenant.create", "tenant"))
async def create(request: Request, ui: AdminUi) -> Response[Any]:
    form = (await actions.posted(request, ui)).form  # the reason: in the audit row only
    ui.need_admin()
    data = _convert("tenant", {"name": (form.get("name") or "").strip(),
                               **_fields(form, ("weight",))}, TenantRequest)
    tenant_id, key = await tenancy.create_tenant(ui.conn, ui.store, data.name, actor="admin",
                                                 weight=data.weight)
    ui.audit.tenant_id, ui.audit.target_id = tenant_id, str(tenant_id)
    ui.audit.after = {"name": data.name, "weight": data.weight}
    kafka = await kafka_access.grant_at_creation(ui.settings, tenant_id)
    return ui.render("tenant_created.html", section="tenants", name=data.name, key=key,
                     tenant_id=tenant_id, weight=data.weight, kafka=kafka)


async def _tenant(ui: AdminScope, tenant_id: uuid.UUID) -> tenant_store.TenantWeight:
    found = next((t for t in await tenant_store.weights(ui.conn) if t.id == tenant_id), None)
    if found is None:
        raise NotFound(f"no tenant {tenant_id}")
    return found


@get("/tenants/{tenant_id:uuid}", include_in_schema=False, dependencies=ADMIN)
async def tenant_page(ui: AdminUi, tenant_id: FromPath[uuid.UUID]) -> Response[str]:
    ui.need_admin()
    tenant = await _tenant(ui, tenant_id)
    rows = await limits.of_tenant(ui.conn, tenant_id)
    kept = await retention.policy_of(ui.conn, tenant_id)
    return ui.render(
        "tenant.html", section="tenants", tenant=tenant, rows=rows, number=_number,
        csrf=ui.csrf, may_act=_may_act(ui),
        mine=next((r for r in rows if (r.scope, r.name) == ("tenant", "")), None),
        api=next((r for r in rows if (r.scope, r.name) == ("api", "")), None),
        keep=format_keep(kept.policy.keep_seconds), archive=kept.policy.archive,
        retention_now="The default (never set)" if kept.row is None else
        f"Set by {kept.row.updated_by} at {kept.row.updated_at:%Y-%m-%d %H:%M:%SZ}")


@post("/tenants/{tenant_id:uuid}/limits", include_in_schema=False, dependencies=ADMIN,
      opt=audited("limit.set", "limit"))
async def set_limits(request: Request, ui: AdminUi,
                     tenant_id: FromPath[uuid.UUID]) -> Response[Any]:
    form = (await actions.posted(request, ui)).form  # the reason: in the audit row only
    ui.need_admin()
    ui.audit.tenant_id = tenant_id  # as the API's route: the row is the tenant's
    data = _convert("limits", _fields(form, ("weight", "max_concurrency", "rate_per_second",
                                             "burst")), LimitRequest)
    await record_limit(ui.conn, ui.store, tenant_id, "tenant", "", data, "admin", ui.audit)
    ui.session.flash = "Weight and limits set."
    return redirect(f"/ui/tenants/{tenant_id}")


@post("/tenants/{tenant_id:uuid}/limits/api", include_in_schema=False, dependencies=ADMIN,
      opt=audited("limit.set", "limit"))
async def set_api_rate(request: Request, ui: AdminUi,
                       tenant_id: FromPath[uuid.UUID]) -> Response[Any]:
    form = (await actions.posted(request, ui)).form  # the reason: in the audit row only
    ui.need_admin()
    ui.audit.tenant_id = tenant_id
    data = _convert("api rate", _fields(form, ("rate_per_second", "burst")), ApiRateRequest)
    limit = LimitRequest(rate_per_second=data.rate_per_second, burst=data.burst)
    await record_limit(ui.conn, ui.store, tenant_id, "api", "", limit, "admin", ui.audit)
    ui.session.flash = "API rate set."
    return redirect(f"/ui/tenants/{tenant_id}")


@post("/tenants/{tenant_id:uuid}/retention", include_in_schema=False, dependencies=ADMIN,
      opt=audited("retention.set", "tenant", "tenant_id"))
async def set_retention(request: Request, ui: AdminUi,
                        tenant_id: FromPath[uuid.UUID]) -> Response[Any]:
    sent = await actions.posted(request, ui)  # the reason: the command's and the audit row's
    form = sent.form
    ui.need_admin()
    ui.audit.tenant_id = tenant_id  # as the API's route: the row is the tenant's
    before = await retention.policy_of(ui.conn, tenant_id)
    shown, changed = await retention.set_retention(
        ui.conn, ui.store, tenant_id=tenant_id, keep=str(form.get("keep") or ""),
        archive=form.get("archive") == "1", actor="admin", reason=sent.reason,
        floor=request.app.state.settings.retention_floor_seconds)
    ui.audit.before, ui.audit.after = before.doc(), shown.doc()
    ui.session.flash = "Retention set." if changed else "Retention unchanged."
    return redirect(f"/ui/tenants/{tenant_id}")


@post("/tenants/{tenant_id:uuid}/act", include_in_schema=False, dependencies=ADMIN,
      opt=audited("tenant.act_for", "tenant", "tenant_id"))
async def act_for(request: Request, ui: AdminUi, tenant_id: FromPath[uuid.UUID]) -> Response[Any]:
    """From now on the session shows this tenant's pages (the API's X-Ostinato-Tenant); the
    tenant's audit trail shows when the admin began (and ended) acting for it."""
    await checked_form(request, ui)
    ui.need_admin()
    if ui.caller.tenant_id is not None:
        raise Forbidden("a tenant's key acts for its own tenant only")
    tenant = await _tenant(ui, tenant_id)
    ui.audit.tenant_id = tenant.id
    ui.session.acting_for = tenant.id
    ui.session.flash = f"Acting for tenant {tenant.name}."
    return redirect("/ui/runs")


@post("/tenants/stop-acting", include_in_schema=False, dependencies=ADMIN,
      opt=audited("tenant.act_for_end", "tenant"))
async def stop_acting(request: Request, ui: AdminUi) -> Response[Any]:
    await checked_form(request, ui)
    if ui.session.acting_for is not None:
        ui.audit.tenant_id, ui.audit.target_id = ui.session.acting_for, str(ui.session.acting_for)
    ui.session.acting_for = None
    return redirect("/ui/tenants")


ROUTES = [tenants_page, create, tenant_page, set_limits, set_api_rate, set_retention, act_for,
          stop_acting]
