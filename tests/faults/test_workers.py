"""Worker processes killed, frozen and stopped mid-run, with the five services as real processes
and leases of 3 s. Each test ends with the common check (ostinato.testing.faults.verify): every
accepted job ran, no effect was applied twice, every run is final, every run's story is
consistent.

Workers long-poll their claims. A poll left open by a worker that died or stopped must lease
nothing (the gateway watches for the client hanging up; the two tests at the end); the
lease-recovery tests give their workers a 1 s poll so that what they measure is lease expiry
alone.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from typing import Any

import pytest

from ostinato.testing.faults import Lab, fx_job, metric_total, scrape, verify, wait_settled

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(120)]
TTL = 3.0  # OSTINATO_LEASE_TTL_SECONDS in FAULT_ENV


async def events_of(lab: Lab, run_id: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in await lab.db.fetch(
        "SELECT version, type, actor, epoch, data, recorded_at FROM events "
        "WHERE stream_id = $1 ORDER BY version", uuid.UUID(str(run_id)))]


async def runs_of(lab: Lab, job_ids: list[str]) -> list[dict[str, Any]]:
    return [dict(r) for r in await lab.db.fetch(
        "SELECT id, job_id, state, worker_id, attempt, fencing_token FROM runs "
        "WHERE job_id = ANY($1::uuid[])", [uuid.UUID(j) for j in job_ids])]


async def wait_for(probe: Any, seconds: float, what: str) -> Any:
    """Poll `probe()` (async) until it returns something truthy; fail after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        found = await probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds}s waiting for {what}")
        await asyncio.sleep(0.1)


async def running_on(lab: Lab, job_ids: list[str], worker: str) -> bool:
    runs = await runs_of(lab, job_ids)
    return len(runs) == len(job_ids) and all(
        r["state"] == "running" and r["worker_id"] == worker for r in runs)


async def settle_and_verify(lab: Lab, job_ids: list[str], seconds: float = 30) -> None:
    missing, open_runs = await wait_settled(lab.db, job_ids, seconds)
    verdict = await verify(lab.db, job_ids)
    assert (missing, open_runs) == (0, 0), verdict.problems()
    assert verdict.problems() == []
    assert verdict.succeeded == verdict.runs == len(job_ids) == verdict.effects


async def test_worker_killed_mid_run_is_retried_on_another_worker_after_lease_expiry(
        lab: Lab) -> None:
    await lab.start()
    a = await lab.worker("a", concurrency=16, claim_wait_seconds=1)
    # Half the runs are killed before their effect, half after it (before the outcome).
    # Only the first attempt is slow (slow_attempts=1): the retry runs at once.
    jobs = [fx_job(f"before-{i}", sleep=30, slow_attempts=1) for i in range(6)] + \
           [fx_job(f"after-{i}", hold=30, slow_attempts=1) for i in range(6)]
    job_ids = await lab.submit(jobs)
    await wait_for(lambda: running_on(lab, job_ids, "a"), 15, "worker a to hold every run")
    await wait_for(lambda: lab.db.fetchval("SELECT count(*) >= 6 FROM effects"), 10,
                   "the 'after' runs to apply their effect")
    b = await lab.worker("b", concurrency=16, claim_wait_seconds=1)
    killed_at = await lab.db.fetchval("SELECT clock_timestamp()")
    a.kill()

    await settle_and_verify(lab, job_ids, seconds=40)
    for run in await runs_of(lab, job_ids):
        events = await events_of(lab, run["id"])
        types = [e["type"] for e in events]
        assert types[:3] == ["RunScheduled", "RunQueued", "RunStarted"]
        assert types[3:5] == ["LeaseExpired", "RetryScheduled"], types
        started = [e for e in events if e["type"] == "RunStarted"]
        assert [e["actor"] for e in started] == ["worker:a", "worker:b"]
        # the expiry revoked token 1 (the run's token became 2): b's claim got a higher one
        assert started[0]["epoch"] == 1 and started[1]["epoch"] > 2
        expired = next(e for e in events if e["type"] == "LeaseExpired")
        lag = (expired["recorded_at"] - killed_at).total_seconds()
        assert 0 < lag <= TTL + 2, f"lease expired {lag:.2f}s after the kill"
        recovered = (started[1]["recorded_at"] - killed_at).total_seconds()
        assert recovered <= TTL + 5, f"run restarted {recovered:.2f}s after the kill"
        assert events[-1]["type"] == "RunSucceeded" and events[-1]["actor"] == "worker:b"
    effects = {r["run_id"]: dict(r) for r in await lab.db.fetch("SELECT * FROM effects")}
    for run in await runs_of(lab, job_ids):
        effect = effects[run["id"]]
        # applied once: by a before the kill ('after' runs), else by b's second attempt
        assert (effect["worker_id"], effect["attempt"]) in {("a", 1), ("b", 2)}
    assert sum(1 for e in effects.values() if e["worker_id"] == "a") == 6
    reconciler = await scrape(lab.cluster.ports["reconciler"])
    assert metric_total(reconciler, "ostinato_lease_expirations_total") >= 12
    assert b.alive


async def test_paused_worker_is_fenced_off_when_it_wakes(lab: Lab) -> None:
    await lab.start()
    a = await lab.worker("a", concurrency=16, claim_wait_seconds=1)
    # The effect comes after a sleep: a is frozen in it. Some runs heartbeat right before the
    # effect (the SDK's advice), the others rely on the fence in the effects database.
    jobs = [fx_job(f"paused-{i}", sleep=2, heartbeat=i % 2 == 0) for i in range(6)]
    job_ids = await lab.submit(jobs)
    await wait_for(lambda: running_on(lab, job_ids, "a"), 15, "worker a to hold every run")
    a.send(signal.SIGSTOP)
    b = await lab.worker("b", concurrency=16, claim_wait_seconds=1)

    async def all_done_by_b() -> bool:
        runs = await runs_of(lab, job_ids)
        return all(r["state"] == "succeeded" and r["worker_id"] == "b" for r in runs)

    await wait_for(all_done_by_b, 25, "b to take over and finish every run")
    a.send(signal.SIGCONT)  # a wakes up believing it still holds six runs

    async def rejected() -> list[dict[str, Any]]:
        found = []
        for run in await runs_of(lab, job_ids):
            stale = [e for e in await events_of(lab, run["id"])
                     if e["type"] == "StaleWriteRejected"]
            if not stale:
                return []
            found.append(stale[0])
        return found

    for event in await wait_for(rejected, 10, "a's stale writes to be rejected"):
        assert event["actor"] == "worker:a" and event["data"]["worker_id"] == "a"
        assert event["data"]["presented_token"] == 1 < event["data"]["current_token"]
        assert event["data"]["operation"] in ("heartbeat", "complete")
    await asyncio.sleep(1)  # anything else a would still try, it has tried by now
    await settle_and_verify(lab, job_ids)
    effects = await lab.db.fetch("SELECT worker_id, fencing_token FROM effects")
    assert {(e["worker_id"], e["fencing_token"] > 1) for e in effects} == {("b", True)}
    assert "run.lease_lost" in a.log_text()
    gateway = await scrape(lab.cluster.ports["worker_gateway"])
    assert metric_total(gateway, "ostinato_stale_writes_rejected_total") >= 6
    assert a.alive and b.alive
    assert await asyncio.to_thread(a.stop) == 0  # a woken worker still stops cleanly


async def test_stopped_worker_releases_its_runs_at_once(lab: Lab) -> None:
    await lab.start()
    a = await lab.worker("a", concurrency=16, grace_seconds=0)
    job_ids = await lab.submit([fx_job(f"released-{i}", sleep=30, slow_attempts=1)
                                for i in range(4)])
    await wait_for(lambda: running_on(lab, job_ids, "a"), 15, "worker a to hold every run")
    await lab.worker("b", concurrency=16)
    stopped_at = await lab.db.fetchval("SELECT clock_timestamp()")
    assert await asyncio.to_thread(a.stop) == 0  # SIGTERM, grace 0: release at once

    await settle_and_verify(lab, job_ids)
    for run in await runs_of(lab, job_ids):
        events = await events_of(lab, run["id"])
        types = [e["type"] for e in events]
        released = types.index("LeaseReleased")
        assert events[released]["actor"] == "worker:a"
        queued = types.index("RunQueued", released)
        assert set(types[released + 1:queued]) <= {"RetryDue", "StaleWriteRejected"}
        back = (events[queued]["recorded_at"] - stopped_at).total_seconds()
        assert back < TTL / 2, f"queued again {back:.2f}s after SIGTERM (lease expiry: {TTL}s)"
        assert events[-1]["actor"] == "worker:b"


async def test_released_runs_are_not_leased_again_to_the_stopping_worker(lab: Lab) -> None:
    await lab.start()
    a = await lab.worker("a", concurrency=16, grace_seconds=0)
    job_ids = await lab.submit([fx_job(f"released-{i}", sleep=30, slow_attempts=1)
                                for i in range(4)])
    await wait_for(lambda: running_on(lab, job_ids, "a"), 15, "worker a to hold every run")
    assert await asyncio.to_thread(a.stop) == 0  # released; a's process is gone
    await asyncio.sleep(0.5)
    b_ready_at = await lab.db.fetchval("SELECT clock_timestamp()")
    await lab.worker("b", concurrency=16)

    await settle_and_verify(lab, job_ids)
    for run in await runs_of(lab, job_ids):
        events = await events_of(lab, run["id"])
        types = [e["type"] for e in events]
        released = types.index("LeaseReleased")
        after = [(e["type"], e["actor"]) for e in events[released:]
                 if e["type"] in ("RunStarted", "LeaseExpired")]
        assert after[0] == ("RunStarted", "worker:b"), after
        restarted = next(e for e in events[released:] if e["type"] == "RunStarted")
        lag = (restarted["recorded_at"] - b_ready_at).total_seconds()
        assert lag < TTL / 2, f"b started the released run only {lag:.2f}s after it came up"


async def test_a_killed_workers_open_claim_leases_nothing(lab: Lab) -> None:
    await lab.start()
    a = await lab.worker("a", concurrency=16)  # the SDK's 10 s long poll
    [first] = await lab.submit([fx_job("first", sleep=30, slow_attempts=1)])
    await wait_for(lambda: running_on(lab, [first], "a"), 15, "worker a to hold the run")
    a.kill()  # a had just claimed: its next long poll is open for ~10 s
    [second] = await lab.submit([fx_job("second")])
    await asyncio.sleep(0.5)
    b_ready_at = await lab.db.fetchval("SELECT clock_timestamp()")
    await lab.worker("b", concurrency=16, claim_wait_seconds=1)

    await settle_and_verify(lab, [first, second])
    [run] = await runs_of(lab, [second])
    events = await events_of(lab, run["id"])
    started = [e for e in events if e["type"] == "RunStarted"]
    assert [e["actor"] for e in started] == ["worker:b"], [e["type"] for e in events]
    lag = (started[0]["recorded_at"] - b_ready_at).total_seconds()
    assert lag < TTL / 2, f"the new run started {lag:.2f}s after b came up"
