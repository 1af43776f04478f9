"""The audit page: the tenant's control actions, newest first, with the same filters and cursor
pages as GET /v1/audit (the same store read). Operators only, like the API (`READ_AUDIT`)."""

from __future__ import annotations

from typing import Any

from litestar import Response, get
from litestar.params import FromQuery

from ostinato.domain import roles
from ostinato.domain.errors import Forbidden
from ostinato.stores import audit as audit_store
from services.api.routes import decode_cursor, encode_cursor
from services.api.ui import html
from services.api.ui.html import badge, fmt, ident, join, link, when
from services.api.ui.runs import _time_filter, _uuid_filter
from services.api.ui.scope import Ui

PAGE_SIZE = 50
TARGET_PAGES = {"job": "/ui/jobs/{}", "run": "/ui/runs/{}"}


def _target(row: audit_store.AuditRow) -> Any:
    if not row.target_id:
        return row.target_kind
    page = TARGET_PAGES.get(row.target_kind)
    return join([row.target_kind, " ",
                 ident(row.target_id, page.format(row.target_id) if page else None)])


def _change(row: audit_store.AuditRow) -> Any:
    if row.before is None and row.after is None:
        return row.detail
    return fmt('<details><summary>{what}</summary><div class="change">{b}{a}</div></details>',
               what=row.detail or "before / after", b=html.pre_json(row.before),
               a=html.pre_json(row.after))


def audit_rows(rows: list[audit_store.AuditRow]) -> list[list[Any]]:
    return [[when(r.recorded_at), r.action, _target(r),
             fmt("{b} {s}", b=badge(r.outcome), s=r.status),
             fmt('{actor}<br><span class="muted">{role} · key {key}</span>', actor=r.actor,
                 role=r.role, key=ident(r.key_id) if r.key_id else "admin"),
             fmt("<code>{rid}</code>", rid=r.request_id), _change(r)] for r in rows]


@get("/audit", include_in_schema=False)
async def audit_page(ui: Ui, action: FromQuery[str | None] = None,
                     key_id: FromQuery[str | None] = None,
                     target_kind: FromQuery[str | None] = None,
                     target_id: FromQuery[str | None] = None,
                     request_id: FromQuery[str | None] = None,
                     since: FromQuery[str | None] = None, until: FromQuery[str | None] = None,
                     cursor: FromQuery[str | None] = None) -> Response[str]:
    if not roles.may(ui.session.role, roles.READ_AUDIT):
        raise Forbidden(roles.refusal(ui.session.role, roles.READ_AUDIT))
    where = audit_store.Filter(
        action=action or None, key_id=_uuid_filter("key id", key_id),
        target_kind=target_kind or None, target_id=(target_id or "").strip() or None,
        request_id=(request_id or "").strip() or None, since=_time_filter("from", since),
        until=_time_filter("until", until))
    rows = await audit_store.page(ui.conn, ui.tenant_id, where, after=decode_cursor(cursor),
                                  limit=PAGE_SIZE + 1)
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    query = {"action": action, "key_id": key_id, "target_kind": target_kind,
             "target_id": target_id, "request_id": request_id, "since": since, "until": until}
    pager = [link(html.url("/ui/audit", **query), "first page")] if cursor else []
    if more:
        pager.append(link(html.url("/ui/audit", **query, cursor=encode_cursor(
            rows[-1].recorded_at, rows[-1].id)), "next page →"))
    form = fmt(
        '<form method="get" action="/ui/audit" class="filters">'
        '<label>action <input name="action" value="{action}" size="14" '
        'placeholder="job.pause"></label>'
        '<label>key id <input name="key_id" value="{key_id}" size="12"></label>'
        '<label>target kind <input name="target_kind" value="{target_kind}" size="8"></label>'
        '<label>target id <input name="target_id" value="{target_id}" size="12"></label>'
        '<label>request id <input name="request_id" value="{request_id}" size="12"></label>'
        '<label>from (UTC) <input type="datetime-local" step="1" name="since" value="{since}">'
        '</label><label>until (UTC) <input type="datetime-local" step="1" name="until" '
        'value="{until}"></label><button type="submit">Filter</button> '
        '<a href="/ui/audit">clear</a></form>', **{k: v or "" for k, v in query.items()})
    headers = ["at", "action", "target", "outcome", "who", "request", "change"]
    content = fmt('{form}{table}<p class="pager">{pager}</p>', form=form,
                  table=html.table(headers, audit_rows(rows), "No control actions match.",
                                   "audit"),
                  pager=join(pager, " · "))
    return ui.page("Audit trail", content, "audit")


ROUTES = [audit_page]
