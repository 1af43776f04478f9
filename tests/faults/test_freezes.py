"""PostgreSQL frozen rather than restarted: SIGSTOP of the postmaster and every server process
(backends, checkpointer, WAL writer, ...) for a few seconds while jobs with idempotency keys are
submitted and run, then SIGCONT. Connections stay open and the server's clock runs on, so when
it wakes every lease and every request that waited meets a server that moved on by the whole
freeze: leases the workers could not renew expire, their late writes are refused, batches
that timed out are submitted again with the same keys.

Checked: every process was stopped while frozen (their /proc state), every accepted
idempotency key has exactly one job (one row, one JobCreated event in the log, the id the
client was answered), and the common end check (tests.helpers.lab.invariants.verify): every
run final, succeeded exactly once, its story consistent, no effect applied twice.

The freeze stops the *shared* server: other tests running at the same time stall for as long.
`processes.frozen` always sends SIGCONT when the block ends (also on errors and cancellation),
and a detached watchdog sends it too should this process die meanwhile. The freeze's length
is the scenario's; what the test waits for afterwards is observed (runs succeeding again,
jobs accepted again), with generous hang guards, never a timed assertion."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import httpx
import pytest

from tests.helpers.lab.invariants import verify, wait_settled
from tests.helpers.lab.lab import Lab
from tests.helpers.lab.load import Load
from tests.helpers.lab.processes import frozen, process_state
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(240)]
FREEZE_SECONDS = 5.0  # past the fault suite's 3 s leases: they all expire on the database clock


async def succeeded(lab: Lab) -> int:
    return int(await lab.db.fetchval("SELECT count(*) FROM runs WHERE state = 'succeeded'"))


async def all_ready(lab: Lab, within: float = 60) -> bool:
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(timeout=3) as client:
        for alias, proc in lab.cluster.procs.items():
            assert proc.poll() is None, f"{alias} exited: {lab.cluster.tail(alias)}"
            while True:
                try:
                    url = f"http://127.0.0.1:{lab.cluster.ports[alias]}/readyz"
                    r = await client.get(url)  # "ready", not "degraded" (Kafka down is a 200)
                    if r.status_code == 200 and r.json()["status"] == "ready":
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, f"{alias} not ready: {lab.cluster.tail(alias)}"
                await asyncio.sleep(0.2)
    return True


async def test_postgres_frozen_under_keyed_load(lab: Lab) -> None:
    await lab.start()
    for name in ("w1", "w2"):
        await lab.worker(name, concurrency=32)
    load = Load(lab.cluster.api_url, lab.api_key, rate=50, batch=10,
                payload={"sleep": 0.2}).start()
    try:
        await until(lambda: succeeded(lab), 60, "runs to succeed before the freeze")
        before = await succeeded(lab)
        accepted_before = len(load.accepted)
        with frozen("postgres", max_seconds=FREEZE_SECONDS + 60) as pids:
            await asyncio.sleep(FREEZE_SECONDS - 0.5)
            states = {pid: process_state(pid) for pid in pids}
            await asyncio.sleep(0.5)
        # stopped (T); a backend that was exiting when the postmaster stopped stays a zombie
        # (Z) until the postmaster reaps it, or is gone (None)
        assert states[pids[0]] == "T", f"the postmaster was not stopped: {states[pids[0]]}"
        assert set(states.values()) <= {"T", "Z", None}, f"not all stopped: {states}"

        async def flowing_again() -> bool:
            return len(load.accepted) > accepted_before and await succeeded(lab) > before

        await until(flowing_again, 90, "jobs accepted and runs succeeding after the thaw")
        accepted_after = len(load.accepted)

        async def more_accepted() -> bool:
            return len(load.accepted) >= accepted_after + 50

        await until(more_accepted, 60, "more jobs accepted after the thaw")
    finally:
        await load.stop()
    assert await all_ready(lab)
    assert load.abandoned == [], f"{len(load.abandoned)} jobs were never accepted"

    # every accepted key: exactly one job, the one the client was answered
    jobs: dict[str, list[str]] = {}
    for r in await lab.db.fetch("SELECT idempotency_key AS key, id::text AS id FROM jobs "
                                "WHERE idempotency_key IS NOT NULL"):
        jobs.setdefault(r["key"], []).append(r["id"])
    created = Counter({r["key"]: r["n"] for r in await lab.db.fetch(
        "SELECT data->>'idempotency_key' AS key, count(*) AS n FROM events "
        "WHERE type = 'JobCreated' GROUP BY 1")})
    wrong = {k: (job, jobs.get(k), created[k]) for k, job in load.accepted.items()
             if jobs.get(k) != [job] or created[k] != 1}
    assert wrong == {}, f"keys without exactly one job: {dict(list(wrong.items())[:5])}"

    missing, open_runs = await wait_settled(lab.db, load.job_ids, 120)
    verdict = await verify(lab.db, load.job_ids)
    assert (missing, open_runs) == (0, 0), verdict.problems()
    assert verdict.problems() == []
    assert verdict.succeeded == verdict.runs == len(load.job_ids) == verdict.effects
    twice = await lab.db.fetch(
        "SELECT stream_id, count(*) AS n FROM events WHERE type = 'RunSucceeded' "
        "GROUP BY stream_id HAVING count(*) <> 1")
    assert twice == [], f"runs final more than once: {twice[:5]}"
