"""Workflow workers killed with -9, with the five services as real processes and leases of 3 s:
one workflow between two steps, one inside a step. Each resumes on another worker after the
lease expires, and every step's effect (a row of `step_effects`, written with no dedupe at
all) exists exactly once: the steps finished before the kill are replayed, not rerun.

No assertion compares a duration with a number: what happened when is read from the run-event
log and the effects table."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ostinato.testing.lab import Lab
from ostinato.testing.load import RETRY
from ostinato.testing.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(120)]
STEPS = 4


def wf_job(key: str, **payload: Any) -> dict[str, Any]:
    return {"name": key, "task": "wf", "idempotency_key": key, "retry": RETRY,
            "payload": {"steps": STEPS, **payload}}


async def run_of(lab: Lab, job_id: str) -> dict[str, Any]:
    rows = await lab.db.fetch("SELECT id, state, steps_done, attempt FROM runs "
                              "WHERE job_id = $1", uuid.UUID(job_id))
    return dict(rows[0]) if rows else {}


async def test_killed_workflows_resume_on_another_worker_without_rerunning_finished_steps(
        lab: Lab) -> None:
    await lab.start()
    a = await lab.worker("a", concurrency=4, claim_wait_seconds=1)
    between, inside = await lab.submit([
        wf_job("between", pause_after=1, pause_between=60),  # killed after step 1, before 2
        wf_job("inside", slow_step=2, sleep_in=60),  # killed inside step 2, before its effect
    ])

    async def both_at_step_2() -> bool:
        runs = [await run_of(lab, j) for j in (between, inside)]
        return all(r and r["state"] == "running" and r["steps_done"] == 2 for r in runs)

    await until(both_at_step_2, 30, "both workflows to record steps 0 and 1 on worker a")
    b = await lab.worker("b", concurrency=4, claim_wait_seconds=1)
    a.kill()

    async def both_succeeded() -> bool:
        runs = [await run_of(lab, j) for j in (between, inside)]
        return all(r.get("state") == "succeeded" for r in runs)

    await until(both_succeeded, 60, "both workflows to finish on worker b")
    for job_id in (between, inside):
        run = await run_of(lab, job_id)
        assert run["steps_done"] == STEPS and run["attempt"] == 2
        effects = [dict(r) for r in await lab.db.fetch(
            "SELECT seq, attempt, worker_id FROM step_effects WHERE run_id = $1 ORDER BY seq",
            run["id"])]
        assert [e["seq"] for e in effects] == list(range(STEPS))  # each step's effect once
        assert [(e["worker_id"], e["attempt"]) for e in effects] == [
            ("a", 1), ("a", 1), ("b", 2), ("b", 2)]
        events = [dict(r) for r in await lab.db.fetch(
            "SELECT type, actor, data FROM events WHERE stream_id = $1 ORDER BY version",
            run["id"])]
        steps = [(e["data"]["seq"], e["actor"]) for e in events if e["type"] == "StepCompleted"]
        assert steps == [(0, "worker:a"), (1, "worker:a"), (2, "worker:b"), (3, "worker:b")]
        types = [e["type"] for e in events]
        # the lease of a's attempt expired after its two steps, and b's attempt came after it
        assert types.index("LeaseExpired") > types.index("StepCompleted")
        assert types.index("LeaseExpired") < [i for i, e in enumerate(events)
                                              if e["type"] == "RunStarted"][1]
        assert types[-1] == "RunSucceeded"
    assert b.alive
