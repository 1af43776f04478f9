"""GET /v1/tasks: per task and handler version, the tenant's runs waiting, running and
suspended, and the live workers serving that version, so an old version can be drained before
its code is removed (docs/WORKFLOWS.md, versioning)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from litestar import get
from litestar.params import FromQuery, QueryParameter

from ostinato.stores import runs as run_store
from ostinato.wire.api import TasksPage, TaskVersionView
from ostinato.workers import registry
from services.api.scope import Tenant

TaskName = Annotated[str | None, QueryParameter(min_length=1, max_length=256)]


@get("/v1/tasks", tags=["runs"])
async def list_tasks(tenant: Tenant, task: FromQuery[TaskName] = None) -> TasksPage:
    """Every task with runs not final or with live workers, per handler version."""
    ttl = timedelta(seconds=tenant.settings.worker_ttl_seconds)
    counts = await run_store.task_version_counts(tenant.conn, tenant.tenant_id, task)
    serving = await registry.serving_workers(tenant.conn, tenant.tenant_id,
                                             tenant.clock.db_now(), ttl)
    views: dict[tuple[str, str | None], TaskVersionView] = {
        (c.task, c.version): TaskVersionView(task=c.task, version=c.version, waiting=c.waiting,
                                             running=c.running, suspended=c.suspended)
        for c in counts}
    for s in serving:
        if task is None or s.task == task:
            view = views.setdefault((s.task, s.version),
                                    TaskVersionView(task=s.task, version=s.version))
            view.workers = s.workers
    for view in views.values():
        pending = view.waiting + view.running + view.suspended
        view.drained = view.version is not None and pending == 0
        view.stranded = view.version is not None and view.workers == 0 and (
            view.waiting + view.suspended) > 0
    return TasksPage(items=sorted(views.values(),
                                  key=lambda v: (v.task, v.version is not None, v.version or "")))


ROUTES = [list_tasks]
