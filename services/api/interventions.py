"""Route handlers for operator interventions on a run (docs/WORKFLOWS.md, "Operator
interventions"): retry a failed step in place, skip a step with its output, restart from a
position, mark a run succeeded or failed; and the steps they set aside. Each is an event with
the caller and the body's `reason`, never a new run. Tenant-scoped through `scope.TenantScope`,
over `ostinato.runs.interventions`."""

from __future__ import annotations

import uuid
from typing import Annotated

from litestar import get, post
from litestar.params import FromPath, FromQuery, JSONBody, PathParameter, QueryParameter

from ostinato.runs import interventions
from ostinato.runs.interventions import Intervened
from ostinato.stores import runs as run_store
from ostinato.stores import steps as step_store
from ostinato.wire.api import (
    FailRunRequest,
    InterventionDone,
    InterventionRequest,
    RestartRequest,
    SetAsideStepsPage,
    SetAsideStepView,
    SkipStepRequest,
    SucceedRunRequest,
)
from services.api import archived
from services.api.archived import refuses_archived
from services.api.auditing import audited
from services.api.scope import Tenant, TenantScope

Limit = Annotated[int, QueryParameter(ge=1, le=1000)]
AfterVersion = Annotated[int, QueryParameter(ge=0, le=2**31 - 1)]
AfterSeq = Annotated[int, QueryParameter(ge=-1, le=2**31 - 1)]
Seq = Annotated[int, PathParameter(ge=0, le=2**31 - 1)]


def _done(run_id: uuid.UUID, done: Intervened, tenant: TenantScope) -> InterventionDone:
    tenant.audit.after = {"state": done.state, "version": done.version}
    return InterventionDone(run_id=run_id, state=done.state, version=done.version,
                            events=done.events, children_cancelled=done.children_cancelled)


@post("/v1/runs/{run_id:uuid}/steps/{seq:int}/retry", status_code=200, tags=["interventions"],
      opt=audited("run.step_retry", "run", "run_id"))
@refuses_archived
async def retry_step(run_id: FromPath[uuid.UUID], seq: FromPath[Seq], tenant: Tenant,
                     data: JSONBody[InterventionRequest]) -> InterventionDone:
    """Retry the failed step at position `seq` in place: its record and later ones are set
    aside (GET .../steps/set-aside), and the run's next attempt runs it again. A dead-lettered
    run is reopened, a suspended one woken; a running one answers 409."""
    return _done(run_id, await interventions.retry_step(
        tenant.conn, tenant.store, tenant_id=tenant.tenant_id, run_id=run_id, seq=seq,
        actor=tenant.actor, reason=data.reason), tenant)


@post("/v1/runs/{run_id:uuid}/steps/{seq:int}/skip", status_code=200, tags=["interventions"],
      opt=audited("run.step_skip", "run", "run_id"))
@refuses_archived
async def skip_step(run_id: FromPath[uuid.UUID], seq: FromPath[Seq], tenant: Tenant,
                    data: JSONBody[SkipStepRequest]) -> InterventionDone:
    """Skip the step at position `seq` (a failed one, or the one where the run stopped) by
    supplying its `output`: recorded as succeeded, supplied by the caller; the workflow gets
    the output when it replays the step. Later records are set aside; the run is reopened."""
    return _done(run_id, await interventions.skip_step(
        tenant.conn, tenant.store, tenant_id=tenant.tenant_id, run_id=run_id, seq=seq,
        name=data.name, output=data.output, actor=tenant.actor, reason=data.reason,
        max_output_bytes=tenant.settings.max_payload_bytes), tenant)


@post("/v1/runs/{run_id:uuid}/restart", status_code=200, tags=["interventions"],
      opt=audited("run.restart", "run", "run_id"))
@refuses_archived
async def restart(run_id: FromPath[uuid.UUID], tenant: Tenant,
                  data: JSONBody[RestartRequest]) -> InterventionDone:
    """Restart the workflow from position `from_seq`: the records from there on are set aside
    (kept in the history) and its next attempt runs those steps again."""
    return _done(run_id, await interventions.restart(
        tenant.conn, tenant.store, tenant_id=tenant.tenant_id, run_id=run_id,
        from_seq=data.from_seq, actor=tenant.actor, reason=data.reason), tenant)


@post("/v1/runs/{run_id:uuid}/succeed", status_code=200, tags=["interventions"],
      opt=audited("run.succeed", "run", "run_id"))
@refuses_archived
async def succeed(run_id: FromPath[uuid.UUID], tenant: Tenant,
                  data: JSONBody[SucceedRunRequest]) -> InterventionDone:
    """Mark a run that is not running succeeded, with `output` as its output. Nothing runs (no
    compensation); its children that are not final are cancelled."""
    return _done(run_id, await interventions.mark_succeeded(
        tenant.conn, tenant.store, tenant_id=tenant.tenant_id, run_id=run_id,
        output=data.output, actor=tenant.actor, reason=data.reason,
        max_output_bytes=tenant.settings.max_payload_bytes), tenant)


@post("/v1/runs/{run_id:uuid}/fail", status_code=200, tags=["interventions"],
      opt=audited("run.fail", "run", "run_id"))
@refuses_archived
async def fail(run_id: FromPath[uuid.UUID], tenant: Tenant,
               data: JSONBody[FailRunRequest]) -> InterventionDone:
    """Mark a run that is not running failed for good: dead-lettered (reason operator) with
    `error_type` (default operator_failed) and `message` (default the reason). No compensation
    runs; its children that are not final are cancelled."""
    return _done(run_id, await interventions.mark_failed(
        tenant.conn, tenant.store, tenant_id=tenant.tenant_id, run_id=run_id,
        error_type=data.error_type, message=data.message, actor=tenant.actor,
        reason=data.reason), tenant)


@get("/v1/runs/{run_id:uuid}/steps/set-aside", tags=["interventions"],
     opt={"reads_archive": True})
async def set_aside_steps(run_id: FromPath[uuid.UUID], tenant: Tenant,
                          after_version: FromQuery[AfterVersion] = 0,
                          after_seq: FromQuery[AfterSeq] = -1,
                          limit: FromQuery[Limit] = 100) -> SetAsideStepsPage:
    """The records interventions set aside, in the order they were set aside, then by
    position, after the cursor (`after_version`, `after_seq`). GET .../steps shows the current
    ones. An archived run's come from its archive (`archived` true)."""
    gone = None
    if await run_store.by_id(tenant.conn, tenant.tenant_id, run_id) is None:
        gone = await archived.read(tenant.archive, tenant.tenant_id, run_id)
        page = archived.set_aside_rows(gone, after=(after_version, after_seq), limit=limit)
    else:
        page = await step_store.set_aside_page(tenant.conn, tenant.tenant_id, run_id,
                                               after=(after_version, after_seq), limit=limit)
    last = page[-1] if len(page) == limit else None
    return SetAsideStepsPage(
        run_id=run_id,
        items=[SetAsideStepView(set_aside_version=s.set_aside_version,
                                set_aside_at=s.set_aside_at, seq=s.seq, name=s.name,
                                succeeded=s.succeeded, attempt=s.attempt, tries=s.tries,
                                duration_ms=s.duration_ms, recorded_at=s.recorded_at,
                                output=s.output, output_ref=s.output_ref,
                                error_type=s.error_type, message=s.message,
                                supplied_by=s.supplied_by) for s in page],
        next_after_version=last.set_aside_version if last else None,
        next_after_seq=last.seq if last else None,
        archived=gone is not None, archived_at=gone.archived_at if gone else None)


ROUTES = [retry_step, skip_step, restart, succeed, fail, set_aside_steps]
