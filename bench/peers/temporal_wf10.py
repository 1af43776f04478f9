"""The workflow of bench/peers/temporal_workflow.py, at module level as Temporal's SDK requires
(imported by its measuring process only: `temporalio` is in the bench lock, not the product's):
10 no-op steps returning an int, as `wf10` of bench/workflows.py, each an activity or a local
activity."""
from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

TIMEOUT = timedelta(seconds=60)


@activity.defn(name="noop")
async def noop(i: int) -> int:
    return i


@workflow.defn(name="wf10", sandboxed=False)
class Wf10:
    @workflow.run
    async def run(self, steps: int, local: bool) -> int:
        for i in range(steps):
            if local:
                await workflow.execute_local_activity(noop, i, start_to_close_timeout=TIMEOUT)
            else:
                await workflow.execute_activity(noop, i, start_to_close_timeout=TIMEOUT)
        return steps
