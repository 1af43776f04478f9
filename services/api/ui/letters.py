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
from services.api.auditing import audited
from services.api.routes import decode_cursor, encode_cursor
from services.api.ui import html, operations
from services.api.ui.html import Safe, badge, fmt, ident, join, link, short, when
from services.api.ui.runs import attempt_rows
from services.api.ui.scope import Ui, checked_form, redirect

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
    summary = fmt('<p class="counts">{total} dead letters{types}</p>',
                  total=sum(by_type.values()),
                  types=fmt(": {t}", t=", ".join(f"{k} {v}" for k, v in sorted(by_type.items())))
                  if by_type else "")
    form = fmt('<form method="get" action="/ui/dead-letters" class="filters">'
               '<label>error type <input name="error_type" value="{e}" size="14"></label>'
               '<label>triage {t}</label><button type="submit">Filter</button> '
               '<a href="/ui/dead-letters">clear</a></form>',
               e=error_type, t=html.select("triage_state", TRIAGE, triage_state))
    table = html.table(
        ["run", "job", "task", "reason", "error", "attempts", "dead-lettered", "triage",
         "replays"],
        [[ident(r.run_id, f"/ui/dead-letters/{r.run_id}"),
          ident(r.job_id, f"/ui/jobs/{r.job_id}"), r.task, r.reason,
          fmt("{t}: {m}", t=r.error_type, m=r.message) if r.error_type else r.message,
          r.attempts, when(r.dead_lettered_at), badge(r.triage_state), r.replays]
         for r in rows], "No dead letters.", "letters")
    pager = []
    if more:
        pager.append(link(html.url("/ui/dead-letters", error_type=error_type,
                                   triage_state=triage_state, cursor=encode_cursor(
                                       rows[-1].dead_lettered_at, rows[-1].run_id)),
                          "next page →"))
    bulk = operations.offers([await operations.offer(
        ui, "replay", {"error_type": error_type, "triage_state": triage_state})])
    return ui.page("Dead letters", join([form, summary, bulk, table, fmt(
        '<p class="pager">{p}</p>', p=join(pager))]), "dead-letters")


@get("/dead-letters/{run_id:uuid}", include_in_schema=False)
async def letter_page(run_id: FromPath[uuid.UUID], ui: Ui) -> Response[str]:
    row = await letters.by_id(ui.conn, ui.tenant_id, run_id)
    if row is None:
        raise NotFound(f"no dead letter {run_id}")
    payload = (await get_blobs(ui.conn, [row.payload_ref], ui.tenant_id)).get(row.payload_ref)
    stream = await read_stream(ui.conn, run_id, ui.tenant_id)
    info = html.kv([
        ("run", link(f"/ui/runs/{row.run_id}", row.run_id)),
        ("job", link(f"/ui/jobs/{row.job_id}", row.job_id)), ("task", row.task),
        ("reason", row.reason), ("error", fmt("{t}: {m}", t=row.error_type, m=row.message)),
        ("attempts", row.attempts), ("dead-lettered", when(row.dead_lettered_at)),
        ("triage", join([badge(row.triage_state), fmt(" {c}", c=row.triage_comment or "")])),
        ("replays", row.replays),
        ("last replay", link(f"/ui/runs/{row.last_replay_run}", row.last_replay_run)
         if row.last_replay_run else None),
    ])
    text = json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False)
    replay = fmt(
        '<form method="post" action="/ui/dead-letters/{id}/replay" class="replay">{csrf}'
        '<label><input type="checkbox" name="edit" value="1" id="edit-payload"> replay with '
        'this payload instead of the original</label>'
        '<textarea name="payload" id="payload" rows="10" cols="70" spellcheck="false">{text}'
        '</textarea><button type="submit">Replay</button></form>',
        id=run_id, text=text, csrf=join([html.hidden("_csrf", ui.csrf),
                                         html.hidden("request_key", uuid.uuid4().hex)]))
    triage = fmt(
        '<form method="post" action="/ui/dead-letters/{id}/triage" class="filters">{csrf}'
        '<label>triage state {state}</label><label>comment <input name="comment" size="40" '
        'maxlength="2000" value="{comment}"></label><button type="submit">Save triage</button>'
        '</form>', id=run_id, csrf=html.hidden("_csrf", ui.csrf), comment=row.triage_comment,
        state=html.select("state", TRIAGE[1:], row.triage_state))
    operate = operations.may_operate(ui)  # a viewer's session sees no triage or replay form
    body = join([
        fmt("<section><h2>Dead letter</h2>{i}</section>", i=info),
        fmt("<section><h2>Triage</h2>{t}</section>", t=triage) if operate else Safe(""),
        fmt("<section><h2>Attempts</h2>{t}</section>", t=html.table(
            ["attempt", "fencing token", "worker", "started", "ended", "outcome", "error"],
            attempt_rows(stream), "No attempt started.")),
        fmt("<section><h2>Replay</h2><p class=\"muted\">A new run linked to this one; the "
            "original payload unless the box is ticked.</p>{f}</section>", f=replay)
        if operate else Safe(""),
    ])
    return ui.page(f"Dead letter {short(run_id)}", body, "dead-letters")


def _request_key(form: dict[str, Any]) -> str | None:
    """The form's own key: sending the same form twice replays once."""
    key = form.get("request_key")
    return key if isinstance(key, str) and 0 < len(key) <= 200 else None


@post("/dead-letters/{run_id:uuid}/replay", include_in_schema=False, status_code=303,
      opt=audited("dead_letter.replay", "run", "run_id"))
async def replay(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    form = await checked_form(request, ui)
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
    ui.session.flash = ("Replayed with the edited payload." if payload is not msgspec.UNSET
                        else "Replayed with the original payload.")
    return redirect(f"/ui/runs/{new_id}")


@post("/dead-letters/{run_id:uuid}/triage", include_in_schema=False, status_code=303,
      opt=audited("dead_letter.triage", "run", "run_id"))
async def triage(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    form = await checked_form(request, ui)
    state = form.get("state")
    if state not in {v for v, _ in TRIAGE[1:]}:
        raise InvalidInput(f"unknown triage state {state!r}",
                           errors=[{"field": "state", "message": "unknown"}])
    comment = (form.get("comment") or "").strip()[:2000] or None
    await runs.triage(ui.conn, ui.store, tenant_id=ui.tenant_id, run_id=run_id, state=state,
                      comment=comment, actor=ui.actor)
    ui.audit.after = {"triage_state": state}
    ui.session.flash = f"Triage saved: {state}."
    return redirect(f"/ui/dead-letters/{run_id}")


ROUTES = [letters_page, letter_page, replay, triage]
