"""Bulk actions by query in the web UI: "act on all N matching" on the runs, jobs and dead-letter
pages. The offer shows the count; the confirmation page (a GET: it changes nothing) names the
filter and the count again and holds the POST form; the operation then runs as the api's tracked
operation (POST /v1/operations, `ostinato.operations.work`) and its page shows progress, polled
like every live region. What a viewer's session may not do is not offered."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery
from markupsafe import Markup

from ostinato.domain import attributes, roles
from ostinato.domain.errors import InvalidInput, NotFound, OstinatoError
from ostinato.operations import filters, work
from ostinato.stores import operations as op_store
from ostinato.stores.operations import OperationRow
from ostinato.wire.api import OperationFilter
from services.api.auditing import audited
from services.api.operations import FAILURES_SHOWN
from services.api.routes import decode_cursor, encode_cursor
from services.api.ui import actions, render
from services.api.ui.params import time_filter as _time_filter
from services.api.ui.params import uuid_filter as _uuid_filter
from services.api.ui.render import url
from services.api.ui.scope import Ui, UiScope, redirect

PROGRESS_SECONDS = 1
# a list's offer counts runs up to this ("1,000+": 50,000 would cost the page 100 ms and
# more); its confirmation page counts them all
OFFER_COUNT = 1000
# kind: (verb, noun, the page it came from)
KINDS = {"cancel": ("Cancel", "run", "/ui/runs"), "retry": ("Re-run", "run", "/ui/runs"),
         "replay": ("Replay", "dead letter", "/ui/dead-letters"),
         "pause": ("Pause", "job", "/ui/jobs")}
FORM_FIELDS = ("states", "job_id", "task", "pool", "since", "until", "error_type",
               "triage_state", "where")


def may_operate(ui: UiScope) -> bool:
    return roles.may(ui.session.role, roles.OPERATE)


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def filter_of(kind: str, values: dict[str, Any]) -> OperationFilter:
    """The operation filter a page's (or a form's) string values describe."""
    if kind not in KINDS:
        raise InvalidInput(f"unknown operation {kind!r}", errors=[{"field": "kind",
                                                                   "message": "unknown"}])
    doc: dict[str, Any] = {}
    for name in FORM_FIELDS:
        value = values.get(name)
        if not isinstance(value, str) or not value.strip():
            continue
        value = value.strip()
        if name == "states":
            doc[name] = [s for s in value.split(",") if s]
        elif name == "where":  # searchable attributes: `customer=acme and amount>100`
            doc[name] = attributes.split_where(value)
        elif name == "job_id":
            doc[name] = _uuid_filter("job", value)
        elif name in ("since", "until"):
            doc[name] = _time_filter(name, value)
        else:
            doc[name] = value
    try:
        return msgspec.convert(doc, OperationFilter)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"filter: {exc}", errors=[{"field": "filter",
                                                      "message": str(exc)}]) from exc


def _form_values(f: OperationFilter) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in filters.given(f).items():
        if name == "where":
            out[name] = attributes.join_where(value)
        else:
            out[name] = ",".join(value) if isinstance(value, list) else str(value)
    return out


def describe(doc: dict[str, Any]) -> str:
    if not doc:
        return "no filter"
    return ", ".join(f"{k} = {','.join(v) if isinstance(v, list) else v}"
                     for k, v in doc.items())


def _offer_macro(name: str, /, *args: Any) -> Markup:
    return Markup(getattr(render.ENV.get_template("bulk_offer.html").module, name)(*args))


async def offer(ui: UiScope, kind: str, values: dict[str, Any], *,
                label: str | None = None) -> Markup:
    """The "act on all N matching" link of a list page, or nothing (a viewer, no match)."""
    if not may_operate(ui):
        return Markup("")
    f = filter_of(kind, values)
    try:
        n = await work.count(ui.conn, tenant_id=ui.tenant_id, kind=kind, f=f,
                             at_most=OFFER_COUNT + 1)
    except InvalidInput:
        return Markup("")  # the page's filter is not one this kind takes (e.g. a final state)
    if n == 0:
        return Markup("")
    verb, noun, _ = KINDS[kind]
    many = f"{OFFER_COUNT:,}+ {noun}s" if n > OFFER_COUNT else _plural(n, noun)
    return _offer_macro("offer", kind, url("/ui/operations/new", kind=kind, **_form_values(f)),
                        label or f"{verb} all {many} matching…")


def offers(parts: list[Any]) -> Markup:
    """The box of a list page's offers, or nothing when none is offered."""
    shown = [p for p in parts if p]
    return _offer_macro("offers", shown) if shown else Markup("")


@get("/operations/new", include_in_schema=False)
async def confirm_page(request: Request, ui: Ui, kind: FromQuery[str] = "") -> Response[str]:
    f = filter_of(kind, dict(request.query_params))
    if not may_operate(ui):
        raise NotFound("a viewer's session starts no operations")
    n = await work.count(ui.conn, tenant_id=ui.tenant_id, kind=kind, f=f)
    verb, noun, back = KINDS[kind]
    return ui.render("operation_confirm.html", section=back.rsplit("/", 1)[-1], verb=verb,
                     count=_plural(n, noun), filter=describe(filters.given(f)), kind=kind,
                     fields=_form_values(f), csrf=ui.csrf, back=back)


@post("/operations", include_in_schema=False, opt=audited("operation.start", "operation"))
async def start(request: Request, ui: Ui) -> Response[Any]:
    form = (await actions.posted(request, ui)).form  # the reason: in the audit row only
    kind = str(form.get("kind") or "")
    f = filter_of(kind, form)
    row = await work.start(ui.conn, tenant_id=ui.tenant_id, kind=kind, f=f, actor=ui.actor,
                           now=ui.clock.now())
    ui.audit.target_id = str(row.id)
    ui.audit.after = {"kind": row.kind, "filter": row.filter, "total": row.total}
    wake = getattr(request.app.state, "wake_operations", None)
    if wake is not None:
        wake()
    verb, noun, _ = KINDS[kind]
    actions.done(ui, f"{verb} of {_plural(row.total, noun)} started.")
    return redirect(f"/ui/operations/{row.id}")


async def _op(ui: UiScope, op_id: uuid.UUID) -> OperationRow:
    row = await op_store.by_id(ui.conn, ui.tenant_id, op_id)
    if row is None:
        raise NotFound(f"no operation {op_id}")
    return row


@get("/operations/{op_id:uuid}", include_in_schema=False)
async def operation_page(request: Request, op_id: FromPath[uuid.UUID], ui: Ui) -> Response[str]:
    row = await _op(ui, op_id)
    verb, noun, _ = KINDS.get(row.kind, (row.kind, "item", ""))
    body = {"row": row, "verb": verb, "plural": lambda n: _plural(n, noun),
            "describe": describe, "csrf": ui.csrf,
            "failures": await op_store.failures_of(ui.conn, row.id, FAILURES_SHOWN),
            "item_page": "/ui/jobs/" if row.kind == "pause" else "/ui/runs/",
            # in the polled part: gone when it ends
            "stop_offered": row.state == "running" and may_operate(ui)}
    if "x-ui-fragment" in request.headers:
        return render.render("operation_body.html", **body)
    return ui.render("operation.html", section="operations", every=PROGRESS_SECONDS, **body)


@post("/operations/{op_id:uuid}/cancel", include_in_schema=False,
      opt=audited("operation.cancel", "operation", "op_id"))
async def stop(request: Request, op_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    await actions.posted(request, ui)  # the reason: in the audit row only
    try:
        row = await work.cancel(ui.conn, tenant_id=ui.tenant_id, op_id=op_id, actor=ui.actor,
                                now=ui.clock.now())
        actions.done(ui, f"Stopped after {row.position:,} of {row.total:,}.")
    except OstinatoError as exc:
        if exc.status == 404:
            raise
        ui.session.flash = exc.detail
    return redirect(f"/ui/operations/{op_id}")


@get("/operations", include_in_schema=False)
async def operations_page(ui: Ui, cursor: FromQuery[str | None] = None) -> Response[str]:
    rows = await op_store.page(ui.conn, ui.tenant_id, state=None, after=decode_cursor(cursor),
                               limit=51)
    more, rows = len(rows) > 50, rows[:50]
    return ui.render("operations.html", section="operations", rows=rows, describe=describe,
                     verb=lambda kind: KINDS.get(kind, (kind,))[0],
                     may_operate=may_operate(ui),
                     next_page=url("/ui/operations", cursor=encode_cursor(
                         rows[-1].created_at, rows[-1].id)) if more else None)


ROUTES = [confirm_page, start, operation_page, stop, operations_page]
