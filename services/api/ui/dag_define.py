"""Define a DAG and start it from the web UI (issue 41 item 3): paste a definition, see its
graph drawn before anything is saved, then save it (a new DAG, or the DAG's next version) and
start a run from the DAG's page. The same commands as POST /v1/dags and /v1/dags/{id}/runs, with
the same 422 details shown on the form, and audited as they are."""

from __future__ import annotations

import json
import uuid
from typing import Any

from litestar import Request, Response, get, post
from litestar.params import FromPath

from ostinato.dags import graph
from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput
from ostinato.runs import dags
from ostinato.stores import dags as dag_store
from services.api.auditing import audited
from services.api.dags import rules_of
from services.api.ui import actions
from services.api.ui.dags import _dag, graph_svg
from services.api.ui.scope import Ui, UiScope, checked_form, redirect

EXAMPLE = json.dumps({"nodes": [{"key": "extract", "task": "etl.extract"},
                                {"key": "transform", "task": "etl.transform"},
                                {"key": "load", "task": "etl.load"}],
                      "edges": [{"from": "extract", "to": "transform"},
                                {"from": "transform", "to": "load"}]}, indent=2)


def may_define(ui: UiScope) -> bool:
    return roles.may(ui.session.role, roles.SUBMIT)


def _parsed(name: str, text: str) -> tuple[graph.Dag | None, list[dict[str, str]]]:
    """The definition's graph, or the problems a POST /v1/dags would answer (field, message)."""
    errors: list[dict[str, str]] = []
    if not name.strip():
        errors.append({"field": "name", "message": "a DAG needs a name"})
    try:
        document = json.loads(text)
    except ValueError as exc:
        return None, [*errors, {"field": "definition", "message": f"not JSON: {exc}"}]
    if not isinstance(document, dict):
        return None, [*errors, {"field": "definition",
                                "message": "an object with `nodes` and `edges`"}]
    try:
        dag = graph.parse({"nodes": document.get("nodes"), "edges": document.get("edges", [])})
    except InvalidInput as exc:
        return None, [*errors, *exc.errors]
    return (dag if not errors else None), errors


async def _form_page(ui: UiScope, *, name: str, text: str, check: bool,
                     status: int = 200, stale: bool = False, reason: str = "") -> Response[str]:
    """The form; with `check`, the definition's graph (or its problems) and what saving does."""
    dag, errors = _parsed(name, text) if check else (None, [])
    current = await dag_store.by_name(ui.conn, ui.tenant_id, name.strip()) \
        if dag is not None else None
    if dag is None:
        change = ""
    elif current is None:
        change = f"Saving defines a new DAG {name.strip()!r}, version 1."
    elif current.version_hash == dag.version_hash:
        change = (f"The same definition as version {current.version} of {current.name!r}: "
                  "saving changes nothing.")
    else:
        change = (f"Saving makes version {current.version + 1} of {current.name!r} "
                  f"(version {current.version} today); runs already started keep theirs.")
    return ui.render(
        "dag_define.html", section="dags", status=422 if errors else status, name=name,
        definition=text, errors=errors, stale=stale, reason=reason,
        reason_max=actions.MAX_REASON_CHARS,
        graph=graph_svg(dag) if dag is not None else None, change=change,
        version_hash=dag.version_hash if dag is not None else "",
        nodes=len(dag.nodes) if dag is not None else 0,
        edges=sum(len(p) for p in dag.parents.values()) if dag is not None else 0,
        allowed=may_define(ui), refusal=roles.refusal(ui.session.role, roles.SUBMIT),
        csrf=ui.csrf)


@get("/dags/new", include_in_schema=False)
async def define_form(ui: Ui) -> Response[str]:
    return await _form_page(ui, name="", text=EXAMPLE, check=False)


@post("/dags/preview", include_in_schema=False, status_code=200)
async def preview(request: Request, ui: Ui) -> Response[str]:
    """The graph of what was pasted, nothing saved."""
    form = await checked_form(request, ui, roles.SUBMIT)
    return await _form_page(ui, name=str(form.get("name") or ""),
                            text=str(form.get("definition") or ""), check=True,
                            reason=str(form.get("reason") or ""))


@post("/dags/new", include_in_schema=False, status_code=303,
      opt=audited("dag.define", "dag", action=roles.SUBMIT))
async def define(request: Request, ui: Ui) -> Response[Any]:
    """Save what was previewed: a definition changed since its preview is shown again instead."""
    sent = await actions.posted(request, ui, action=roles.SUBMIT)  # its reason: audited only
    form = sent.form
    name, text = str(form.get("name") or "").strip(), str(form.get("definition") or "")
    dag, errors = _parsed(name, text)
    if dag is None or dag.version_hash != form.get("previewed"):
        ui.audit.status = 422 if errors else 409
        ui.audit.detail = "not saved: " + ("; ".join(e["message"] for e in errors)
                                           or "changed since its preview")
        return await _form_page(ui, name=name, text=text, check=True, status=409,
                                stale=not errors, reason=sent.reason or "")
    row, created = await dags.define(ui.conn, ui.store, tenant_id=ui.tenant_id, name=name,
                                     document=json.loads(text), rules=rules_of(ui.settings),
                                     actor=ui.actor)
    ui.audit.target_id = str(row.id)
    ui.audit.after = {"name": row.name, "version": row.version, "created": created}
    actions.done(ui, f"DAG {row.name} defined, version {row.version}." if created else
                 f"DAG {row.name} unchanged: version {row.version} is this definition.")
    return redirect(f"/ui/dags/{row.id}")


@post("/dags/{dag_id:uuid}/runs", include_in_schema=False, status_code=303,
      opt=audited("dag.run", "dag", "dag_id", action=roles.SUBMIT))
async def start(request: Request, dag_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    """A run of the DAG's current version, its roots scheduled now."""
    await actions.posted(request, ui, action=roles.SUBMIT)  # its reason: audited only
    row = await _dag(ui, dag_id)
    async with ui.conn.transaction():
        run_id, _ = await dags.start_run(ui.conn, ui.store, dag=row, now=ui.clock.now(), at=None,
                                         actor=ui.actor, rules=rules_of(ui.settings))
    ui.audit.after = {"dag_run_id": str(run_id), "version": row.version}
    actions.done(ui, f"DAG run of {row.name} (version {row.version}) started.")
    return redirect(f"/ui/dag-runs/{run_id}")


ROUTES = [define_form, preview, define, start]
