"""A chunked fan-out (`ctx.fan_out`) with the five services as real processes: a workflow fans
out N chunk runs with a cap of 50, and in the middle the worker running them is killed with -9,
then the dispatcher. Every chunk runs once (one run per index, one fenced effect per run), the
completion once, and the number of chunk runs not final never exceeds the cap, read from the
run-event log in its order.

N is `OSTINATO_FANOUT_CRASH_CHUNKS` (default the issue's 10,000: under three minutes on a 2-core
machine shared with other work; a smaller N for a quicker look). No assertion compares a
duration with a number."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from typing import Any

import pytest

from ostinato.domain import fanout as fo
from tests.helpers.lab.lab import Lab
from tests.helpers.lab.load import RETRY
from tests.helpers.lab.processes import WorkerProc
from tests.helpers.waiting import until

CHUNKS = int(os.environ.get("OSTINATO_FANOUT_CRASH_CHUNKS", "10000"))
CAP = 50
pytestmark = [pytest.mark.e2e, pytest.mark.integration,
              pytest.mark.timeout(300 + CHUNKS // 5)]


async def chunk_states(lab: Lab, parent: uuid.UUID) -> dict[str, int]:
    rows = await lab.db.fetch("SELECT state, count(*) AS n FROM runs WHERE parent_run_id = $1"
                              " AND trigger = 'fan_out' GROUP BY state", parent)
    return {r["state"]: r["n"] for r in rows}


async def kill_holding_chunks(lab: Lab, worker: WorkerProc, parent: uuid.UUID) -> int:
    """kill -9 `worker` at a moment it holds running chunks: frozen (SIGSTOP, it can finish
    nothing more), it is killed once the log still shows it running chunks after a settle (a
    report already sent has landed by then); otherwise it goes on and is looked at again. That
    the kill lands on work is then arranged, not a race the test hopes to win on a busy
    machine. Returns how many chunks it held."""
    async def holding() -> int:
        return await lab.db.fetchval(
            "SELECT count(*) FROM runs WHERE parent_run_id = $1 AND trigger = 'fan_out'"
            " AND state = 'running' AND worker_id = $2", parent, worker.name)

    async def frozen_holding() -> int | None:
        worker.send(signal.SIGSTOP)
        if await holding():
            await asyncio.sleep(1)
            if held := await holding():
                return held
        worker.send(signal.SIGCONT)
        await asyncio.sleep(0.2)
        return None

    held = await until(frozen_holding, 600, f"worker {worker.name} holding running chunks")
    worker.kill()
    return held


async def test_a_fan_out_survives_a_worker_and_a_dispatcher_killed_mid_way(lab: Lab) -> None:
    await lab.start()
    a = await lab.worker("a", concurrency=2 * CAP, claim_wait_seconds=1)
    [job_id] = await lab.submit([{
        "name": "fan", "task": "fan", "idempotency_key": "fan", "retry": RETRY,
        "payload": {"chunks": CHUNKS, "cap": CAP, "chunk_sleep": 0.2,
                    "chunk_retry": RETRY}}])

    async def parent_id() -> uuid.UUID | None:
        return await lab.db.fetchval("SELECT id FROM runs WHERE job_id = $1 AND"
                                     " parent_run_id IS NULL", uuid.UUID(job_id))

    await until(parent_id, 60, "the fan-out's parent run")
    parent = await parent_id()
    assert parent is not None

    async def done_at_least(n: int) -> bool:
        return (await chunk_states(lab, parent)).get("succeeded", 0) >= n

    await until(lambda: done_at_least(CHUNKS // 4), 600, "a quarter of the chunks")
    held = await kill_holding_chunks(lab, a, parent)  # kill -9 with chunks in its hands
    b = await lab.worker("b", concurrency=2 * CAP, claim_wait_seconds=1)
    await until(lambda: done_at_least(CHUNKS // 2), 600, "half of the chunks")
    lab.cluster.kill("dispatcher")
    await asyncio.sleep(1)
    await asyncio.to_thread(lab.cluster.spawn, "dispatcher", "dispatcher")
    completion = fo.completion_run_id(parent, 0)

    async def all_done() -> bool:
        states = await lab.db.fetch("SELECT id, state FROM runs WHERE id = ANY($1::uuid[])",
                                    [parent, completion])
        return len(states) == 2 and all(r["state"] == "succeeded" for r in states)

    await until(all_done, 600 + CHUNKS // 5, "the parent and its completion run")
    assert b.alive

    chunk_ids = {fo.chunk_run_id(parent, 0, i) for i in range(CHUNKS)}
    runs = await lab.db.fetch("SELECT id, trigger, state FROM runs WHERE parent_run_id = $1",
                              parent)
    assert {r["id"] for r in runs if r["trigger"] == "fan_out"} == chunk_ids  # once per index
    assert [r["id"] for r in runs if r["trigger"] == "fan_out_complete"] == [completion]
    assert {r["state"] for r in runs} == {"succeeded"}
    effects = await lab.db.fetch("SELECT run_id, count(*) AS n FROM effects"
                                 " WHERE run_id = ANY($1::uuid[]) GROUP BY run_id",
                                 list(chunk_ids | {completion}))
    assert len(effects) == CHUNKS + 1 and {e["n"] for e in effects} == {1}  # each once
    # the cap, from the log in its order: chunk runs between RunScheduled and their end
    events: list[Any] = await lab.db.fetch(
        "SELECT e.stream_id, e.type FROM events AS e JOIN runs AS r ON r.id = e.stream_id"
        " WHERE r.parent_run_id = $1 AND r.trigger = 'fan_out' AND e.type IN"
        " ('RunScheduled', 'RunStarted', 'RunSucceeded', 'RunDeadLettered', 'RunCancelled')"
        " ORDER BY e.seq", parent)
    live: set[uuid.UUID] = set()
    most = 0
    for e in events:
        if e["type"] == "RunScheduled":
            live.add(e["stream_id"])
        elif e["type"] != "RunStarted":
            live.discard(e["stream_id"])
        most = max(most, len(live))
    assert most == CAP  # filled, never exceeded
    retried = await lab.db.fetchval(
        "SELECT count(DISTINCT e.stream_id) FROM events AS e JOIN runs AS r ON r.id = e.stream_id"
        " WHERE r.parent_run_id = $1 AND r.trigger = 'fan_out'"
        " AND e.type IN ('LeaseExpired', 'AttemptTimedOut')", parent)
    assert retried >= held > 0  # each chunk it held failed its attempt and ran again
    [fan] = await lab.db.fetch("SELECT total, succeeded, failed, admitted, state FROM fan_outs"
                               " WHERE parent_run_id = $1", parent)
    assert dict(fan) == {"total": CHUNKS, "succeeded": CHUNKS, "failed": 0,
                         "admitted": CHUNKS, "state": "succeeded"}
