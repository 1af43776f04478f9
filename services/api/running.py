"""The step a running workflow is executing (docs/WORKFLOW_STEPS.md, "while a step runs"): kept on
its attempt's lease by the worker-gateway when the SDK says the step began, read here for
`GET /v1/runs/{id}` and as the last item of `GET /v1/runs/{id}/steps`."""

from __future__ import annotations

import uuid

import asyncpg

from ostinato.domain.states import RunState
from ostinato.leases import attempts as attempt_leases
from ostinato.stores.runs import RunRow
from ostinato.wire.api import RunningStepView, StepView


async def running_step(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                       run: RunRow) -> RunningStepView | None:
    """The run's executing step; None unless it is running and its attempt said a step began
    that is not recorded yet (no read at all for a run in another state)."""
    if run.state != RunState.RUNNING:
        return None
    found = (await attempt_leases.running_steps(conn, tenant_id, [run.id])).get(run.id)
    return None if found is None else RunningStepView(seq=found.seq, name=found.name,
                                                     since=found.since)


def running_item(step: RunningStepView, attempt: int) -> StepView:
    """The executing step as the last item of a steps page: state running, nothing recorded."""
    return StepView(seq=step.seq, name=step.name, succeeded=False, attempt=attempt, tries=0,
                    duration_ms=0.0, recorded_at=None, state="running", started_at=step.since)
