"""Route handlers for DAGs (docs/DAGS.md): define and list DAGs, start a DAG run (now or at an
instant), show it node by node, cancel it, retry from a node. Tenant-scoped through
`scope.TenantScope`, over `ostinato.runs.dags` and `ostinato.stores.dags`."""

from __future__ import annotations

import uuid
from typing import Annotated

import asyncpg
import msgspec
from litestar import Response, get, post
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from ostinato.dags import graph
from ostinato.domain import roles
from ostinato.domain.errors import NotFound
from ostinato.runs import dags
from ostinato.runtime.settings import Settings
from ostinato.stores import dags as dag_store
from ostinato.stores.dags import DagNodeRow, DagRow, DagRunRow
from ostinato.wire.api import (
    DagNodeRetryRequest,
    DagNodeView,
    DagRequest,
    DagRunCancelRequest,
    DagRunChanged,
    DagRunCreated,
    DagRunRequest,
    DagRunsPage,
    DagRunView,
    DagsPage,
    DagView,
    EventsPage,
)
from services.api import archived
from services.api.auditing import audited
from services.api.routes import READS_ARCHIVE, AfterVersion, EventsLimit, events_page, timeline_page
from services.api.scope import Tenant

Limit = Annotated[int, QueryParameter(ge=1, le=500)]


def rules_of(settings: Settings) -> dags.Rules:
    return dags.Rules(pools=frozenset(settings.pool_names),
                      classes=frozenset(c.name for c in settings.classes),
                      pool_retry=settings.pool_retry,
                      max_payload_bytes=settings.max_payload_bytes)


def _view(row: DagRow, created: bool | None = None,
          definition: graph.DagDefinition | None = None) -> DagView:
    return DagView(id=row.id, name=row.name, version=row.version,
                   version_hash=row.version_hash, node_count=row.node_count,
                   created_at=row.created_at, updated_at=row.updated_at, created=created,
                   nodes=definition.nodes if definition else None,
                   edges=definition.edges if definition else None)


@post("/v1/dags", status_code=201, tags=["dags"],
      opt=audited("dag.define", "dag", action=roles.SUBMIT))
async def define_dag(data: JSONBody[DagRequest], tenant: Tenant) -> Response[DagView]:
    """Define a DAG, or its next version when the definition changed (the same definition again
    is the current version, 200). Refused with 422 naming the field: an unknown node in an
    edge, a duplicate key, a self edge, or a cycle (`cycle`: its nodes in order)."""
    document = msgspec.to_builtins(graph.DagDefinition(nodes=data.nodes, edges=data.edges))
    row, created = await dags.define(tenant.conn, tenant.store, tenant_id=tenant.tenant_id,
                                     name=data.name, document=document,
                                     rules=rules_of(tenant.settings), actor=tenant.actor)
    tenant.audit.target_id = str(row.id)
    tenant.audit.after = {"name": row.name, "version": row.version, "created": created}
    if not created:
        tenant.audit.status = 200
    return Response(_view(row, created), status_code=201 if created else 200)


@get("/v1/dags", tags=["dags"])
async def list_dags(tenant: Tenant, after: FromQuery[str] = "",
                    limit: FromQuery[Limit] = 100) -> DagsPage:
    """The tenant's DAGs by name (`after`: the last name of the previous page)."""
    rows = await dag_store.page(tenant.conn, tenant.tenant_id, after, limit)
    return DagsPage(items=[_view(r) for r in rows],
                    next_after=rows[-1].name if len(rows) == limit else None)


async def _dag(tenant: Tenant, dag_id: uuid.UUID) -> DagRow:
    row = await dag_store.by_id(tenant.conn, tenant.tenant_id, dag_id)
    if row is None:
        raise NotFound(f"no DAG {dag_id}")
    return row


@get("/v1/dags/{dag_id:uuid}", tags=["dags"])
async def get_dag(dag_id: FromPath[uuid.UUID], tenant: Tenant) -> DagView:
    """A DAG with its current definition."""
    row = await _dag(tenant, dag_id)
    dag = await dags.load_dag(tenant.conn, row.id, row.version)
    return _view(row, definition=dag.definition)


@post("/v1/dags/{dag_id:uuid}/runs", status_code=201, tags=["dags"],
      opt=audited("dag.run", "dag", "dag_id", action=roles.SUBMIT))
async def run_dag(dag_id: FromPath[uuid.UUID], tenant: Tenant,
                  data: JSONBody[DagRunRequest | None] = None) -> DagRunCreated:
    """Start a DAG run of the current version: its root nodes are scheduled now, or at `at`."""
    row = await _dag(tenant, dag_id)
    at = (data or DagRunRequest()).at
    async with tenant.conn.transaction():
        run_id, _ = await dags.start_run(tenant.conn, tenant.store, dag=row,
                                         now=tenant.clock.now(), at=at, actor=tenant.actor,
                                         rules=rules_of(tenant.settings))
    run = await dag_store.run_by_id(tenant.conn, tenant.tenant_id, run_id)
    assert run is not None
    tenant.audit.after = {"dag_run_id": str(run.id), "state": run.state}
    return DagRunCreated(id=run.id, dag_id=run.dag_id, dag_version=run.dag_version,
                         state=run.state, due_at=run.due_at)


@get("/v1/dags/{dag_id:uuid}/runs", tags=["dags"])
async def dag_runs(dag_id: FromPath[uuid.UUID], tenant: Tenant,
                   limit: FromQuery[Limit] = 20) -> DagRunsPage:
    """A DAG's runs, newest first, each with its nodes."""
    await _dag(tenant, dag_id)
    rows = await dag_store.runs_of(tenant.conn, tenant.tenant_id, dag_id, limit)
    return DagRunsPage(items=[await run_view(tenant.conn, r) for r in rows])


async def run_view(conn: asyncpg.Connection, run: DagRunRow,
                   nodes: list[DagNodeRow] | None = None) -> DagRunView:
    """A DAG run node by node (the API's and the web UI's), its nodes in topological order
    (`nodes`: an archived DAG run's, else read from the hot tables)."""
    dag = await dags.load_dag(conn, run.dag_id, run.dag_version)
    if nodes is None:
        nodes = (await dag_store.nodes(conn, [run.id]))[run.id]
    progress: dict[str, int] = {"total": len(nodes)}
    views = []
    position = {k: i for i, k in enumerate(dag.order)}
    for n in sorted(nodes, key=lambda n: position[n.key]):
        progress[n.state] = progress.get(n.state, 0) + 1
        spec = dag.nodes[n.key]
        views.append(DagNodeView(
            key=n.key, task=spec.task, state=n.state, trigger_rule=spec.trigger_rule,
            parents=list(dag.parents[n.key]), run_id=n.run_id, run_state=n.run_state,
            generation=n.generation, attempts=n.attempt, ready_at=n.ready_at,
            started_at=n.run_started_at, finished_at=n.finished_at or n.run_finished_at,
            output_ref=n.output_ref,
            last_error=n.last_error if isinstance(n.last_error, dict) else None))
    return DagRunView(id=run.id, dag_id=run.dag_id, dag_version=run.dag_version,
                      state=run.state, trigger=run.trigger, due_at=run.due_at,
                      cancel_requested=run.cancel_requested, created_at=run.created_at,
                      started_at=run.started_at, finished_at=run.finished_at,
                      progress=progress, nodes=views, job_id=run.job_id,
                      scheduled_for=run.scheduled_for)


async def _dag_run(tenant: Tenant, dag_run_id: uuid.UUID) -> DagRunRow:
    run = await dag_store.run_by_id(tenant.conn, tenant.tenant_id, dag_run_id)
    if run is None:
        raise NotFound(f"no DAG run {dag_run_id}")
    return run


@get("/v1/dag-runs/{dag_run_id:uuid}", tags=["dags"], opt=READS_ARCHIVE)
async def get_dag_run(dag_run_id: FromPath[uuid.UUID], tenant: Tenant) -> DagRunView:
    """A DAG run: each node's state, run, attempts and timestamps, and the progress counts.
    Its timeline: GET /v1/dag-runs/{id}/events. One that has left the hot database is read
    from its archive (`archived` true, `archived_at`; docs/RETENTION.md "DAG runs")."""
    run = await dag_store.run_by_id(tenant.conn, tenant.tenant_id, dag_run_id)
    if run is not None:
        return await run_view(tenant.conn, run)
    gone = await archived.read_dag_run(tenant.archive, tenant.tenant_id, dag_run_id)
    assert tenant.archive is not None  # read_dag_run found it there
    view = await run_view(tenant.conn, archived.dag_run_row(gone),
                          await archived.dag_node_rows(tenant.archive, gone))
    return msgspec.structs.replace(view, archived=True, archived_at=gone.archived_at)


@get("/v1/dag-runs/{dag_run_id:uuid}/events", tags=["dags"], opt=READS_ARCHIVE)
async def dag_run_events(dag_run_id: FromPath[uuid.UUID], tenant: Tenant,
                         after: FromQuery[AfterVersion] = 0,
                         limit: FromQuery[EventsLimit] = 100) -> EventsPage:
    """The DAG run's timeline straight from the log: each node made ready (with its run),
    finished (with its run's real start and end) or skipped, cancels and retries with their
    actor, and the outcome; the events after version `after`, `next_after` for the next page.
    An archived DAG run's comes from its archive, paged alike (`archived` true)."""
    if await dag_store.run_by_id(tenant.conn, tenant.tenant_id, dag_run_id) is not None:
        items, next_after = await timeline_page(tenant.conn, dag_run_id, tenant.tenant_id,
                                                after, limit) or ([], None)
        return EventsPage(run_id=dag_run_id, items=items, next_after=next_after)
    gone = await archived.read_dag_run(tenant.archive, tenant.tenant_id, dag_run_id)
    stream = [r for r in archived.dag_run_events(gone) if r.version > after]
    items, next_after = events_page(stream[:limit + 1], limit)
    return EventsPage(run_id=dag_run_id, items=items, next_after=next_after, archived=True,
                      archived_at=gone.archived_at)


@post("/v1/dag-runs/{dag_run_id:uuid}/cancel", status_code=200, tags=["dags"],
      opt=audited("dag_run.cancel", "dag_run", "dag_run_id"))
@archived.refuses_archived_dag_run
async def cancel_dag_run(dag_run_id: FromPath[uuid.UUID], tenant: Tenant,
                         data: JSONBody[DagRunCancelRequest | None] = None) -> DagRunChanged:
    """Cancel a DAG run: nodes not started will not run, running ones are cancelled (a
    running run is asked to stop); it ends `cancelled` when the last of them has."""
    asked = await dags.cancel(tenant.conn, tenant.store, tenant_id=tenant.tenant_id,
                              dag_run_id=dag_run_id, actor=tenant.actor,
                              now=tenant.clock.now(), rules=rules_of(tenant.settings),
                              reason=(data or DagRunCancelRequest()).reason)
    run = await _dag_run(tenant, dag_run_id)
    return DagRunChanged(id=run.id, state=run.state, cancelled_runs=asked)


@post("/v1/dag-runs/{dag_run_id:uuid}/nodes/{key:str}/retry", status_code=200, tags=["dags"],
      opt=audited("dag_run.retry_node", "dag_run", "dag_run_id"))
@archived.refuses_archived_dag_run
async def retry_dag_node(dag_run_id: FromPath[uuid.UUID], key: FromPath[str], tenant: Tenant,
                         data: JSONBody[DagNodeRetryRequest | None] = None) -> DagRunChanged:
    """Re-run the node and everything downstream of it in the same DAG run (recorded as
    `DagRunRetriedFromNode` with who asked). 409 while one of them, or a parent of the node,
    is still running."""
    run_id = await dags.retry_from_node(
        tenant.conn, tenant.store, tenant_id=tenant.tenant_id, dag_run_id=dag_run_id, key=key,
        actor=tenant.actor, now=tenant.clock.now(), rules=rules_of(tenant.settings),
        reason=(data or DagNodeRetryRequest()).reason)
    tenant.audit.after = {"node": key, "run_id": str(run_id)}
    run = await _dag_run(tenant, dag_run_id)
    dag = await dags.load_dag(tenant.conn, run.dag_id, run.dag_version)
    return DagRunChanged(id=run.id, state=run.state, key=key, run_id=run_id,
                         reset=list(dag.downstream(key)))


ROUTES = [define_dag, list_dags, get_dag, run_dag, dag_runs, get_dag_run, dag_run_events,
          cancel_dag_run, retry_dag_node]
