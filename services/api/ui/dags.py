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
from services.api.ui import html, operations
from services.api.ui.html import Safe, badge, fmt, ident, join, link, short, when
from services.api.ui.runs import live
from services.api.ui.scope import Ui, UiScope, checked_form, html_response, redirect

PAGE_SIZE = 100
RUNS_SHOWN = 50
FINAL = ("succeeded", "failed", "cancelled")  # a DAG run's final states
RETRYABLE = ("failed", "cancelled", "upstream_failed")  # a node one may retry from
# the graph's geometry (SVG user units): a node's box, and the gaps between layers and rows
BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 180, 58, 60, 18, 8
# node states (ostinato.dags.decide.NodeState) as the badge colours name them
NODE_CLASSES = {"waiting": "wait", "active": "busy", "succeeded": "ok", "failed": "bad",
                "upstream_failed": "bad", "cancelled": "off", "skipped": "off"}


def graph_svg(dag: graph.Dag, nodes: dict[str, DagNodeView] | None = None) -> Safe:
    """The DAG left to right, one column per topological layer, an edge from each parent's
    right side to its child's left; with `nodes`, each box shows and is coloured by its state
    and links to the node's run."""
    place: dict[str, tuple[int, int]] = {}
    layers = dag.layers()
    for col, layer in enumerate(layers):
        for row, key in enumerate(layer):
            place[key] = (PAD + col * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y))
    width = PAD * 2 + len(layers) * BOX_W + max(len(layers) - 1, 0) * GAP_X
    height = PAD * 2 + max(len(ly) for ly in layers) * (BOX_H + GAP_Y) - GAP_Y
    edges = []
    for key in dag.order:
        x2, y2 = place[key]
        for parent in dag.parents[key]:
            x1, y1 = place[parent]
            x1, y1, y2c = x1 + BOX_W, y1 + BOX_H // 2, y2 + BOX_H // 2
            mid = (x1 + x2) // 2
            edges.append(fmt('<path class="edge" d="M{x1},{y1} C{m},{y1} {m},{y2} {x2},{y2}">'
                             '<title>{a} → {b}</title></path>', x1=x1, y1=y1, m=mid, x2=x2,
                             y2=y2c, a=parent, b=key))
    boxes = []
    for key in dag.order:
        x, y = place[key]
        node = (nodes or {}).get(key)
        state = node.state if node else ""
        sub = f"{dag.nodes[key].task}" + (f" · {node.attempts} att." if node else "")
        box = fmt('<g class="node {cls}" data-key="{key}" data-state="{state}">'
                  '<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6"></rect>'
                  '<text x="{tx}" y="{ty1}" class="key">{key}</text>'
                  '<text x="{tx}" y="{ty2}" class="sub">{sub}</text>'
                  '<text x="{tx}" y="{ty3}" class="state">{state}</text>'
                  '<title>{key}: {state}</title></g>',
                  cls=NODE_CLASSES.get(state, "plain"), key=key, state=state or "", x=x, y=y,
                  w=BOX_W, h=BOX_H, tx=x + 10, ty1=y + 18, ty2=y + 34, ty3=y + 50, sub=sub)
        if node is not None and node.run_id is not None:
            box = fmt('<a href="{href}">{box}</a>', href=f"/ui/runs/{node.run_id}", box=box)
        boxes.append(box)
    return fmt('<div class="dag-graph"><svg xmlns="http://www.w3.org/2000/svg" role="img" '
               'aria-label="the DAG\'s graph" width="{w}" height="{h}" viewBox="0 0 {w} {h}">'
               '{edges}{boxes}</svg></div>', w=width, h=height, edges=join(edges),
               boxes=join(boxes))


def progress(view: DagRunView) -> Safe:
    total = view.progress.get("total", 0)
    ended = sum(n for s, n in view.progress.items() if s != "total" and s not in
                ("waiting", "active"))
    counts = join((fmt("{b} {n}", b=badge(s), n=n) for s, n in sorted(view.progress.items())
                   if s != "total"), " ")
    return fmt('<div class="progress" data-state="{state}"><progress max="{total}" '
               'value="{ended}"></progress> <span class="progress-text"><b id="dag-ended">'
               '{ended}</b> of {total} nodes ended</span> {counts}</div>',
               state=view.state, total=total, ended=ended, counts=counts)


def _dag_run_rows(views: list[DagRunView]) -> list[list[Any]]:
    return [[ident(v.id, f"/ui/dag-runs/{v.id}"), badge(v.state), v.dag_version,
             v.trigger, fmt("{e} / {t}", e=sum(n for s, n in v.progress.items()
                                                if s not in ("total", "waiting", "active")),
                            t=v.progress.get("total", 0)),
             when(v.created_at), when(v.finished_at) if v.finished_at else
             Safe('<span class="muted">—</span>')] for v in views]


@get("/dags", include_in_schema=False)
async def dags_page(ui: Ui, after: FromQuery[str] = "") -> Response[str]:
    rows = await dag_store.page(ui.conn, ui.tenant_id, after, PAGE_SIZE)
    table = html.table(
        ["DAG", "id", "version", "nodes", "version hash", "defined", "last changed"],
        [[link(f"/ui/dags/{r.id}", r.name), ident(r.id), r.version, r.node_count,
          fmt("<code>{h}</code>", h=r.version_hash[:12]), when(r.created_at),
          when(r.updated_at)] for r in rows], "No DAGs yet (POST /v1/dags defines one).",
        "dags")
    pager = link(html.url("/ui/dags", after=rows[-1].name), "next page →") \
        if len(rows) == PAGE_SIZE else Safe("")
    define = fmt('<div class="actions"><a class="button" href="/ui/dags/new">Define a DAG</a>'
                 '</div>') if roles.may(ui.session.role, roles.SUBMIT) else Safe("")
    return ui.page("DAGs", fmt('{d}{t}<p class="pager">{p}</p>', d=define, t=table, p=pager),
                   "dags")


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
    views = [await run_view(ui.conn, r) for r in runs]
    start = fmt('<div class="actions">{b} <a href="/ui/dags/new">Define a new version</a></div>',
                b=html.post_button(f"/ui/dags/{row.id}/runs", "Start a run", ui.csrf)) \
        if roles.may(ui.session.role, roles.SUBMIT) else Safe("")
    body = join([
        start,
        html.kv([("name", row.name), ("id", row.id), ("version", row.version),
                 ("version hash", fmt("<code>{h}</code>", h=row.version_hash)),
                 ("nodes", row.node_count), ("defined", when(row.created_at)),
                 ("last changed", when(row.updated_at))]),
        fmt("<section><h2>Graph (version {v})</h2>{g}</section>", v=row.version,
            g=graph_svg(dag)),
        fmt("<section><h2>Runs (the latest {n})</h2>{t}</section>", n=RUNS_SHOWN,
            t=html.table(["DAG run", "state", "version", "trigger", "nodes ended", "created",
                          "finished"], _dag_run_rows(views), "No runs yet.", "dag-runs")),
    ])
    return ui.page(f"DAG {row.name}", body, "dags")


async def _dag_run(ui: UiScope, dag_run_id: uuid.UUID) -> DagRunRow:
    run = await dag_store.run_by_id(ui.conn, ui.tenant_id, dag_run_id)
    if run is None:
        raise NotFound(f"no DAG run {dag_run_id}")
    return run


def _node_rows(ui: UiScope, view: DagRunView) -> list[list[Any]]:
    operate = operations.may_operate(ui) and view.state != "pending" and not view.archived
    rows = []
    for n in view.nodes:
        action = html.post_button(f"/ui/dag-runs/{view.id}/nodes/{n.key}/retry",
                                  "Retry from here", ui.csrf) \
            if operate and n.state in RETRYABLE else Safe("")
        error = fmt("{t}: {m}", t=n.last_error.get("type"), m=n.last_error.get("message")) \
            if n.last_error else Safe("")
        rows.append([n.key, n.task, badge(n.state), join(n.parents, ", "),
                     ident(n.run_id, f"/ui/runs/{n.run_id}") if n.run_id else Safe(""),
                     n.generation, n.attempts, _opt(n.ready_at), _opt(n.started_at),
                     _opt(n.finished_at), error, action])
    return rows


def _opt(at: Any) -> Safe:
    return when(at) if at is not None else Safe('<span class="muted">—</span>')


async def dag_run_body(ui: UiScope, run: DagRunRow,
                       gone: ArchivedDagRun | None = None) -> tuple[DagRunView, Safe]:
    """The DAG run's summary, graph and nodes; `gone`: it is read from its archive (no
    actions: it can be read, not changed)."""
    if gone is None:
        view = await run_view(ui.conn, run)
    else:
        assert ui.archive is not None  # read_dag_run found it there
        view = msgspec.structs.replace(
            await run_view(ui.conn, run, await archived.dag_node_rows(ui.archive, gone)),
            archived=True, archived_at=gone.archived_at)
    dag = await dags.load_dag(ui.conn, run.dag_id, run.dag_version)
    row = await _dag(ui, run.dag_id)
    summary = html.kv([
        ("state", join([badge(view.state), " (cancel requested)" if view.cancel_requested
                        else ""])),
        ("DAG", link(f"/ui/dags/{row.id}", f"{row.name} (version {view.dag_version})")),
        ("trigger", view.trigger),
        ("job", link(f"/ui/jobs/{view.job_id}", view.job_id) if view.job_id else None),
        ("scheduled for", when(view.scheduled_for) if view.scheduled_for else None),
        ("due at", when(view.due_at)), ("created", when(view.created_at)),
        ("started", _opt(view.started_at)), ("finished", _opt(view.finished_at)),
    ])
    banner = fmt('<p class="archived-banner" role="status">archived {w}: read from the '
                 'archive; it can no longer be changed</p>', w=when(view.archived_at)) \
        if view.archived and view.archived_at else Safe("")
    body = join([
        banner,
        fmt("<section><h2>Summary</h2>{s}{p}</section>", s=summary, p=progress(view)),
        fmt("<section><h2>Graph</h2>{g}</section>",
            g=graph_svg(dag, {n.key: n for n in view.nodes})),
        fmt("<section><h2>Nodes</h2>{t}</section>", t=html.table(
            ["node", "task", "state", "after", "run", "generation", "attempts", "ready",
             "started", "finished", "error", ""], _node_rows(ui, view), "No nodes.",
            "dag-nodes")),
    ])
    return view, body


@get("/dag-runs/{dag_run_id:uuid}", include_in_schema=False)
async def dag_run_page(request: Request, dag_run_id: FromPath[uuid.UUID],
                       ui: Ui) -> Response[str]:
    run = await dag_store.run_by_id(ui.conn, ui.tenant_id, dag_run_id)
    if run is None:  # left the hot tables: from its archive, or the usual 404
        gone = await archived.read_dag_run(ui.archive, ui.tenant_id, dag_run_id)
        _, body = await dag_run_body(ui, archived.dag_run_row(gone), gone)
        return ui.page(f"DAG run {short(dag_run_id)}", body, "dags")
    view, body = await dag_run_body(ui, run)
    if "x-ui-fragment" in request.headers:
        return html_response(body)
    actions = Safe("")
    if operations.may_operate(ui) and view.state not in FINAL \
            and not view.cancel_requested:
        actions = fmt('<div class="actions">{b}</div>', b=html.post_button(
            f"/ui/dag-runs/{dag_run_id}/cancel", "Cancel DAG run", ui.csrf, cls="danger"))
    content = body if view.state in FINAL else live(f"/ui/dag-runs/{dag_run_id}", body)
    return ui.page(f"DAG run {short(dag_run_id)}", join([actions, content]), "dags")


@post("/dag-runs/{dag_run_id:uuid}/cancel", include_in_schema=False, status_code=303,
      opt=audited("dag_run.cancel", "dag_run", "dag_run_id"))
async def cancel(request: Request, dag_run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    await checked_form(request, ui)
    asked = await dags.cancel(ui.conn, ui.store, tenant_id=ui.tenant_id, dag_run_id=dag_run_id,
                              actor=ui.actor, now=ui.clock.now(), rules=rules_of(ui.settings),
                              reason="cancelled in the web UI")
    ui.audit.after = {"cancelled_runs": asked}
    ui.session.flash = "DAG run cancelled."
    return redirect(f"/ui/dag-runs/{dag_run_id}")


@post("/dag-runs/{dag_run_id:uuid}/nodes/{key:str}/retry", include_in_schema=False,
      status_code=303, opt=audited("dag_run.retry_node", "dag_run", "dag_run_id"))
async def retry_node(request: Request, dag_run_id: FromPath[uuid.UUID], key: FromPath[str],
                     ui: Ui) -> Response[Any]:
    await checked_form(request, ui)
    run_id = await dags.retry_from_node(
        ui.conn, ui.store, tenant_id=ui.tenant_id, dag_run_id=dag_run_id, key=key,
        actor=ui.actor, now=ui.clock.now(), rules=rules_of(ui.settings),
        reason="retried in the web UI")
    ui.audit.after = {"node": key, "run_id": str(run_id)}
    ui.session.flash = f"Retrying from node {key}."
    return redirect(f"/ui/dag-runs/{dag_run_id}")


ROUTES = [dags_page, dag_page, dag_run_page, cancel, retry_node]
