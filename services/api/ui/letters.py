"""The dead-letter pages: the list (counts by error type and triage state, filters) and one
dead letter (its error, attempts, payload) with a replay form that may carry an edited payload,
as POST /v1/dead-letters/{id}/replay does: a new linked run, audited, the payload checked."""

from __future__ import annotations

import json
import uuid
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery

from ostinato import runs
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.eventlog.store import get_blobs, read_stream
from ostinato.stores import dead_letters as letters
from ostinato.stores import jobs as job_store
from services.api.auditing import audited
from services.api.routes import decode_cursor, encode_cursor
from services.api.ui import actions, operations
from services.api.ui.render import url
from services.api.ui.runs import attempt_rows
from services.api.ui.scope import Ui, redirect

PAGE_SIZE = 50
TRIAGE = [("", "any triage state"), ("new", "new"), ("acknowledged", "acknowledged"),
          ("fixed", "fixed"), ("wont_fix", "won't fix")]


@get("/dead-letters", include_in_schema=False)
async def letters_page(ui: Ui, error_type: FromQuery[str | None] = None,
                       triage_state: FromQuery[str | None] = None,
                       cursor: FromQuery[str | None] = None) -> Response[str]:
    where = letters.Filter(error_type=error_type or None, triage_state=triage_state or None)
    rows = await letters.page(ui.conn, ui.tenant_id, where, after=decode_cursor(cursor),
                              limit=PAGE_SIZE + 1)
    counts = await letters.counts(ui.conn, ui.tenant_id, where)
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    by_type: dict[str, int] = {}
    for c in counts:
        by_type[c.error_type or "none"] = by_type.get(c.error_type or "none", 0) + c.n
    next_page = url("/ui/dead-letters", error_type=error_type, triage_state=triage_state,
                    cursor=encode_cursor(rows[-1].dead_lettered_at, rows[-1].run_id)) \
        if more else None
    bulk = operations.offers([await operations.offer(
        ui, "replay", {"error_type": error_type, "triage_state": triage_state})])
    return ui.render("dead_letters.html", section="dead-letters", rows=rows, bulk=bulk,
                     total=sum(by_type.values()), by_type=sorted(by_type.items()),
                     triage=TRIAGE, next_page=next_page,
                     filtered=bool(error_type or triage_state or cursor),
                     f={"error_type": error_type, "triage_state": triage_state})


@get("/dead-letters/{run_id:uuid}", include_in_schema=False)
async def letter_page(run_id: FromPath[uuid.UUID], ui: Ui) -> Response[str]:
    row = await letters.by_id(ui.conn, ui.tenant_id, run_id)
    if row is None:
        raise NotFound(f"no dead letter {run_id}")
    payload = (await get_blobs(ui.conn, [row.payload_ref], ui.tenant_id)).get(row.payload_ref)
    stream = await read_stream(ui.conn, run_id, ui.tenant_id)
    job = await job_store.by_id(ui.conn, ui.tenant_id, row.job_id)
    # a viewer's session sees no triage or replay form
    return ui.render("dead_letter.html", section="dead-letters", row=row, csrf=ui.csrf,
                     job_name=job.name if job is not None else str(row.job_id),
                     operate=operations.may_operate(ui), triage=TRIAGE[1:],
                     attempts=attempt_rows(stream), request_key=uuid.uuid4().hex,
                     payload=json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False))


def _request_key(form: dict[str, Any]) -> str | None:
    """The form's own key: sending the same form twice replays once."""
    key = form.get("request_key")
    return key if isinstance(key, str) and 0 < len(key) <= 200 else None


@post("/dead-letters/{run_id:uuid}/replay", include_in_schema=False, status_code=303,
      opt=audited("dead_letter.replay", "run", "run_id"))
async def replay(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    sent = await actions.posted(request, ui)  # the reason: in the audit row (rerun takes none)
    form = sent.form
    if await letters.by_id(ui.conn, ui.tenant_id, run_id) is None:
        raise NotFound(f"no dead letter {run_id}")
    payload: Any = msgspec.UNSET
    if form.get("edit"):
        try:
            payload = json.loads(form.get("payload") or "null")
        except ValueError as exc:
            raise InvalidInput(f"the payload is not JSON: {exc}",
                               errors=[{"field": "payload", "message": "invalid JSON"}]) from exc
    new_id, _ = await runs.rerun(
        ui.conn, ui.store, ui.clock, tenant_id=ui.tenant_id, run_id=run_id, actor=ui.actor,
        request_key=_request_key(form), payload=payload,
        max_payload_bytes=ui.settings.max_payload_bytes,
        trigger="replay")
    ui.audit.after = {"run_id": str(new_id), "payload_changed": payload is not msgspec.UNSET}
    actions.done(ui, "Replayed with the edited payload: this is the new run."
                 if payload is not msgspec.UNSET
                 else "Replayed with the original payload: this is the new run.")
    return redirect(f"/ui/runs/{new_id}")


@post("/dead-letters/{run_id:uuid}/triage", include_in_schema=False, status_code=303,
      opt=audited("dead_letter.triage", "run", "run_id"))
async def triage(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    sent = await actions.posted(request, ui)  # the reason: in the audit row (triage takes none)
    state = sent.form.get("state")
    if state not in {v for v, _ in TRIAGE[1:]}:
        raise InvalidInput(f"unknown triage state {state!r}",
                           errors=[{"field": "state", "message": "unknown"}])
    comment = sent.text("comment")[:2000] or None
    await runs.triage(ui.conn, ui.store, tenant_id=ui.tenant_id, run_id=run_id, state=state,
                      comment=comment, actor=ui.actor)
    ui.audit.after = {"triage_state": state}
    actions.done(ui, f"Triage saved: {state}.")
    return redirect(f"/ui/dead-letters/{run_id}")


ROUTES = [letters_page, letter_page, replay, triage]
