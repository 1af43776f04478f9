"""The audit page: the tenant's control actions, newest first, with the same filters and cursor
pages as GET /v1/audit (the same store read). Operators only, like the API (`READ_AUDIT`).
An action's result links here with `?request_id=`: that request's entries are spelt out above
the table (why, and what changed field by field)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from litestar import Response, get
from litestar.params import FromQuery

from ostinato.domain import roles
from ostinato.domain.errors import Forbidden
from ostinato.stores import audit as audit_store
from services.api.routes import decode_cursor, encode_cursor
from services.api.ui.params import time_filter, uuid_filter
from services.api.ui.render import url
from services.api.ui.scope import Ui

PAGE_SIZE = 50
TARGET_PAGES = {"job": "/ui/jobs/", "run": "/ui/runs/", "dag": "/ui/dags/",
                "dag_run": "/ui/dag-runs/", "operation": "/ui/operations/"}


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def changed_fields(before: Any, after: Any) -> list[tuple[str, str | None, str | None]]:
    """What an action changed, field by field (name, before, after as JSON), the fields that
    differ only; a before or after that is not an object is one row named "value"."""
    if isinstance(before, dict | None) and isinstance(after, dict | None) \
            and (before or after):
        old, new = before or {}, after or {}
        return [(k, _json(old.get(k)), _json(new.get(k))) for k in sorted({*old, *new})
                if old.get(k) != new.get(k)]
    if before == after:
        return []
    return [("value", _json(before), _json(after))]


@dataclass(frozen=True, slots=True)
class Entry:
    """One audit row as the page shows it: the row, its before and after as JSON text, and
    (for the entries of one request) the fields it changed."""

    row: audit_store.AuditRow
    before: str | None
    after: str | None
    fields: list[tuple[str, str | None, str | None]]


def entry(row: audit_store.AuditRow) -> Entry:
    return Entry(row, _json(row.before), _json(row.after), changed_fields(row.before, row.after))


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
        action=action or None, key_id=uuid_filter("key id", key_id),
        target_kind=target_kind or None, target_id=(target_id or "").strip() or None,
        request_id=(request_id or "").strip() or None, since=time_filter("from", since),
        until=time_filter("until", until))
    rows = await audit_store.page(ui.conn, ui.tenant_id, where, after=decode_cursor(cursor),
                                  limit=PAGE_SIZE + 1)
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    query = {"action": action, "key_id": key_id, "target_kind": target_kind,
             "target_id": target_id, "request_id": request_id, "since": since, "until": until}
    pager = [(url("/ui/audit", **query), "first page")] if cursor else []
    if more:
        pager.append((url("/ui/audit", **query, cursor=encode_cursor(
            rows[-1].recorded_at, rows[-1].id)), "next page →"))
    lines = [entry(r) for r in rows]
    return ui.render("audit.html", section="audit", lines=lines, pager=pager, f=query,
                     entries=lines if request_id else [], pages=TARGET_PAGES,
                     filtered=any(query.values()) or bool(cursor))


ROUTES = [audit_page]
