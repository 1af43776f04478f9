"""The step model has one home (`ostinato.domain.workflow`), so the real worker-gateway (over the
real PostgreSQL, with the scheduler's wake poll and a signal's delivery) and the test harness's
in-memory journal must agree: the same generated step sequences, run through both, get the same
answers and the same events on the run's stream, in the same order."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings

from ostinato.clock import FakeClock
from ostinato.runs.children import child_run_id
from ostinato.runs.signals import send_signal
from ostinato.testing.handlers import MemoryJournal
from ostinato.wire import worker as p
from services.scheduler.tick import wake_suspended
from tests.helpers.api import auth
from tests.helpers.integration import dispatch, new_tenant, store
from tests.helpers.step_sequences import (
    Action,
    actions,
    answer,
    report,
    step_item,
    step_model_events,
)
from tests.helpers.workflows import claimed_run, events_of, send_steps, tell_parents

pytestmark = pytest.mark.integration

AGREEMENT = settings(max_examples=50, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])
FAR = datetime(2100, 1, 1, tzinfo=UTC)  # past every wait either side set up


async def claim_again(pool: asyncpg.Pool, gw: httpx.AsyncClient, key: str,
                      run_id: uuid.UUID) -> p.ClaimedRun:
    """Run `run_id`'s next attempt (the dispatcher's part, then a claim; other runs of the
    tenant, children started, may be claimed beside it, and are left alone)."""
    await dispatch(pool)
    r = await gw.post(p.CLAIM_PATH, json={"worker_id": "w1", "max_runs": 50},
                      headers=auth(key))
    assert r.status_code == 200, r.text
    claimed = msgspec.json.decode(r.content, type=p.ClaimResponse).runs
    [run] = [c for c in claimed if c.run_id == str(run_id)]
    return run


async def end_child(pool: asyncpg.Pool, gw: httpx.AsyncClient, key: str, child_id: uuid.UUID,
                    ok: bool, n: int) -> None:
    """The child a run waits for is claimed and succeeds (output `{"n": n}`) or fails for good
    (dead-lettered), then the scheduler tells the parents."""
    kid = await claim_again(pool, gw, key, child_id)
    if ok:
        route, body = "complete", {"fencing_token": kid.fencing_token, "output": {"n": n}}
    else:
        route, body = "fail", {"fencing_token": kid.fencing_token, "error": {
            "type": "declined", "message": "no", "retryable": False, "classified": True}}
    r = await gw.post(p.run_path(kid.run_id, route), json=body, headers=auth(key))
    assert r.status_code == 200, r.text
    while await tell_parents(pool):
        pass


async def run_both(pool: asyncpg.Pool, gw: httpx.AsyncClient,
                   sequence: list[Action]) -> tuple[list[Any], MemoryJournal, uuid.UUID]:
    """Run `sequence` against the gateway and a journal side by side, asserting each answer
    agrees; returns the run's stream, the journal and the run id."""
    tenant_id, key = await new_tenant(pool)
    await dispatch(pool)  # earlier examples' runs woken since: queued, out of the count below
    run = await claimed_run(pool, gw, tenant_id, key)
    run_id = uuid.UUID(run.run_id)
    journal = MemoryJournal()
    journal.newest_token = token = run.fencing_token
    seq, last = 0, None
    for n, action in enumerate(sequence):
        waiting = journal.suspended is not None
        if action.what == "send":
            async with pool.acquire() as conn:
                await send_signal(conn, store(), tenant_id=tenant_id, run_id=run_id,
                                  name=action.signal, payload={"n": n}, actor="test",
                                  idempotency_key=None, max_payload_bytes=1000)
            journal.send_signal(action.signal, {"n": n})
        elif action.what == "finish":
            if journal.suspended is not None and journal.suspended[0].child is not None:
                await end_child(pool, gw, key, child_run_id(run_id, journal.suspended[0].seq),
                                action.ok, n)
                if action.ok:
                    journal.finish_child({"n": n})
                else:
                    journal.finish_child(error_type="declined", message="no")
        elif action.what == "wake":
            at = FAR + timedelta(days=n)
            while await wake_suspended(pool, store(), FakeClock(at)):
                pass  # every due wait in the database, this run's among them
            journal.advance_to(at)
        else:
            body = report(action, run.run_id, token, seq, last)
            [got] = await send_steps(gw, key, [body])
            want = await journal.record(step_item(body))
            assert answer(got) == answer(want), (action, got, want)
            if action.what in ("repeat", "stale", "gap", "late") or got.status != 200:
                continue
            if not got.suspended:
                seq, last = seq + 1, body
        if waiting and journal.suspended is None:  # woken: the next attempt goes on
            run = await claim_again(pool, gw, key, run_id)
            assert run.steps_done == len(journal.steps)
            journal.newest_token = token = run.fencing_token
            seq, last = run.steps_done, None
    return await events_of(pool, tenant_id, run_id), journal, run_id


@AGREEMENT
@given(sequence=actions)
async def test_the_gateway_and_the_harness_answer_and_record_a_step_sequence_alike(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, sequence: list[Action]) -> None:
    stream, journal, _ = await run_both(pool, gateway, sequence)
    assert step_model_events(stream) == journal.events


async def test_a_sequence_of_every_kind_agrees_and_names_its_events(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    """One sequence written out (so the property's events are known to be the expected ones,
    not only equal): a step, a stale and a resent report, a due timer, a signal sent early and
    taken, a sleep woken by the clock, a signal waited for and sent, a child not waited for
    (then claimable beside its parent), another sleep, a child waited for that is
    dead-lettered, one that succeeds."""
    sequence = [Action("step", "a"), Action("stale", "a"), Action("repeat"),
                Action("timer_due", "t"), Action("send", signal="go"),
                Action("signal_wait", "w", "go"), Action("timer_later", "nap"),
                Action("wake"), Action("signal_wait", "w2", "stop"),
                Action("send", signal="stop"), Action("start_child", "k"),
                Action("gap", "z"), Action("timer_later", "nap"), Action("wake"),
                Action("failed_step", "b"), Action("child", "kid"),
                Action("finish", ok=False), Action("child", "kid"), Action("finish")]
    stream, journal, _ = await run_both(pool, gateway, sequence)
    assert step_model_events(stream) == journal.events
    assert journal.events == [
        ("StepCompleted", 0, "a"), ("StaleWriteRejected", None, None),
        ("TimerFired", 1, "t"), ("SignalReceived", None, "go"),
        ("SignalDelivered", 2, "w"), ("RunSuspended", 3, "nap"),
        ("TimerFired", 3, "nap"), ("RunWoken", None, None),
        ("RunSuspended", 4, "w2"), ("SignalReceived", None, "stop"),
        ("SignalDelivered", 4, "w2"), ("RunWoken", None, None),
        ("ChildStarted", 5, "k"), ("RunSuspended", 6, "nap"), ("TimerFired", 6, "nap"),
        ("RunWoken", None, None), ("StepFailed", 7, "b"),
        ("ChildStarted", 8, "kid"), ("RunSuspended", 8, "kid"), ("ChildFinished", 8, "kid"),
        ("RunWoken", None, None),
        ("ChildStarted", 9, "kid"), ("RunSuspended", 9, "kid"), ("ChildFinished", 9, "kid"),
        ("RunWoken", None, None)]
