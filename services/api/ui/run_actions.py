"""The operator's actions on a run's page (issue 41 item 3), each the API's own command with a
reason, a confirmation naming what will change, and the result flashed with a link to its audit
entry (`services.api.ui.actions`, the `action_form` macro): cancel and re-run, pause and resume
(POST /v1/runs/{id}/pause, /resume), send a signal with a JSON payload (/signals/{name}), and the
interventions of services/api/interventions.py (retry or skip a step, restart from one, mark the
run succeeded or failed). `run_offers` decides which the page shows: an operator's session, a run
still hot, in a state where the API takes the action; a viewer sees none, and a viewer's
forged POST is refused for its role (`checked_form`).

A form with bad input (a payload that is not JSON, a missing reason) comes back as the page
with that form open, the error beside it and what was typed kept: a 422, nothing sent."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import msgspec
from litestar import Request, Response, post
from litestar.params import FromPath, PathParameter

from ostinato import runs
from ostinato.domain.errors import InvalidInput
from ostinato.runs import interventions
from services.api.auditing import audited
from services.api.ui import actions
from services.api.ui.run_page import page
from services.api.ui.scope import Ui, UiScope, redirect

Seq = Annotated[int, PathParameter(ge=0, le=2**31 - 1)]
MAX_SIGNAL_NAME_CHARS = 256  # as ostinato.runs.signals


def json_field(posted: actions.Posted, name: str, *, empty: Any = None) -> Any:
    """A textarea's JSON document, decoded (blank: `empty`); not JSON is bad input."""
    text = posted.text(name)
    if not text:
        return empty
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"the {name} is not JSON: {exc}",
                           errors=[{"field": name, "message": "not JSON"}]) from None


async def _refused(request: Request, ui: UiScope, run_id: uuid.UUID, key: str,
                   exc: InvalidInput) -> Response[str]:
    """The run's page again, the refused form open with why and what was typed: a 422."""
    form = await request.form()
    ui.audit.status, ui.audit.detail = 422, exc.detail
    values = {k: form.get(k) for k in form if k != "_csrf"}
    return await page(ui, run_id, errors={key: exc.detail}, values={key: values}, status=422)


def _flash_run(ui: UiScope, what: str, run_id: uuid.UUID) -> Response[Any]:
    actions.done(ui, what)
    return redirect(f"/ui/runs/{run_id}")


@post("/runs/{run_id:uuid}/cancel", include_in_schema=False, status_code=303,
      opt=audited("run.cancel", "run", "run_id"))
async def cancel(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    try:
        await actions.posted(request, ui)
    except InvalidInput as exc:
        return await _refused(request, ui, run_id, "cancel", exc)
    state = await runs.cancel_run(ui.conn, ui.store, tenant_id=ui.tenant_id, run_id=run_id,
                                  actor=ui.actor)
    ui.audit.after = {"state": state}
    return _flash_run(ui, "Cancelled." if state == "cancelled" else
                      "Cancel requested: its worker learns it on its next heartbeat.", run_id)


@post("/runs/{run_id:uuid}/retry", include_in_schema=False, status_code=303,
      opt=audited("run.retry", "run", "run_id"))
async def retry(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    try:
        await actions.posted(request, ui)
    except InvalidInput as exc:
        return await _refused(request, ui, run_id, "rerun", exc)
    new_id, _ = await runs.rerun(ui.conn, ui.store, ui.clock, tenant_id=ui.tenant_id,
                                 run_id=run_id, actor=ui.actor, request_key=None)
    ui.audit.after = {"run_id": str(new_id)}
    actions.done(ui, f"Re-run of {run_id} created: this is the new run.")
    return redirect(f"/ui/runs/{new_id}")


@post("/runs/{run_id:uuid}/pause", include_in_schema=False, status_code=303,
      opt=audited("run.pause", "run", "run_id"))
async def pause(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    try:
        got = await actions.posted(request, ui)
    except InvalidInput as exc:
        return await _refused(request, ui, run_id, "pause", exc)
    changed = await runs.pause_run(ui.conn, ui.store, ui.clock, tenant_id=ui.tenant_id,
                                   run_id=run_id, actor=ui.actor, reason=got.reason)
    ui.audit.before, ui.audit.after = {"paused": not changed}, {"paused": True}
    return _flash_run(ui, "Paused: it starts no next step until resumed." if changed
                      else "It was paused already: nothing changed.", run_id)


@post("/runs/{run_id:uuid}/resume", include_in_schema=False, status_code=303,
      opt=audited("run.resume", "run", "run_id"))
async def resume(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    try:
        got = await actions.posted(request, ui)
    except InvalidInput as exc:
        return await _refused(request, ui, run_id, "resume", exc)
    changed = await runs.resume_run(ui.conn, ui.store, ui.clock, tenant_id=ui.tenant_id,
                                    run_id=run_id, actor=ui.actor, reason=got.reason)
    ui.audit.before, ui.audit.after = {"paused": changed}, {"paused": False}
    return _flash_run(ui, "Resumed: it goes on where it stopped." if changed
                      else "It was not paused: nothing changed.", run_id)


@post("/runs/{run_id:uuid}/signal", include_in_schema=False, status_code=303,
      opt=audited("run.signal", "run", "run_id"))
async def signal(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    try:
        got = await actions.posted(request, ui)
        name = got.text("name")
        if not 0 < len(name) <= MAX_SIGNAL_NAME_CHARS:
            raise InvalidInput(f"a signal name has 1 to {MAX_SIGNAL_NAME_CHARS} characters",
                               errors=[{"field": "name", "message": "invalid signal name"}])
        payload = json_field(got, "payload")
        sent = await runs.send_signal(
            ui.conn, ui.store, tenant_id=ui.tenant_id, run_id=run_id, name=name,
            payload=payload, actor=ui.actor, idempotency_key=None,
            max_payload_bytes=ui.settings.max_payload_bytes, reason=got.reason)
    except InvalidInput as exc:
        return await _refused(request, ui, run_id, "signal", exc)
    ui.audit.detail = f"signal {name}" + (f"; reason: {got.reason}" if got.reason else "")
    ui.audit.after = {"signal": name, "signal_id": str(sent.signal_id),
                      "delivered": sent.delivered}
    return _flash_run(ui, f"Signal {name} sent: " + (
        "delivered to the wait for it." if sent.delivered
        else "kept until a wait of that name takes it."), run_id)


@post("/runs/{run_id:uuid}/steps/{seq:int}/retry", include_in_schema=False, status_code=303,
      opt=audited("run.step_retry", "run", "run_id"))
async def retry_step(request: Request, run_id: FromPath[uuid.UUID], seq: FromPath[Seq],
                     ui: Ui) -> Response[Any]:
    try:
        got = await actions.posted(request, ui, reason_required=True)
    except InvalidInput as exc:
        return await _refused(request, ui, run_id, f"retry-{seq}", exc)
    assert got.reason is not None
    done = await interventions.retry_step(ui.conn, ui.store, tenant_id=ui.tenant_id,
                                          run_id=run_id, seq=seq, actor=ui.actor,
                                          reason=got.reason)
    return _intervened(ui, run_id, done, f"Step {seq} retried")


@post("/runs/{run_id:uuid}/steps/{seq:int}/skip", include_in_schema=False, status_code=303,
      opt=audited("run.step_skip", "run", "run_id"))
async def skip_step(request: Request, run_id: FromPath[uuid.UUID], seq: FromPath[Seq],
                    ui: Ui) -> Response[Any]:
    try:
        got = await actions.posted(request, ui, reason_required=True)
        assert got.reason is not None
        done = await interventions.skip_step(
            ui.conn, ui.store, tenant_id=ui.tenant_id, run_id=run_id, seq=seq, name=None,
            output=json_field(got, "output"), actor=ui.actor, reason=got.reason,
            max_output_bytes=ui.settings.max_payload_bytes)
    except InvalidInput as exc:
        return await _refused(request, ui, run_id, f"skip-{seq}", exc)
    return _intervened(ui, run_id, done, f"Step {seq} skipped")


@post("/runs/{run_id:uuid}/restart", include_in_schema=False, status_code=303,
      opt=audited("run.restart", "run", "run_id"))
async def restart(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    form = await request.form()
    raw = form.get("from_seq")
    named = form.get("form_key")  # the reopen form (from the position where it stopped)
    key = (named if named == "reopen" else
           f"restart-{raw}" if isinstance(raw, str) and raw.isdigit() else "restart")
    try:
        got = await actions.posted(request, ui, reason_required=True)
        if not got.text("from_seq").isdigit():
            raise InvalidInput("from_seq is a step's position (0, 1, ...)",
                               errors=[{"field": "from_seq", "message": "not a position"}])
        assert got.reason is not None
        from_seq = int(got.text("from_seq"))
        done = await interventions.restart(ui.conn, ui.store, tenant_id=ui.tenant_id,
                                           run_id=run_id, from_seq=from_seq, actor=ui.actor,
                                           reason=got.reason)
    except InvalidInput as exc:
        return await _refused(request, ui, run_id, key, exc)
    return _intervened(ui, run_id, done, f"Restarted from step {from_seq}")


@post("/runs/{run_id:uuid}/succeed", include_in_schema=False, status_code=303,
      opt=audited("run.succeed", "run", "run_id"))
async def succeed(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    try:
        got = await actions.posted(request, ui, reason_required=True)
        assert got.reason is not None
        done = await interventions.mark_succeeded(
            ui.conn, ui.store, tenant_id=ui.tenant_id, run_id=run_id,
            output=json_field(got, "output"), actor=ui.actor, reason=got.reason,
            max_output_bytes=ui.settings.max_payload_bytes)
    except InvalidInput as exc:
        return await _refused(request, ui, run_id, "succeed", exc)
    return _intervened(ui, run_id, done, "Marked succeeded")


@post("/runs/{run_id:uuid}/fail", include_in_schema=False, status_code=303,
      opt=audited("run.fail", "run", "run_id"))
async def fail(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    try:
        got = await actions.posted(request, ui, reason_required=True)
        assert got.reason is not None
        done = await interventions.mark_failed(
            ui.conn, ui.store, tenant_id=ui.tenant_id, run_id=run_id,
            error_type=got.text("error_type") or None, message=got.text("message") or None,
            actor=ui.actor, reason=got.reason)
    except InvalidInput as exc:
        return await _refused(request, ui, run_id, "fail", exc)
    return _intervened(ui, run_id, done, "Marked failed")


def _intervened(ui: UiScope, run_id: uuid.UUID, done: interventions.Intervened,
                what: str) -> Response[Any]:
    ui.audit.after = {"state": done.state, "version": done.version}
    children = (f"; {done.children_cancelled} child runs cancelled"
                if done.children_cancelled else "")
    return _flash_run(ui, f"{what}: the run is {done.state.replace('_', ' ')} now{children}.",
                      run_id)


ROUTES = [cancel, retry, pause, resume, signal, retry_step, skip_step, restart, succeed, fail]
