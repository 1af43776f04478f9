"""Task and resource limits from the web UI (issue 41 item 3): the tenant's limits, and forms
that set a job type's concurrency limit or a resource's rate. A form is reviewed first (the
limit before and after, nothing changed), then applied through the same command and audit row
as PUT /v1/limits/tasks/{task} and /v1/limits/resources/{name}, the reason given on the review
kept in that row (`services.api.ui.actions`)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath

from ostinato.domain import roles
from ostinato.domain.errors import NotFound
from ostinato.stores import limits
from ostinato.wire.api import LimitRequest
from services.api.auditing import audited
from services.api.capacity import record_limit
from services.api.ui import actions
from services.api.ui.scope import Ui, UiScope, checked_form, redirect

NAME = re.compile(r"^[A-Za-z0-9][\w.:-]{0,199}$")  # the API's LimitName
FIELDS = {"task": ("max_concurrency",), "resource": ("rate_per_second", "burst")}
LABELS = {"max_concurrency": "at most, at a time", "rate_per_second": "starts a second",
          "burst": "burst"}


def _read(scope: str, form: dict[str, Any]) -> tuple[str, LimitRequest | None,
                                                      list[dict[str, str]]]:
    """The limit a form asks for, or its problems (field, message) as the API words them."""
    name = str(form.get("name") or "").strip()
    errors = [] if NAME.match(name) else [{"field": "name", "message": (
        "a name of letters, digits and . _ : - (at most 200), starting with a letter or digit")}]
    values: dict[str, Any] = {}
    for field in FIELDS[scope]:
        text = str(form.get(field) or "").strip()
        if not text:
            continue  # an empty field: no limit of that kind
        try:
            values[field] = int(text) if field == "max_concurrency" else float(text)
        except ValueError:
            errors.append({"field": field, "message": f"a number, not {text!r}"})
    if not values and not errors:
        errors.append({"field": FIELDS[scope][0], "message": "give a value to limit by"})
    try:
        request = msgspec.convert(values, LimitRequest)
    except msgspec.ValidationError as exc:
        return name, None, [*errors, {"field": "limit", "message": str(exc)}]
    return name, (request if not errors else None), errors


def _words(scope: str, values: Any) -> str:
    if values is None:
        return "no limit"
    parts = [f"{LABELS[f]} {getattr(values, f)}" for f in FIELDS[scope]
             if getattr(values, f, None) is not None]
    return ", ".join(parts) or "no limit"


async def _page(ui: UiScope, *, status: int = 200, **context: Any) -> Response[str]:
    rows = await limits.of_tenant(ui.conn, ui.tenant_id)
    return ui.render("limits.html", section="pools", status=status,
                     rows=[r for r in rows if r.scope in FIELDS], csrf=ui.csrf,
                     allowed=roles.may(ui.session.role, roles.OPERATE),
                     reason_max=actions.MAX_REASON_CHARS,
                     **{"errors": [], "form": {}, "scope": "", "review": None, **context})


@get("/limits", include_in_schema=False)
async def limits_page(ui: Ui) -> Response[str]:
    return await _page(ui)


@post("/limits/{kind:str}/review", include_in_schema=False, status_code=200)
async def review(request: Request, kind: FromPath[str], ui: Ui) -> Response[str]:
    """What applying the form would change (nothing changed yet)."""
    scope = kind
    if scope not in FIELDS:
        raise NotFound(f"no limit kind {scope!r}: task or resource")
    form = await checked_form(request, ui)
    name, asked, errors = _read(scope, form)
    if asked is None:
        return await _page(ui, status=422, errors=errors, form=form, scope=scope)
    now = next((r for r in await limits.of_tenant(ui.conn, ui.tenant_id)
                if (r.scope, r.name) == (scope, name)), None)
    return await _page(ui, form=form, scope=scope, review={
        "what": f"{'job type' if scope == 'task' else 'resource'} {name}",
        "before": _words(scope, now), "after": _words(scope, asked)})


@post("/limits/{kind:str}", include_in_schema=False, status_code=303,
      opt=audited("limit.set", "limit"))
async def apply(request: Request, kind: FromPath[str], ui: Ui) -> Response[Any]:
    """Set the reviewed limit (the same command as the API's PUT)."""
    scope = kind
    if scope not in FIELDS:
        raise NotFound(f"no limit kind {scope!r}: task or resource")
    form = (await actions.posted(request, ui)).form  # the reason: in the audit row only
    name, asked, errors = _read(scope, form)
    if asked is None:
        ui.audit.status = 422
        ui.audit.detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return await _page(ui, status=422, errors=errors, form=form, scope=scope)
    await record_limit(ui.conn, ui.store, ui.tenant_id, scope, name, asked, ui.actor, ui.audit)
    actions.done(ui, f"Limit set on {scope} {name}: {_words(scope, asked)}.")
    return redirect("/ui/limits")


ROUTES = [limits_page, review, apply]
