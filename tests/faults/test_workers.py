"""Worker processes killed, frozen and stopped mid-run, with the five services as real processes
and leases of 3 s. Each test ends with the common check (tests.helpers.lab.invariants.verify):
every accepted job ran, no effect was applied twice, every run is final, every run's story is
consistent.

Workers long-poll their claims. A poll left open by a worker that died or stopped must lease
nothing (the gateway watches for the client hanging up; the two tests at the end); the
lease-recovery tests give their workers a 1 s poll so that what they measure is lease expiry
alone.

No assertion compares a duration with a number: what happened when is read from the run-event
log (its order, and times recorded by the database clock, e.g. the lease deadline a claim was
given). The tests about a release rather than an expiry run with 20 s leases, so that "before
the lease could have run out" is a wide margin, not a race with a process's start-up.
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
from tests.helpers.lab.load import fx_job
from tests.helpers.lab.metrics import metric_total, scrape
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(120)]
LONG_LEASES = {"OSTINATO_LEASE_TTL_SECONDS": "20"}  # a release must not look like an expiry


async def events_of(lab: Lab, run_id: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in await lab.db.fetch(
        "SELECT seq, version, type, actor, epoch, data, occurred_at, recorded_at FROM events "
        "WHERE stream_id = $1 ORDER BY version", uuid.UUID(str(run_id)))]


async def runs_of(lab: Lab, job_ids: list[str]) -> list[dict[str, Any]]:
    return [dict(r) for r in await lab.db.fetch(
        "SELECT id, job_id, state, worker_id, attempt, fencing_token FROM runs "
        "WHERE job_id = ANY($1::uuid[])", [uuid.UUID(j) for j in job_ids])]


def at(event: dict[str, Any], key: str) -> datetime:
    """A time an event's data holds (ISO 8601, written from the database's answer)."""
    return datetime.fromisoformat(event["data"][key])


def first(events: list[dict[str, Any]], kind: str, start: int = 0) -> dict[str, Any]:
    return next(e for e in events[start:] if e["type"] == kind)


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
    # a sends no liveness pings, so its lease is what ends its attempts (a pinging worker's are
    # taken back sooner, for missed heartbeats: tests/faults/test_worker_death.py)
    a = await lab.worker("a", concurrency=16, claim_wait_seconds=1, pings=False)
    # Half the runs are killed before their effect, half after it (before the outcome).
    # Only the first attempt is slow (slow_attempts=1): the retry runs at once.
    jobs = [fx_job(f"before-{i}", sleep=30, slow_attempts=1) for i in range(6)] + \
           [fx_job(f"after-{i}", hold=30, slow_attempts=1) for i in range(6)]
    job_ids = await lab.submit(jobs)
    await until(lambda: running_on(lab, job_ids, "a"), 15, "worker a to hold every run")
    await until(lambda: lab.db.fetchval("SELECT count(*) >= 6 FROM effects"), 10,
                "the 'after' runs to apply their effect")
    b = await lab.worker("b", concurrency=16, claim_wait_seconds=1)
    killed_at = await lab.db.now()
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
        expired, retry = events[3], events[4]
        assert expired["data"]["cause"] == "lease_expired", expired
        # By the database clock: a's lease ran out after the kill (it heartbeated until then),
        # and only once past the deadline its claim was given (heartbeats only extend it)...
        assert killed_at < expired["recorded_at"], "a's lease expired before it was killed"
        assert at(started[0], "lease_expires_at") < expired["recorded_at"], \
            "the lease was expired before its deadline"
        # ...and b started the run only after the retry had fallen due and been released.
        due = first(events, "RetryDue", 5)
        # (retry_at and the retry poll's "due" are both the services' clock: compare it with
        # the poll's own time, occurred_at; the log's order is the database's)
        assert at(retry, "retry_at") <= due["occurred_at"]
        assert due["recorded_at"] < started[1]["recorded_at"]
        assert events.index(due) < events.index(started[1])
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
    await until(lambda: running_on(lab, job_ids, "a"), 15, "worker a to hold every run")
    a.send(signal.SIGSTOP)
    b = await lab.worker("b", concurrency=16, claim_wait_seconds=1)

    async def all_done_by_b() -> bool:
        runs = await runs_of(lab, job_ids)
        return all(r["state"] == "succeeded" and r["worker_id"] == "b" for r in runs)

    await until(all_done_by_b, 25, "b to take over and finish every run")
    run_ids = {str(r["id"]) for r in await runs_of(lab, job_ids)}
    woke_at = a.log_mark()
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

    for event in await until(rejected, 10, "a's stale writes to be rejected"):
        assert event["actor"] == "worker:a" and event["data"]["worker_id"] == "a"
        assert event["data"]["presented_token"] == 1 < event["data"]["current_token"]
        assert event["data"]["operation"] in ("heartbeat", "complete")

    async def a_gave_up_every_run() -> bool:
        """a's last word on each run, in its log since it woke: the outcome withheld (lease
        lost) or reported and refused. After that it holds nothing and has nothing to send."""
        ended = {r.get("run_id") for r in a.records(since=woke_at)
                 if r.get("event") in ("run.outcome_withheld", "outcome.rejected")}
        return run_ids <= ended

    await until(a_gave_up_every_run, 15, "a to give up every run it held")
    await settle_and_verify(lab, job_ids)
    effects = await lab.db.fetch("SELECT worker_id, fencing_token FROM effects")
    assert {(e["worker_id"], e["fencing_token"] > 1) for e in effects} == {("b", True)}
    assert "run.lease_lost" in a.log_text()
    gateway = await scrape(lab.cluster.ports["worker_gateway"])
    assert metric_total(gateway, "ostinato_stale_writes_rejected_total") >= 6
    assert a.alive and b.alive
    assert await asyncio.to_thread(a.stop) == 0  # a woken worker still stops cleanly


async def test_stopped_worker_releases_its_runs_at_once(lab: Lab) -> None:
    await lab.start(env=LONG_LEASES)
    a = await lab.worker("a", concurrency=16, grace_seconds=0)
    job_ids = await lab.submit([fx_job(f"released-{i}", sleep=30, slow_attempts=1)
                                for i in range(4)])
    await until(lambda: running_on(lab, job_ids, "a"), 15, "worker a to hold every run")
    await lab.worker("b", concurrency=16)
    assert await asyncio.to_thread(a.stop) == 0  # SIGTERM, grace 0: release at once

    await settle_and_verify(lab, job_ids)
    for run in await runs_of(lab, job_ids):
        events = await events_of(lab, run["id"])
        types = [e["type"] for e in events]
        released = types.index("LeaseReleased")
        assert events[released]["actor"] == "worker:a"
        queued = types.index("RunQueued", released)
        assert set(types[released + 1:queued]) <= {"RetryDue", "StaleWriteRejected"}
        # Queued again through the release, not the lease running out: before the deadline
        # the database gave a's claim (heartbeats only extend it), and with no expiry at all.
        granted = at(first(events, "RunStarted"), "lease_expires_at")
        assert events[queued]["recorded_at"] < granted, "queued again only after a's lease ran out"
        assert "LeaseExpired" not in types, types
        assert events[-1]["actor"] == "worker:b"


async def test_released_runs_are_not_leased_again_to_the_stopping_worker(lab: Lab) -> None:
    await lab.start(env=LONG_LEASES)
    a = await lab.worker("a", concurrency=16, grace_seconds=0)
    job_ids = await lab.submit([fx_job(f"released-{i}", sleep=30, slow_attempts=1)
                                for i in range(4)])
    await until(lambda: running_on(lab, job_ids, "a"), 15, "worker a to hold every run")
    assert await asyncio.to_thread(a.stop) == 0  # released; a's process is gone

    async def a_is_gone() -> bool:
        """a said goodbye (the gateway forgot it: its slots count no more) and the scheduler
        handed every released run back to the dispatcher (RetryDue): from here on only a live
        worker's claim can take them."""
        if await lab.db.fetchval("SELECT count(*) FROM workers WHERE worker_id = 'a'"):
            return False
        for r in await runs_of(lab, job_ids):
            types = [e["type"] for e in await events_of(lab, r["id"])]
            if "LeaseReleased" not in types or \
                    "RetryDue" not in types[types.index("LeaseReleased"):]:
                return False
        return True

    await until(a_is_gone, 15, "a's goodbye and its runs released to the dispatcher")
    await lab.worker("b", concurrency=16)

    await settle_and_verify(lab, job_ids, seconds=60)  # time for a wrong lease to expire
    for run in await runs_of(lab, job_ids):
        events = await events_of(lab, run["id"])
        types = [e["type"] for e in events]
        released = types.index("LeaseReleased")
        after = [(e["type"], e["actor"]) for e in events[released:]
                 if e["type"] in ("RunStarted", "LeaseExpired")]
        assert after[0] == ("RunStarted", "worker:b"), after
        # b's claim came before the lease a's attempt was given could have run out: the run
        # came back through the release, not through an expiry of a lease a was leased again.
        restarted = first(events, "RunStarted", released)
        granted = at(first(events, "RunStarted"), "lease_expires_at")
        assert restarted["recorded_at"] < granted, "b started the run only after a's lease ran out"
        assert "LeaseExpired" not in types, types


async def test_a_killed_workers_open_claim_leases_nothing(lab: Lab) -> None:
    await lab.start(env=LONG_LEASES)
    a = await lab.worker("a", concurrency=16)  # the SDK's 10 s long poll
    [held] = await lab.submit([fx_job("first", sleep=30, slow_attempts=1)])
    await until(lambda: running_on(lab, [held], "a"), 15, "worker a to hold the run")
    a.kill()  # a had just claimed: its next long poll is open for ~10 s
    [second] = await lab.submit([fx_job("second")])

    async def second_queued() -> bool:
        """The new run is in the queue (a killed worker's slots still count until its
        registration runs out): an open claim of a's would have been woken for it."""
        runs = await runs_of(lab, [second])
        return bool(runs) and "RunQueued" in [e["type"] for e in await events_of(
            lab, runs[0]["id"])]

    await until(second_queued, 15, "the new run to be queued")
    await lab.worker("b", concurrency=16, claim_wait_seconds=1)

    await settle_and_verify(lab, [held, second], seconds=60)  # the held run's lease expires
    [run] = await runs_of(lab, [second])
    events = await events_of(lab, run["id"])
    started = [e for e in events if e["type"] == "RunStarted"]
    assert [e["actor"] for e in started] == ["worker:b"], [e["type"] for e in events]
    assert "LeaseExpired" not in [e["type"] for e in events]
    # b got the new run before a's killed attempt on the other one expired, and before the
    # deadline its claim was given: nothing leased to a dead claim was waited for.
    [held_run] = await runs_of(lab, [held])
    held_events = await events_of(lab, held_run["id"])
    expired = first(held_events, "LeaseExpired")
    assert started[0]["seq"] < expired["seq"], "b started the new run only after an expiry"
    assert started[0]["recorded_at"] < at(first(held_events, "RunStarted"), "lease_expires_at")
