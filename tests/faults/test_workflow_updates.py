"""An update survives the kill -9 of the worker handling it (issue 40 item 3): the five services
as real processes, leases of 3 s. The update is taken (recorded) by the workflow on worker a,
which is killed inside the handler's step; worker b resumes the run, replays the taken update,
runs the step once and records the answer, which the caller awaiting it receives; the same
idempotency key then returns the same answer.

No assertion compares a duration with a number: what happened is read from the run-event log,
the effects table and the API's answers."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.helpers.lab.lab import Lab
from tests.helpers.lab.load import RETRY
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(180)]


async def run_of(lab: Lab, job_id: str) -> dict[str, Any]:
    rows = await lab.db.fetch("SELECT id, state, steps_done, attempt FROM runs "
                              "WHERE job_id = $1", uuid.UUID(job_id))
    return dict(rows[0]) if rows else {}


async def test_an_update_taken_by_a_killed_worker_is_answered_once_by_the_next(
        lab: Lab) -> None:
    await lab.start()
    a = await lab.worker("a", concurrency=4, claim_wait_seconds=1)
    # attempt 1 waits for the update; attempt 2 (woken by it) sleeps inside the handler's step
    [job] = await lab.submit([{"name": "upd", "task": "upd", "idempotency_key": "upd",
                               "retry": RETRY, "payload": {"sleep_in": 120,
                                                           "slow_attempt": 2}}])

    async def waiting() -> bool:
        return (await run_of(lab, job)).get("state") == "suspended"

    await until(waiting, 60, "the workflow to wait for an update")
    run_id = (await run_of(lab, job))["id"]
    url = f"/v1/runs/{run_id}/updates"
    async with lab.client() as http:
        r = await http.post(url, json={"name": "work", "payload": {"n": 1},
                                       "idempotency_key": "u-1"})
        assert r.status_code == 202, r.text
        update_id = r.json()["update_id"]

        async def inside_the_handler() -> bool:
            run = await run_of(lab, job)
            return run.get("state") == "running" and run.get("attempt") == 2

        await until(inside_the_handler, 60, "worker a to take the update")
        b = await lab.worker("b", concurrency=4, claim_wait_seconds=1)
        a.kill()

        async def answered() -> dict[str, Any] | None:
            r = await http.get(f"{url}/{update_id}", params={"wait": "30s"}, timeout=60)
            assert r.status_code == 200, r.text
            return r.json() if r.json()["state"] != "pending" else None

        view = await until(answered, 150, "the update's answer")
        assert view["state"] == "completed" and view["taken"] is True
        assert view["output"] == {"seq": 0, "worker": "b"}
        again = await http.post(url, json={"name": "work", "payload": {"n": 1},
                                           "idempotency_key": "u-1"})
        assert again.status_code == 200 and again.json()["update_id"] == update_id
        assert again.json()["created"] is False and again.json()["output"] == view["output"]

    async def succeeded() -> bool:
        return (await run_of(lab, job)).get("state") == "succeeded"

    await until(succeeded, 60, "the workflow to end on worker b")
    effects = [dict(r) for r in await lab.db.fetch(
        "SELECT seq, attempt, worker_id FROM step_effects WHERE run_id = $1", run_id)]
    assert effects == [{"seq": 0, "attempt": 3, "worker_id": "b"}]  # the step ran once
    events = [dict(r) for r in await lab.db.fetch(
        "SELECT type, actor, data FROM events WHERE stream_id = $1 ORDER BY version", run_id)]
    delivered = [e for e in events if e["type"] == "SignalDelivered"]
    assert len(delivered) == 1 and delivered[0]["data"]["seq"] == 0  # taken once, replayed
    replies = [e for e in events if e["type"] == "StepCompleted"
               and e["data"]["name"].startswith("reply:")]
    assert [e["actor"] for e in replies] == ["worker:b"]
    types = [e["type"] for e in events]
    assert types.index("LeaseExpired") < types.index("RunSucceeded")
    assert b.alive
