"""The DAG pages: the tenant's DAGs (each with its current version), one DAG (its graph and its
runs) and one DAG run (the graph drawn as inline SVG from the definition's topological layers,
each node's state, run, attempts and times, the progress, and Cancel / Retry from a node for a
role that may operate). The same reads and commands as /v1/dags and /v1/dag-runs."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery
from markupsafe import Markup

from ostinato.archive import ArchivedDagRun
from ostinato.dags import graph
from ostinato.domain import roles
from ostinato.domain.errors import NotFound
from ostinato.runs import dags
from ostinato.stores import dags as dag_store
from ostinato.stores.dags import DagRow, DagRunRow
from ostinato.wire.api import DagNodeView, DagRunView
from services.api import archived
from services.api.auditing import audited
from services.api.dags import rules_of, run_view
from services.api.ui import actions, operations, render
from services.api.ui.render import url
from services.api.ui.runs import LIVE_SECONDS
from services.api.ui.scope import Ui, UiScope, redirect

PAGE_SIZE = 100
RUNS_SHOWN = 50
FINAL = ("succeeded", "failed", "cancelled")  # a DAG run's final states
RETRYABLE = ("failed", "cancelled", "upstream_failed")  # a node one may retry from
# the graph's geometry (SVG user units): a node's box, and the gaps between layers and rows
BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 180, 58, 60, 18, 8
# node states (ostinato.dags.decide.NodeState) as the badge colours name them
NODE_CLASSES = {"waiting": "wait", "active": "busy", "succeeded": "ok", "failed": "bad",
                "upstream_failed": "bad", "cancelled": "off", "skipped": "off"}


def graph_svg(dag: graph.Dag, nodes: dict[str, DagNodeView] | None = None) -> Markup:
    """The DAG left to right, one column per topological layer, an edge from each parent's
    right side to its child's left; with `nodes`, each box shows and is coloured by its state
    and links to the node's run (templates/dag_graph.html draws it)."""
    place: dict[str, tuple[int, int]] = {}
    layers = dag.layers()
    for col, layer in enumerate(layers):
        for row, key in enumerate(layer):
            place[key] = (PAD + col * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y))
    edges = []
    for key in dag.order:
        x2, y2 = place[key]
        for parent in dag.parents[key]:
            x1, y1 = place[parent]
            edges.append({"x1": x1 + BOX_W, "y1": y1 + BOX_H // 2, "x2": x2,
                          "y2": y2 + BOX_H // 2, "mid": (x1 + BOX_W + x2) // 2,
                          "parent": parent, "child": key})
    boxes = []
    for key in dag.order:
        node = (nodes or {}).get(key)
        state = node.state if node else ""
        boxes.append({
            "key": key, "state": state, "cls": NODE_CLASSES.get(state, "plain"),
            "x": place[key][0], "y": place[key][1],
            "sub": dag.nodes[key].task + (f" · {node.attempts} att." if node else ""),
            "href": f"/ui/runs/{node.run_id}" if node and node.run_id else None})
    return Markup(render.render_text(
        "dag_graph.html", edges=edges, boxes=boxes, box_w=BOX_W, box_h=BOX_H,
        label="the DAG run's graph: its nodes and their states" if nodes else "the DAG's graph",
        width=PAD * 2 + len(layers) * BOX_W + max(len(layers) - 1, 0) * GAP_X,
        height=PAD * 2 + max(len(ly) for ly in layers) * (BOX_H + GAP_Y) - GAP_Y))


def ended(view: DagRunView) -> int:
    """How many of a DAG run's nodes have ended (neither waiting nor active)."""
    return sum(n for s, n in view.progress.items() if s not in ("total", "waiting", "active"))


@get("/dags", include_in_schema=False)
async def dags_page(ui: Ui, after: FromQuery[str] = "") -> Response[str]:
    rows = await dag_store.page(ui.conn, ui.tenant_id, after, PAGE_SIZE)
    return ui.render("dags.html", section="dags", rows=rows,
                     may_define=roles.may(ui.session.role, roles.SUBMIT),
                     next_page=url("/ui/dags", after=rows[-1].name)
                     if len(rows) == PAGE_SIZE else None)


async def _dag(ui: UiScope, dag_id: uuid.UUID) -> DagRow:
    row = await dag_store.by_id(ui.conn, ui.tenant_id, dag_id)
    if row is None:
        raise NotFound(f"no DAG {dag_id}")
    return row


@get("/dags/{dag_id:uuid}", include_in_schema=False)
async def dag_page(dag_id: FromPath[uuid.UUID], ui: Ui) -> Response[str]:
    row = await _dag(ui, dag_id)
    dag = await dags.load_dag(ui.conn, row.id, row.version)
    runs = await dag_store.runs_of(ui.conn, ui.tenant_id, dag_id, RUNS_SHOWN)
    return ui.render("dag.html", section="dags", row=row, graph=graph_svg(dag),
                     views=[await run_view(ui.conn, r) for r in runs], shown=RUNS_SHOWN,
                     ended=ended, csrf=ui.csrf,
                     may_start=roles.may(ui.session.role, roles.SUBMIT))


async def _dag_run(ui: UiScope, dag_run_id: uuid.UUID) -> DagRunRow:
    run = await dag_store.run_by_id(ui.conn, ui.tenant_id, dag_run_id)
    if run is None:
        raise NotFound(f"no DAG run {dag_run_id}")
    return run


async def dag_run_body(ui: UiScope, run: DagRunRow,
                       gone: ArchivedDagRun | None = None) -> dict[str, Any]:
    """What dag_run_body.html shows of a DAG run: its summary, progress, graph and nodes;
    `gone`: it is read from its archive (no actions: it can be read, not changed)."""
    if gone is None:
        view = await run_view(ui.conn, run)
    else:
        assert ui.archive is not None  # read_dag_run found it there
        view = msgspec.structs.replace(
            await run_view(ui.conn, run, await archived.dag_node_rows(ui.archive, gone)),
            archived=True, archived_at=gone.archived_at)
    dag = await dags.load_dag(ui.conn, run.dag_id, run.dag_version)
    progress = {"total": view.progress.get("total", 0), "ended": ended(view),
                "counts": sorted((s, n) for s, n in view.progress.items() if s != "total")}
    return {"view": view, "dag": await _dag(ui, run.dag_id), "progress": progress,
            "graph": graph_svg(dag, {n.key: n for n in view.nodes}), "csrf": ui.csrf,
            "retryable": RETRYABLE, "operate": operations.may_operate(ui)
            and view.state != "pending" and not view.archived}


@get("/dag-runs/{dag_run_id:uuid}", include_in_schema=False)
async def dag_run_page(request: Request, dag_run_id: FromPath[uuid.UUID],
                       ui: Ui) -> Response[str]:
    run = await dag_store.run_by_id(ui.conn, ui.tenant_id, dag_run_id)
    if run is None:  # left the hot tables: from its archive, or the usual 404
        gone = await archived.read_dag_run(ui.archive, ui.tenant_id, dag_run_id)
        body = await dag_run_body(ui, archived.dag_run_row(gone), gone)
        return ui.render("dag_run.html", section="dags", cancel_offered=False, live=False,
                         every=LIVE_SECONDS, **body)
    body = await dag_run_body(ui, run)
    if "x-ui-fragment" in request.headers:
        return render.render("dag_run_body.html", **body)
    view = body["view"]
    return ui.render("dag_run.html", section="dags", every=LIVE_SECONDS,
                     live=view.state not in FINAL,
                     cancel_offered=operations.may_operate(ui) and view.state not in FINAL
                     and not view.cancel_requested, **body)


@post("/dag-runs/{dag_run_id:uuid}/cancel", include_in_schema=False, status_code=303,
      opt=audited("dag_run.cancel", "dag_run", "dag_run_id"))
async def cancel(request: Request, dag_run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    sent = await actions.posted(request, ui)
    asked = await dags.cancel(ui.conn, ui.store, tenant_id=ui.tenant_id, dag_run_id=dag_run_id,
                              actor=ui.actor, now=ui.clock.now(), rules=rules_of(ui.settings),
                              reason=sent.reason or "cancelled in the web UI")
    ui.audit.after = {"cancelled_runs": asked}
    actions.done(ui, f"DAG run cancelled: {asked} of its node runs asked to stop.")
    return redirect(f"/ui/dag-runs/{dag_run_id}")


@post("/dag-runs/{dag_run_id:uuid}/nodes/{key:str}/retry", include_in_schema=False,
      status_code=303, opt=audited("dag_run.retry_node", "dag_run", "dag_run_id"))
async def retry_node(request: Request, dag_run_id: FromPath[uuid.UUID], key: FromPath[str],
                     ui: Ui) -> Response[Any]:
    sent = await actions.posted(request, ui)
    run_id = await dags.retry_from_node(
        ui.conn, ui.store, tenant_id=ui.tenant_id, dag_run_id=dag_run_id, key=key,
        actor=ui.actor, now=ui.clock.now(), rules=rules_of(ui.settings),
        reason=sent.reason or "retried in the web UI")
    ui.audit.after = {"node": key, "run_id": str(run_id)}
    actions.done(ui, f"Retrying from node {key}: a new run of it, then its descendants again.")
    return redirect(f"/ui/dag-runs/{dag_run_id}")


ROUTES = [dags_page, dag_page, dag_run_page, cancel, retry_node]
