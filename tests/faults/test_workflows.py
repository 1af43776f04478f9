"""Workflow workers killed with -9, with the five services as real processes and leases of 3 s:
one workflow between two steps, one inside a step. Each resumes on another worker after the
lease expires, and every step's effect (a row of `step_effects`, written with no dedupe at
all) exists exactly once: the steps finished before the kill are replayed, not rerun.

No assertion compares a duration with a number: what happened when is read from the run-event
log and the effects table."""

from __future__ import annotations

import asyncio
import signal
import uuid
from datetime import datetime
from typing import Any

import pytest

from tests.helpers.lab.lab import Lab
from tests.helpers.lab.load import RETRY
from tests.helpers.waiting import until

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


async def test_a_paused_workflow_worker_cannot_record_the_step_another_worker_took_over(
        lab: Lab) -> None:
    await lab.start()
    a = await lab.worker("a", concurrency=4, claim_wait_seconds=1)
    [job_id] = await lab.submit([wf_job("paused", slow_step=1, sleep_in=4)])

    async def inside_step_1() -> bool:
        run = await run_of(lab, job_id)
        return bool(run) and run["state"] == "running" and run["steps_done"] == 1

    await until(inside_step_1, 30, "worker a to be inside step 1")
    a.send(signal.SIGSTOP)  # frozen inside step 1, past its 3 s lease
    b = await lab.worker("b", concurrency=4, claim_wait_seconds=1)

    async def finished_by_b() -> bool:
        return (await run_of(lab, job_id)).get("state") == "succeeded"

    await until(finished_by_b, 40, "worker b to take the run over and finish it")
    run_id = (await run_of(lab, job_id))["id"]
    woke_at = a.log_mark()
    a.send(signal.SIGCONT)  # a wakes inside step 1, believing it still holds the run

    async def a_gave_up() -> bool:
        return any(r.get("event") in ("run.outcome_withheld", "run.lease_lost")
                   for r in a.records(since=woke_at))

    await until(a_gave_up, 15, "worker a to learn it lost the run")
    events = [dict(r) for r in await lab.db.fetch(
        "SELECT type, actor, data FROM events WHERE stream_id = $1 ORDER BY version", run_id)]
    steps = [(e["data"]["seq"], e["actor"]) for e in events if e["type"] == "StepCompleted"]
    # every position recorded once; step 1 by b, never by the paused a
    assert steps == [(0, "worker:a"), (1, "worker:b"), (2, "worker:b"), (3, "worker:b")]
    stale = [e for e in events if e["type"] == "StaleWriteRejected"]
    # a's first word after waking (its heartbeat, or its step 1 if that finished first) was
    # refused with its old token; nothing it said changed the run
    assert stale and all(e["actor"] == "worker:a" for e in stale)
    assert {e["data"]["operation"] for e in stale} <= {"heartbeat", "step"}
    assert all(e["data"]["presented_token"] < e["data"]["current_token"] for e in stale)
    recorded = await lab.db.fetch("SELECT seq FROM run_steps WHERE run_id = $1 ORDER BY seq",
                                  run_id)
    assert [r["seq"] for r in recorded] == list(range(STEPS))
    assert a.alive and b.alive


@pytest.mark.timeout(300)
@pytest.mark.restarts_servers
async def test_a_sleeping_workflow_survives_a_restart_of_everything_and_wakes_after_it(
        lab: Lab) -> None:
    await lab.start()
    a = await lab.worker("a", concurrency=4, claim_wait_seconds=1)
    [job_id] = await lab.submit([wf_job("sleepy", steps=2, sleep_after=0, sleep_seconds=45)])

    async def suspended() -> bool:
        return (await run_of(lab, job_id)).get("state") == "suspended"

    await until(suspended, 30, "the workflow to suspend on its timer")
    run_id = (await run_of(lab, job_id))["id"]
    [wake_at] = [r["wake_at"] for r in await lab.db.fetch(
        "SELECT wake_at FROM runs WHERE id = $1", run_id)]
    stopped_at = await lab.db.now()
    a.kill()
    await asyncio.to_thread(lab.cluster.stop)  # every service
    for server in ("kafka", "postgres"):
        await lab.server_down(server)
    for server in ("postgres", "kafka"):
        await lab.server_up(server)
    await asyncio.to_thread(lab.cluster.start)  # the services again: same database, topics
    await lab.worker("b", concurrency=4, claim_wait_seconds=1)

    async def succeeded() -> bool:
        return (await run_of(lab, job_id)).get("state") == "succeeded"

    await until(succeeded, 120, "the workflow to wake and finish")
    events = [dict(r) for r in await lab.db.fetch(
        "SELECT type, actor, data, recorded_at FROM events WHERE stream_id = $1 "
        "ORDER BY version", run_id)]
    fired = next(e for e in events if e["type"] == "TimerFired")
    suspend = next(e for e in events if e["type"] == "RunSuspended")
    assert datetime.fromisoformat(fired["data"]["due_at"]) == wake_at
    assert datetime.fromisoformat(suspend["data"]["wake_at"]) == wake_at
    # by the database clock: suspended before the restart, fired after it and not before due
    assert stopped_at < wake_at <= fired["recorded_at"]
    steps = [(e["data"]["seq"], e["actor"]) for e in events if e["type"] == "StepCompleted"]
    assert steps == [(0, "worker:a"), (2, "worker:b")]  # position 1 is the timer
    effects = await lab.db.fetch("SELECT seq FROM step_effects WHERE run_id = $1 ORDER BY seq",
                                 run_id)
    assert [e["seq"] for e in effects] == [0, 1]


async def test_a_worker_killed_inside_a_compensation_resumes_it_and_each_runs_once(
        lab: Lab) -> None:
    """A saga whose step 3 fails for good: the compensations of steps 2, 1 and 0 run in that
    order; worker a is killed -9 inside the compensation of step 1, worker b resumes after the
    lease expires and every compensation's effect exists once."""
    await lab.start()
    a = await lab.worker("a", concurrency=4, claim_wait_seconds=1)
    [job] = await lab.submit([wf_job("saga", compensate=True, fail_at=3,
                                     slow_compensation=1, sleep_in=60)])

    async def compensating_step_1() -> bool:
        run = await run_of(lab, job)
        return bool(run) and await lab.db.fetchval(
            "SELECT count(*) FROM run_steps WHERE run_id = $1 AND name = 'compensate:s2'",
            run["id"]) == 1

    await until(compensating_step_1, 30, "worker a to compensate step 2")
    b = await lab.worker("b", concurrency=4, claim_wait_seconds=1)
    a.kill()

    async def dead_lettered() -> bool:
        return (await run_of(lab, job)).get("state") == "dead_lettered"

    await until(dead_lettered, 60, "the saga to end in the dead letters on worker b")
    run = await run_of(lab, job)
    effects = [(r["seq"], r["worker_id"], r["attempt"]) for r in await lab.db.fetch(
        "SELECT seq, worker_id, attempt FROM step_effects WHERE run_id = $1 "
        "ORDER BY applied_at", run["id"])]
    # steps 0..2 on a, then their compensations in reverse: step 2's on a, 1's and 0's on b
    assert effects == [(0, "a", 1), (1, "a", 1), (2, "a", 1), (-3, "a", 1), (-2, "b", 2),
                       (-1, "b", 2)]
    names = [r["name"] for r in await lab.db.fetch(
        "SELECT name FROM run_steps WHERE run_id = $1 ORDER BY seq", run["id"])]
    assert names == ["s0", "s1", "s2", "s3", "compensate:s2", "compensate:s1", "compensate:s0"]
    error = await lab.db.fetchval("SELECT last_error->>'type' FROM runs WHERE id = $1", run["id"])
    assert error == "declined"  # the saga ends with the step's own error
    assert b.alive
