"""Workflow ids (issue 40 item 3): start a workflow run under the caller's own id and
signal-with-start, over `ostinato.runs.workflow_ids`.

Their own routes under /v1/workflows/{task}/{workflow_id}, not a field of POST /v1/jobs: the id
names a run (as Temporal's workflow id does), the run is made in the request's transaction
(not by the scheduler's next poll) under the id's advisory lock, so the response names the
run, and the job route keeps its one meaning (a job, run by the scheduler)."""

from __future__ import annotations

import re

from litestar import Response, post
from litestar.params import FromPath, JSONBody

from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput
from ostinato.runs import workflow_ids as runs_wids
from ostinato.telemetry import tracing
from ostinato.wire.api import SignalWithStartRequest, WorkflowStarted, WorkflowStartRequest
from services.api.auditing import audited
from services.api.scope import Tenant

_TASK = re.compile(r"^[A-Za-z0-9][\w.:-]*$")


def _task(task: str) -> str:
    """A task name as jobs take it; a DAG (`dag:<id>`) is no workflow a signal can reach."""
    if not 0 < len(task) <= 200 or not _TASK.match(task) or task.startswith("dag:"):
        raise InvalidInput(f"{task!r} is not a task name (a DAG takes no workflow id)",
                           errors=[{"field": "task", "message": "invalid task"}])
    return task


async def _answer(tenant: Tenant, task: str, workflow_id: str,
                  done: runs_wids.WorkflowStart) -> Response[WorkflowStarted]:
    status = 201 if done.started else 200
    tenant.audit.target_id, tenant.audit.status = str(done.run_id), status
    tenant.audit.after = {"workflow_id": workflow_id, "task": task, "started": done.started}
    return Response(WorkflowStarted(run_id=done.run_id, workflow_id=workflow_id, task=task,
                                    started=done.started, signal_id=done.signal_id,
                                    delivered=done.delivered), status_code=status)


@post("/v1/workflows/{task:str}/{workflow_id:str}/start", status_code=201, tags=["workflows"],
      opt=audited("workflow.start", "run", action=roles.SUBMIT))
async def start(task: FromPath[str], workflow_id: FromPath[str], tenant: Tenant,
                data: JSONBody[WorkflowStartRequest | None] = None) -> Response[WorkflowStarted]:
    """Start a run of `task` named `workflow_id` (201). A run with that id still running is a
    409 naming it; an ended one is reused per `id_reuse_policy`. The same `idempotency_key`
    again answers the first start (200, `started` false)."""
    body = data or WorkflowStartRequest()
    settings = tenant.settings
    done = await runs_wids.start_workflow(
        tenant.conn, tenant.store, tenant.clock, tenant_id=tenant.tenant_id, task=_task(task),
        workflow_id=workflow_id, payload=body.payload, policy=body.id_reuse_policy,
        idempotency_key=body.idempotency_key, pools=settings.pool_names, pool=body.pool,
        max_payload_bytes=settings.max_payload_bytes, actor=tenant.actor,
        traceparent=tracing.current_traceparent())
    return await _answer(tenant, task, workflow_id, done)


@post("/v1/workflows/{task:str}/{workflow_id:str}/signal-with-start", status_code=201,
      tags=["workflows"], opt=audited("workflow.signal_with_start", "run", action=roles.SUBMIT))
async def signal_with_start(task: FromPath[str], workflow_id: FromPath[str], tenant: Tenant,
                            data: JSONBody[SignalWithStartRequest],
                            ) -> Response[WorkflowStarted]:
    """Send `signal` to the running run of `workflow_id`, starting it (with `payload`) first
    if none runs, in one transaction: two concurrent calls start one run. 201 when this call
    started the run, else 200."""
    settings = tenant.settings
    done = await runs_wids.start_workflow(
        tenant.conn, tenant.store, tenant.clock, tenant_id=tenant.tenant_id, task=_task(task),
        workflow_id=workflow_id, payload=data.payload, policy=data.id_reuse_policy,
        idempotency_key=data.idempotency_key, pools=settings.pool_names, pool=data.pool,
        max_payload_bytes=settings.max_payload_bytes, actor=tenant.actor,
        signal=runs_wids.Signal(data.signal, data.signal_payload),
        traceparent=tracing.current_traceparent())
    return await _answer(tenant, task, workflow_id, done)


ROUTES = [start, signal_with_start]
