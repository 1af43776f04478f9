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
from services.api.ui import html
from services.api.ui.html import Safe, fmt, join, when
from services.api.ui.scope import AdminScope, AdminUi, admin_scope, checked_form, redirect

PAGE = 50
ADMIN = {"ui": Provide(admin_scope)}  # these pages' scope: the session's key, no tenant needed
_NONE = Safe('<span class="muted">—</span>')


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


def _limit_text(rows: list[limits.LimitRow], scope: str) -> Safe:
    row = next((r for r in rows if (r.scope, r.name) == (scope, "")), None)
    if row is None:
        return Safe('<span class="muted">none</span>')
    parts = []
    if row.max_concurrency is not None:
        parts.append(f"{row.max_concurrency} at a time")
    if row.rate_per_second is not None:
        parts.append(f"{row.rate_per_second:g}/s" + (
            f" (burst {row.burst:g})" if row.burst is not None else ""))
    return fmt("{t}", t=", ".join(parts)) if parts else Safe('<span class="muted">none</span>')


def _act_button(ui: AdminScope, tenant_id: uuid.UUID) -> Safe:
    if ui.caller.tenant_id is not None:  # a tenant's own admin-role key acts for its tenant only
        return Safe("")
    return html.post_button(f"/ui/tenants/{tenant_id}/act", "Act for", ui.csrf)


@get("/tenants", include_in_schema=False, dependencies=ADMIN)
async def tenants_page(ui: AdminUi, cursor: FromQuery[str | None] = None) -> Response[str]:
    ui.need_admin()
    rows = await tenant_store.page(ui.conn, decode_cursor(cursor), PAGE + 1)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    table_rows = []
    for r in rows:
        of = await limits.of_tenant(ui.conn, r.id)
        table_rows.append([
            html.link(f"/ui/tenants/{r.id}", r.name), fmt("<code>{i}</code>", i=r.id),
            _number(r.weight), _limit_text(of, "tenant"), _limit_text(of, "api"),
            when(r.created_at), _act_button(ui, r.id)])
    pager = (fmt('<p class="pager"><a href="{href}">Older tenants →</a></p>',
                 href=html.url("/ui/tenants", cursor=encode_cursor(rows[-1].created_at,
                                                                    rows[-1].id)))
             if more else Safe(""))
    create = fmt(
        '<form method="post" action="/ui/tenants" class="filters create-tenant">{csrf}'
        '<label>name <input name="name" id="tenant-name" required maxlength="100" size="18" '
        'placeholder="acme"></label>'
        '<label>weight <input name="weight" type="number" min="1" max="1000" value="1" '
        'size="5"></label><button type="submit">Create tenant</button></form>'
        '<p class="muted">Lower-case letters, digits and dashes. The new tenant\'s operator key '
        'is shown once, on the page that answers the form.</p>',
        csrf=html.hidden("_csrf", ui.csrf))
    body = join([
        fmt("<section><h2>Tenants</h2>{t}{p}<p class=\"muted\">Newest first. The weight shares "
            "dispatch between tenants; the limits cap a tenant's runs at a time and starts per "
            "second, the API rate its requests per second per key. <b>Act for</b> shows that "
            "tenant's pages, with every action audited as the admin's.</p></section>",
            t=html.table(["name", "id", "weight", "runs limit", "API rate", "created", ""],
                         table_rows, "No tenants yet.", "tenants"), p=pager),
        fmt("<section><h2>Create a tenant</h2>{f}</section>", f=create),
    ])
    return ui.page("Tenants", body, "tenants")


@post("/tenants", include_in_schema=False, dependencies=ADMIN,
      opt=audited("tenant.create", "tenant"))
async def create(request: Request, ui: AdminUi) -> Response[Any]:
    form = await checked_form(request, ui)
    ui.need_admin()
    data = _convert("tenant", {"name": (form.get("name") or "").strip(),
                               **_fields(form, ("weight",))}, TenantRequest)
    tenant_id, key = await tenancy.create_tenant(ui.conn, ui.store, data.name, actor="admin",
                                                 weight=data.weight)
    ui.audit.tenant_id, ui.audit.target_id = tenant_id, str(tenant_id)
    ui.audit.after = {"name": data.name, "weight": data.weight}
    kafka = await kafka_access.grant_at_creation(ui.settings, tenant_id)
    kafka_part = Safe("")
    if kafka is not None:
        kafka_part = fmt("<h2>Kafka submission</h2><p>Its producers' password, shown once too:"
                         "</p>{kv}", kv=html.kv([
                             ("bootstrap servers", kafka.bootstrap_servers),
                             ("username", kafka.username),
                             ("password", fmt('<code id="new-kafka-password">{p}</code>',
                                              p=kafka.password)),
                             ("topic", kafka.topic), ("rejects topic", kafka.rejects_topic)]))
    body = fmt('<section class="issued"><p>Tenant {name} is created, with this operator API key. '
               'Copy it now: it is shown <b>once</b> and only its hash is kept.</p>'
               '<pre id="new-key">{key}</pre>{kv}{kafka}'
               '<p><a href="/ui/tenants/{id}">Its weight and limits</a> · '
               '<a href="/ui/tenants">Back to the tenants</a></p></section>',
               name=data.name, key=key, id=tenant_id, kafka=kafka_part, kv=html.kv([
                   ("name", data.name), ("id", fmt("<code>{i}</code>", i=tenant_id)),
                   ("weight", data.weight)]))
    return ui.page("Tenant created", body, "tenants")


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
    mine = next((r for r in rows if (r.scope, r.name) == ("tenant", "")), None)
    api = next((r for r in rows if (r.scope, r.name) == ("api", "")), None)

    def field(name: str, label: str, value: Any, lo: str, step: str = "any") -> Safe:
        return fmt('<label>{label} <input name="{name}" type="number" min="{lo}" step="{step}" '
                   'value="{value}" size="7"></label>', name=name, label=label,
                   value=_number(value), lo=lo, step=step)

    limits_form = fmt(
        '<form method="post" action="/ui/tenants/{id}/limits" class="filters tenant-limits">'
        '{csrf}{w}{c}{r}{b}<button type="submit">Set weight and limits</button></form>'
        '<p class="muted">A blank field: no limit of that kind (as PUT /v1/tenants/{{id}}/limits '
        'with the field left out). The form replaces the tenant\'s limit as a whole.</p>',
        id=tenant_id, csrf=html.hidden("_csrf", ui.csrf),
        w=field("weight", "weight", tenant.weight, "0"),
        c=field("max_concurrency", "runs at a time", mine.max_concurrency if mine else None,
                "0", "1"),
        r=field("rate_per_second", "starts per second", mine.rate_per_second if mine else None,
                "0"),
        b=field("burst", "burst", mine.burst if mine else None, "1"))
    api_form = fmt(
        '<form method="post" action="/ui/tenants/{id}/limits/api" class="filters tenant-api">'
        '{csrf}{r}{b}<button type="submit">Set API rate</button></form>'
        '<p class="muted">Requests per second per API key of the tenant at each api process '
        '(0: not limited); the burst defaults to the rate. Takes effect within 10 s.</p>',
        id=tenant_id, csrf=html.hidden("_csrf", ui.csrf),
        r=field("rate_per_second", "requests per second", api.rate_per_second if api else 0,
                "0"),
        b=field("burst", "burst", api.burst if api else None, "1"))
    kept = await retention.policy_of(ui.conn, tenant_id)
    retention_form = fmt(
        '<form method="post" action="/ui/tenants/{id}/retention" class="filters '
        'tenant-retention">{csrf}<label>keep <input name="keep" value="{keep}" size="8" '
        'required></label><label><input type="checkbox" name="archive" value="1"{checked}> '
        'archive first</label><label>reason <input name="reason" size="30"></label>'
        '<button type="submit">Set retention</button></form>'
        '<p class="muted">{now}. How long a finished run stays in the hot database after it '
        'ended: seconds or 30d, 12h, 2w (1 hour to 10 years), and whether it is written to '
        'object storage first (as PUT /v1/tenants/{{id}}/retention; docs/RETENTION.md).</p>',
        id=tenant_id, csrf=html.hidden("_csrf", ui.csrf),
        keep=format_keep(kept.policy.keep_seconds),
        checked=Safe(" checked") if kept.policy.archive else Safe(""),
        now="The default (never set)" if kept.row is None else
        f"Set by {kept.row.updated_by} at {kept.row.updated_at:%Y-%m-%d %H:%M:%SZ}")
    limit_rows = [[r.scope, r.name or _NONE,
                   _NONE if r.max_concurrency is None else r.max_concurrency,
                   _NONE if r.rate_per_second is None else _number(r.rate_per_second),
                   _NONE if r.burst is None else _number(r.burst), when(r.updated_at)]
                  for r in rows]
    body = join([
        fmt("<section>{kv}{act}</section>", kv=html.kv([
            ("name", tenant.name), ("id", fmt("<code>{i}</code>", i=tenant_id)),
            ("weight", _number(tenant.weight))]), act=_act_button(ui, tenant_id)),
        fmt("<section><h2>Weight and limits</h2>{f}</section>", f=limits_form),
        fmt("<section><h2>API rate</h2>{f}</section>", f=api_form),
        fmt("<section><h2>Retention</h2>{f}</section>", f=retention_form),
        fmt("<section><h2>Every limit of the tenant</h2>{t}</section>", t=html.table(
            ["scope", "name", "at a time", "per second", "burst", "set"], limit_rows,
            "No limits.", "limits")),
        Safe('<p><a href="/ui/tenants">Back to the tenants</a></p>'),
    ])
    return ui.page(f"Tenant {tenant.name}", body, "tenants")


@post("/tenants/{tenant_id:uuid}/limits", include_in_schema=False, dependencies=ADMIN,
      opt=audited("limit.set", "limit"))
async def set_limits(request: Request, ui: AdminUi,
                     tenant_id: FromPath[uuid.UUID]) -> Response[Any]:
    form = await checked_form(request, ui)
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
    form = await checked_form(request, ui)
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
    form = await checked_form(request, ui)
    ui.need_admin()
    ui.audit.tenant_id = tenant_id  # as the API's route: the row is the tenant's
    before = await retention.policy_of(ui.conn, tenant_id)
    shown, changed = await retention.set_retention(
        ui.conn, ui.store, tenant_id=tenant_id, keep=str(form.get("keep") or ""),
        archive=form.get("archive") == "1", actor="admin", reason=form.get("reason"),
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
