"""A dead worker is found in seconds, not at the end of its lease (issue 39): SDK workers ping
while they hold runs, and the reconciler takes back the runs of a worker silent for
`OSTINATO_WORKER_DEAD_AFTER_SECONDS` through the fenced path of a lease expiry
(`LeaseExpired`, cause `missed_heartbeats`, the token revoked in storage).

The five services run as real processes with leases of 20 s (`LONG_LEASES`), so that "taken back
before the lease ran out" is a wide margin, read from the run-event log and the lease deadline
the database recorded, never a duration compared with a number.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from datetime import datetime
from typing import Any

import pytest

from tests.helpers.lab.invariants import verify, wait_settled
from tests.helpers.lab.lab import Lab
from tests.helpers.lab.load import RETRY, fx_job
from tests.helpers.lab.processes import WorkerProc
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(120)]
LONG_LEASES = {"OSTINATO_LEASE_TTL_SECONDS": "20"}
STEPS = 3


async def events_of(lab: Lab, run_id: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in await lab.db.fetch(
        "SELECT type, actor, epoch, data, recorded_at FROM events WHERE stream_id = $1 "
        "ORDER BY version", uuid.UUID(str(run_id)))]


async def run_of(lab: Lab, job_id: str) -> dict[str, Any]:
    rows = await lab.db.fetch("SELECT id, state, steps_done, attempt, worker_id FROM runs "
                              "WHERE job_id = $1", uuid.UUID(job_id))
    return dict(rows[0]) if rows else {}


async def lease_deadline(lab: Lab, run_id: Any) -> datetime:
    """The attempt's lease deadline as the database holds it now (heartbeats only push it
    later, so a release before this one is before the lease could have run out)."""
    deadline = await lab.db.fetchval("SELECT expires_at FROM attempt_leases WHERE run_id = $1",
                                     run_id)
    assert deadline is not None
    return deadline


def the_release(events: list[dict[str, Any]]) -> dict[str, Any]:
    [expired] = [e for e in events if e["type"] == "LeaseExpired"]
    return expired


async def test_a_worker_killed_mid_step_is_found_dead_and_resumed_before_its_lease_ends(
        lab: Lab) -> None:
    """Two gateway instances: the victim talks to one, the worker taking over to the other
    (liveness is a row in storage, not a gateway's memory)."""
    await lab.start(env=LONG_LEASES)
    await asyncio.to_thread(lab.cluster.spawn, "gateway2", "worker_gateway")
    await until(lambda: lab.db.fetchval("SELECT count(*) = 2 FROM gateway_instances"), 10,
                "both gateway instances to say they are alive")
    a = await lab.worker("a", concurrency=2, claim_wait_seconds=1)
    [job_id] = await lab.submit([{
        "name": "inside", "task": "wf", "idempotency_key": "inside", "retry": RETRY,
        "payload": {"steps": STEPS, "slow_step": 1, "sleep_in": 60}}])

    async def inside_step_1() -> bool:
        run = await run_of(lab, job_id)
        return run.get("state") == "running" and run["steps_done"] == 1

    await until(inside_step_1, 30, "the workflow to record step 0 and enter step 1 on a")
    b = lab.workers["b"] = WorkerProc(
        "b", f"http://127.0.0.1:{lab.cluster.ports['gateway2']}", lab.api_key, lab.effects_url,
        lab.cluster.log_dir, concurrency=2, claim_wait_seconds=1)
    await asyncio.to_thread(lambda: b.start().wait_ready())
    run = await run_of(lab, job_id)
    deadline = await lease_deadline(lab, run["id"])
    a.kill()

    async def succeeded() -> bool:
        return (await run_of(lab, job_id)).get("state") == "succeeded"

    await until(succeeded, 60, "the workflow to finish on worker b")
    events = await events_of(lab, run["id"])
    released = the_release(events)
    assert released["data"]["cause"] == "missed_heartbeats"
    assert released["data"]["worker_id"] == "a" and released["actor"] == "reconciler"
    assert released["recorded_at"] < deadline, "taken back only when the lease ran out"
    started = [e for e in events if e["type"] == "RunStarted"]
    assert [e["actor"] for e in started] == ["worker:a", "worker:b"]
    assert events.index(released) < events.index(started[1])
    # fenced as an expiry: token 1 revoked (the run's became 2), b's claim got a higher one
    assert started[0]["epoch"] == 1 and started[1]["epoch"] > 2
    effects = [dict(r) for r in await lab.db.fetch(
        "SELECT seq, attempt, worker_id FROM step_effects WHERE run_id = $1 ORDER BY seq",
        run["id"])]
    assert [(e["seq"], e["worker_id"]) for e in effects] == [(0, "a"), (1, "b"), (2, "b")]
    assert b.alive


async def test_a_frozen_worker_found_dead_is_refused_when_it_wakes(lab: Lab) -> None:
    """SIGSTOP past the detection: b runs the attempt again; a, woken, is refused by its
    stale token (in the gateway and in the effects database) and applies nothing."""
    await lab.start(env=LONG_LEASES)
    a = await lab.worker("a", concurrency=4, claim_wait_seconds=1)
    # frozen in the sleep; woken, it asks the gateway (heartbeat) right before the effect
    job_ids = await lab.submit([fx_job(f"frozen-{i}", sleep=3, heartbeat=True, slow_attempts=1)
                                for i in range(2)])

    async def held_by_a() -> bool:
        runs = [await run_of(lab, j) for j in job_ids]
        return all(r.get("state") == "running" and r["worker_id"] == "a" for r in runs)

    await until(held_by_a, 15, "worker a to hold both runs")
    deadlines = {j: await lease_deadline(lab, (await run_of(lab, j))["id"]) for j in job_ids}
    a.send(signal.SIGSTOP)
    b = await lab.worker("b", concurrency=4, claim_wait_seconds=1)

    async def done_by_b() -> bool:
        runs = [await run_of(lab, j) for j in job_ids]
        return all(r["state"] == "succeeded" and r["worker_id"] == "b" for r in runs)

    await until(done_by_b, 30, "b to take over and finish both runs")
    a.send(signal.SIGCONT)  # a wakes believing it still holds both runs

    async def refused() -> list[dict[str, Any]]:
        found = []
        for job_id in job_ids:
            stale = [e for e in await events_of(lab, (await run_of(lab, job_id))["id"])
                     if e["type"] == "StaleWriteRejected"]
            if not stale:
                return []
            found.append(stale[0])
        return found

    for event in await until(refused, 30, "a's stale writes to be refused"):
        assert event["actor"] == "worker:a" and event["data"]["operation"] == "heartbeat"
        assert event["data"]["presented_token"] == 1 < event["data"]["current_token"]
    for job_id in job_ids:
        events = await events_of(lab, (await run_of(lab, job_id))["id"])
        released = the_release(events)
        assert released["data"]["cause"] == "missed_heartbeats"
        assert released["recorded_at"] < deadlines[job_id]
    missing, open_runs = await wait_settled(lab.db, job_ids, 30)
    verdict = await verify(lab.db, job_ids)
    assert (missing, open_runs) == (0, 0), verdict.problems()
    assert verdict.problems() == []
    assert verdict.succeeded == verdict.runs == len(job_ids) == verdict.effects
    effects = await lab.db.fetch("SELECT worker_id FROM effects")
    assert [e["worker_id"] for e in effects] == ["b", "b"]  # a applied nothing, b each once
    assert a.alive and b.alive
    assert await asyncio.to_thread(a.stop) == 0
