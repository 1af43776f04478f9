"""The run page's hold (docs/RETENTION.md): whether the run is held, by whom, when and why,
and for an operator the form that holds it (a reason required) or releases it. The forms are
audited control actions (`services.api.ui.actions`: confirmed, the reason in the audit row,
the result's flash linking it), as the API's POST /v1/runs/{id}/hold
and /release (`ostinato.runs.retention`)."""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Request, Response, post
from litestar.params import FromPath
from markupsafe import Markup

from ostinato.runs import retention
from ostinato.stores import retention as retention_store
from services.api.auditing import audited
from services.api.ui import actions, operations, render
from services.api.ui.scope import Ui, UiScope, redirect


async def hold_section(ui: UiScope, run_id: uuid.UUID, *, archived: bool = False) -> Markup:
    """The run's hold and, for an operator, its form (templates/hold.html); nothing for an
    archived run (a held run is never archived, and an archived one cannot be changed) nor
    for a viewer's session when the run is not held."""
    if archived:
        return Markup("")
    hold = (await retention_store.holds_of(ui.conn, ui.tenant_id, [run_id])).get(run_id)
    may = operations.may_operate(ui)
    if hold is None and not may:
        return Markup("")
    return Markup(render.render_text("hold.html", hold=hold, may=may, run_id=run_id,
                                     csrf=ui.csrf))


@post("/runs/{run_id:uuid}/hold", include_in_schema=False, status_code=303,
      opt=audited("run.hold", "run", "run_id"))
async def hold(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    sent = await actions.posted(request, ui, reason_required=True)
    row, changed = await retention.hold_run(ui.conn, ui.store, tenant_id=ui.tenant_id,
                                            run_id=run_id, actor=ui.actor, reason=sent.reason)
    ui.audit.after = {"reason": row.reason, "by": row.held_by}
    actions.done(ui, "Held. It is never archived or removed until released." if changed
                 else "It was held already: nothing changed.")
    return redirect(f"/ui/runs/{run_id}")


@post("/runs/{run_id:uuid}/release", include_in_schema=False, status_code=303,
      opt=audited("run.release", "run", "run_id"))
async def release(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    await actions.posted(request, ui)  # the reason: in the audit row (release takes none)
    row, changed = await retention.release_run(ui.conn, ui.store, tenant_id=ui.tenant_id,
                                               run_id=run_id, actor=ui.actor)
    ui.audit.before = {"reason": row.reason, "by": row.held_by} if row else None
    actions.done(ui, "Released. It leaves the hot database after its tenant's retention."
                 if changed else "It was not held: nothing changed.")
    return redirect(f"/ui/runs/{run_id}")


ROUTES = [hold, release]
