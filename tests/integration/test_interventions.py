"""Operator interventions (`ostinato.runs.interventions`) through the API, a real SDK worker,
the worker-gateway and the real PostgreSQL: each leaves the exact events docs/WORKFLOWS.md
lists, with the caller and the reason, and the run then goes on as it should — a retried step
runs again and the workflow succeeds, a skipped step's output reaches the workflow, a restart
runs the later steps exactly once more and keeps the set-aside ones visible, a restart gives
back the signals its waits took, a paused run stays paused until its resume, marking a run
succeeded or failed ends it without compensating (and cancels its children). What would
replay an undone saga step, and every bad request, changes nothing. The read models rebuilt
from the log equal the live ones."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.clock import FakeClock, SystemClock
from ostinato.domain import events as ev
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.policy.retry import RetrySpec
from ostinato.sdk import PermanentError, RetryableError, WorkflowContext, workflow
from ostinato.stores import runs, steps
from services.scheduler.tick import fire_due, wake_suspended
from tests.helpers.api import assert_problem, auth
from tests.helpers.integration import dispatch, new_tenant, queued_workflow_run, run_row, store
from tests.helpers.workflows import claimed_run, drive, events_of, kinds, napper, saga, step_names

pytestmark = pytest.mark.integration


async def operator(pool: asyncpg.Pool) -> tuple[uuid.UUID, str, str]:
    """A tenant: (id, key, the actor its calls are recorded under)."""
    name = f"ops-{uuid.uuid4().hex[:8]}"
    tenant_id, key = await new_tenant(pool, name)
    return tenant_id, key, f"tenant:{name}"


async def intervene(client: httpx.AsyncClient, key: str, path: str,
                    body: dict[str, Any]) -> dict[str, Any]:
    r = await client.post(path, headers=auth(key), json=body)
    assert r.status_code == 200, r.text
    return r.json()


def since(events: list[Any], kind: type[ev.Event]) -> list[str]:
    """The kinds of the events from the first of `kind` on."""
    names = kinds(events)
    return names[names.index(kind.__name__):]


async def one_attempt_run(pool: asyncpg.Pool, tenant_id: uuid.UUID, task: str) -> uuid.UUID:
    """A queued run of `task` whose job allows one attempt (a retryable failure dead-letters)."""
    request = JobRequest(name=task, retry=RetrySpec(max_attempts=1))
    async with pool.acquire() as conn:
        await submit_job(conn, store(), SystemClock(), tenant_id=tenant_id, request=request,
                         pools=("default",), max_payload_bytes=1 << 20, actor="test")
    [created] = await fire_due(pool, store(), SystemClock())
    assert await dispatch(pool) == 1
    async with pool.acquire() as conn:
        [run] = await runs.page(conn, tenant_id, job_id=created.job_id, state=None,
                                after=(None, None), limit=1)
    return run.id


async def assert_rebuild_is_equal(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        live = await snapshot(conn)
        await rebuild(conn)
        assert await snapshot(conn) == live


def order(calls: list[str], *, declined: bool) -> Any:
    def charge() -> dict[str, str]:
        calls.append("charge")
        return {"id": "ch_1"}

    def pay(charge: dict[str, str]) -> str:
        calls.append("pay")
        if declined:
            raise PermanentError("card declined", type="card_declined")
        return f"paid {charge['id']}"

    @workflow("shop.order")
    async def run(ctx: WorkflowContext, payload: None) -> str:
        charged = await ctx.step("charge", charge)
        return await ctx.step("pay", pay, charged)

    return run


async def test_a_failed_step_is_retried_in_place_and_the_workflow_succeeds(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key, actor = await operator(pool)
    calls: list[str] = []
    run_id = await queued_workflow_run(pool, tenant_id, "shop.order")
    await drive(pool, gateway, key, [order(calls, declined=True)], tenant_id, run_id,
                "dead_lettered")
    done = await intervene(client, key, f"/v1/runs/{run_id}/steps/1/retry",
                           {"reason": "card limit raised"})
    assert done == {"run_id": str(run_id), "state": "scheduled", "version": 9,
                    "events": ["StepRetried", "RunReopened"], "children_cancelled": 0}
    letter = (await client.get(f"/v1/dead-letters/{run_id}", headers=auth(key))).json()
    assert (letter["triage_state"], letter["triage_by"], letter["triage_comment"]) == (
        "fixed", actor, "card limit raised")
    await drive(pool, gateway, key, [order(calls, declined=False)], tenant_id, run_id,
                "succeeded")

    assert calls == ["charge", "pay", "pay"]  # charged once, the payment retried
    events = await events_of(pool, tenant_id, run_id)
    assert kinds(events)[:7] == ["RunScheduled", "RunQueued", "RunStarted", "StepCompleted",
                                 "StepFailed", "RunFailed", "RunDeadLettered"]
    assert since(events, ev.StepRetried) == ["StepRetried", "RunReopened", "RunQueued",
                                             "RunStarted", "StepCompleted", "RunSucceeded"]
    assert events[7] == ev.StepRetried(seq=1, name="pay", set_aside=1, by=actor,
                                       reason="card limit raised")
    timeline = (await client.get(f"/v1/runs/{run_id}/events", headers=auth(key))).json()
    assert [i["actor"] for i in timeline["items"][7:9]] == [actor, actor]
    current = (await client.get(f"/v1/runs/{run_id}/steps", headers=auth(key))).json()
    assert [(s["name"], s["succeeded"], s["attempt"]) for s in current["items"]] == [
        ("charge", True, 1), ("pay", True, 2)]
    aside = (await client.get(f"/v1/runs/{run_id}/steps/set-aside", headers=auth(key))).json()
    assert [(s["set_aside_version"], s["seq"], s["name"], s["succeeded"], s["error_type"])
            for s in aside["items"]] == [(8, 1, "pay", False, "card_declined")]
    row = await run_row(pool, tenant_id, run_id)
    assert (row.attempt, row.failures, row.steps_done) == (2, 0, 2)
    await assert_rebuild_is_equal(pool)


async def test_a_skipped_step_gives_the_workflow_the_supplied_output(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key, actor = await operator(pool)
    calls: list[str] = []

    def quote() -> None:
        calls.append("quote")
        raise PermanentError("the pricing service is gone", type="gone")

    @workflow("shop.quote")
    async def priced(ctx: WorkflowContext, payload: None) -> dict[str, Any]:
        return {"quote": await ctx.step("quote", quote)}

    run_id = await queued_workflow_run(pool, tenant_id, "shop.quote")
    await drive(pool, gateway, key, [priced], tenant_id, run_id, "dead_lettered")
    done = await intervene(client, key, f"/v1/runs/{run_id}/steps/0/skip",
                           {"reason": "priced by hand", "output": {"price": 42}})
    assert done["events"] == ["StepSkipped", "RunReopened"] and done["state"] == "scheduled"
    await drive(pool, gateway, key, [priced], tenant_id, run_id, "succeeded")

    assert calls == ["quote"]  # never ran again
    view = (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()
    assert view["output"] == {"quote": {"price": 42}}
    events = await events_of(pool, tenant_id, run_id)
    assert since(events, ev.StepSkipped) == ["StepSkipped", "RunReopened", "RunQueued",
                                             "RunStarted", "RunSucceeded"]
    assert ev.StepSkipped(seq=0, name="quote", set_aside=1, by=actor, reason="priced by hand",
                          output={"price": 42}) in events
    async with pool.acquire() as conn:
        [supplied] = await steps.page(conn, tenant_id, run_id, after=-1, limit=10)
        [failed] = await steps.set_aside_page(conn, tenant_id, run_id, after=(0, -1), limit=10)
    assert (supplied.succeeded, supplied.output, supplied.attempt, supplied.tries,
            supplied.supplied_by) == (True, {"price": 42}, 0, 0, actor)
    assert (failed.seq, failed.succeeded, failed.error_type) == (0, False, "gone")


async def test_a_step_that_stopped_the_run_unrecorded_is_skipped_by_name(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key, _ = await operator(pool)

    def fetch() -> None:
        raise RetryableError("upstream down")

    @workflow("etl.fetch")
    async def load(ctx: WorkflowContext, payload: None) -> Any:
        return await ctx.step("fetch", fetch)

    run_id = await one_attempt_run(pool, tenant_id, "etl.fetch")
    await drive(pool, gateway, key, [load], tenant_id, run_id, "dead_lettered")
    assert (await run_row(pool, tenant_id, run_id)).steps_done == 0  # nothing recorded
    path = f"/v1/runs/{run_id}/steps/0/skip"
    assert_problem(await client.post(path, headers=auth(key),
                                     json={"reason": "loaded by hand", "output": [1]}), 422,
                   "name")
    done = await intervene(client, key, path, {"reason": "loaded by hand", "output": [1, 2],
                                               "name": "fetch"})
    assert done["events"] == ["StepSkipped", "RunReopened"]
    await drive(pool, gateway, key, [load], tenant_id, run_id, "succeeded")
    assert (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()["output"] == [
        1, 2]


def etl(calls: list[str], *, bad_totals: bool) -> Any:
    def part(name: str) -> str:
        calls.append(name)
        return name

    @workflow("etl.load")
    async def run(ctx: WorkflowContext, payload: None) -> str:
        for name in ("extract", "transform", "load"):
            await ctx.step(name, part, name)
        if bad_totals:
            raise PermanentError("the totals do not add up", type="bad_totals")
        return "loaded"

    return run


async def test_a_restart_runs_the_later_steps_exactly_once_more_and_keeps_the_old_ones(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key, actor = await operator(pool)
    calls: list[str] = []
    run_id = await queued_workflow_run(pool, tenant_id, "etl.load")
    await drive(pool, gateway, key, [etl(calls, bad_totals=True)], tenant_id, run_id,
                "dead_lettered")
    done = await intervene(client, key, f"/v1/runs/{run_id}/restart",
                           {"reason": "the transform was fixed", "from_seq": 1})
    assert done["events"] == ["RunRestarted", "RunReopened"]
    assert (await run_row(pool, tenant_id, run_id)).steps_done == 1
    await drive(pool, gateway, key, [etl(calls, bad_totals=False)], tenant_id, run_id,
                "succeeded")

    assert calls == ["extract", "transform", "load", "transform", "load"]
    events = await events_of(pool, tenant_id, run_id)
    assert since(events, ev.RunRestarted) == [
        "RunRestarted", "RunReopened", "RunQueued", "RunStarted", "StepCompleted",
        "StepCompleted", "RunSucceeded"]
    assert ev.RunRestarted(from_seq=1, set_aside=2, by=actor,
                           reason="the transform was fixed") in events
    async with pool.acquire() as conn:
        current = await steps.page(conn, tenant_id, run_id, after=-1, limit=10)
        aside = await steps.set_aside_page(conn, tenant_id, run_id, after=(0, -1), limit=10)
        later = await steps.set_aside_page(conn, tenant_id, run_id,
                                           after=(aside[0].set_aside_version, 1), limit=10)
    assert [(s.name, s.attempt) for s in current] == [
        ("extract", 1), ("transform", 2), ("load", 2)]
    assert [(s.seq, s.name, s.attempt) for s in aside] == [(1, "transform", 1), (2, "load", 1)]
    assert [s.seq for s in later] == [2]  # paged by (set_aside_version, seq)
    await assert_rebuild_is_equal(pool)


async def test_a_restart_gives_back_the_signals_its_waits_took(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key, actor = await operator(pool)
    calls: list[str] = []

    def shipper(broken: bool) -> Any:
        def prepare() -> None:
            calls.append("prepare")

        def ship(approval: dict[str, Any]) -> str:
            calls.append("ship")
            if broken:
                raise PermanentError("the carrier refused", type="refused")
            return f"shipped, approved by {approval['by']}"

        @workflow("ops.ship")
        async def run(ctx: WorkflowContext, payload: None) -> str:
            await ctx.step("prepare", prepare)
            approval = await ctx.wait_for_signal("go")
            return await ctx.step("ship", ship, approval)

        return run

    run_id = await queued_workflow_run(pool, tenant_id, "ops.ship")
    await drive(pool, gateway, key, [shipper(True)], tenant_id, run_id, "suspended")
    r = await client.post(f"/v1/runs/{run_id}/signals/go",
                          params={"reason": "approved on the phone"}, headers=auth(key),
                          json={"by": "ana"})
    assert r.status_code == 202 and r.json()["delivered"] is True
    await drive(pool, gateway, key, [shipper(True)], tenant_id, run_id, "dead_lettered")
    done = await intervene(client, key, f"/v1/runs/{run_id}/restart",
                           {"reason": "another carrier", "from_seq": 0})
    assert done["events"] == ["RunRestarted", "RunReopened"]
    await drive(pool, gateway, key, [shipper(False)], tenant_id, run_id, "succeeded")

    assert calls == ["prepare", "ship", "prepare", "ship"]
    events = await events_of(pool, tenant_id, run_id)
    [received] = [e for e in events if isinstance(e, ev.SignalReceived)]
    assert (received.by, received.reason) == (actor, "approved on the phone")
    delivered = [e for e in events if isinstance(e, ev.SignalDelivered)]
    assert [(e.seq, e.signal_id) for e in delivered] == [(1, received.signal_id)] * 2
    view = (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()
    assert view["output"] == "shipped, approved by ana"
    await assert_rebuild_is_equal(pool)


async def test_a_paused_sleeper_restarted_stays_paused_until_its_resume(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key, _ = await operator(pool)
    ran: list[str] = []
    run_id = await queued_workflow_run(pool, tenant_id, "ops.nap")
    await drive(pool, gateway, key, [napper(ran)], tenant_id, run_id, "suspended")
    assert (await client.post(f"/v1/runs/{run_id}/pause", headers=auth(key))).status_code == 200
    done = await intervene(client, key, f"/v1/runs/{run_id}/restart",
                           {"reason": "redo before", "from_seq": 0})
    assert done["events"] == ["RunRestarted"] and done["state"] == "suspended"
    row = await run_row(pool, tenant_id, run_id)
    assert (row.wait_reason, row.steps_done, row.frozen_wake_at) == ("paused", 0, None)
    assert await dispatch(pool) == 0  # still paused: nothing runs
    assert (await client.post(f"/v1/runs/{run_id}/resume", headers=auth(key))).status_code == 200
    await drive(pool, gateway, key, [napper(ran)], tenant_id, run_id, "suspended")  # new nap
    later = FakeClock(datetime.now(UTC) + timedelta(hours=2))
    assert await wake_suspended(pool, store(), later) == 1
    await drive(pool, gateway, key, [napper(ran)], tenant_id, run_id, "succeeded")
    assert ran == ["before", "before", "after"]
    events = await events_of(pool, tenant_id, run_id)
    assert since(events, ev.RunRestarted)[:6] == [
        "RunRestarted", "RunResumed", "RunWoken", "RunQueued", "RunStarted", "StepCompleted"]


async def test_marking_a_waiting_parent_succeeded_cancels_its_child(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key, actor = await operator(pool)

    @workflow("ops.slow_child")
    async def slow(ctx: WorkflowContext, payload: None) -> None:
        await ctx.sleep(timedelta(days=1))

    @workflow("ops.parent")
    async def parent(ctx: WorkflowContext, payload: None) -> Any:
        return await ctx.child("ops.slow_child")

    run_id = await queued_workflow_run(pool, tenant_id, "ops.parent")
    await drive(pool, gateway, key, [parent, slow], tenant_id, run_id, "suspended")
    child_id = (await run_row(pool, tenant_id, run_id)).wait_child
    assert child_id is not None
    await drive(pool, gateway, key, [parent, slow], tenant_id, child_id, "suspended")
    done = await intervene(client, key, f"/v1/runs/{run_id}/succeed",
                           {"reason": "shipped outside the system", "output": {"by": "hand"}})
    assert done["events"] == ["RunMarkedSucceeded"] and done["children_cancelled"] == 1
    view = (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()
    assert (view["state"], view["output"]) == ("succeeded", {"by": "hand"})
    assert (await run_row(pool, tenant_id, child_id)).state == "cancelled"
    events = await events_of(pool, tenant_id, run_id)
    assert events[-1] == ev.RunMarkedSucceeded(output_ref=events[-1].output_ref, by=actor,
                                               reason="shipped outside the system",
                                               output_bytes=len(b'{"by":"hand"}'))
    assert kinds(await events_of(pool, tenant_id, child_id))[-1] == "RunCancelled"


async def test_marking_a_suspended_saga_failed_dead_letters_it_without_compensating(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key, actor = await operator(pool)
    calls: list[str] = []
    run_id = await queued_workflow_run(pool, tenant_id, "travel.saga")
    await drive(pool, gateway, key, [saga(calls, sleep=True)], tenant_id, run_id, "suspended")
    done = await intervene(client, key, f"/v1/runs/{run_id}/fail",
                           {"reason": "cancelled by phone", "error_type": "abandoned"})
    assert done["events"] == ["RunMarkedFailed", "RunWoken", "RunDeadLettered"]
    assert done["state"] == "dead_lettered"
    assert calls == ["book hotel", "book car"]  # nothing undone
    events = await events_of(pool, tenant_id, run_id)
    assert events[-3:] == [
        ev.RunMarkedFailed(error_type="abandoned", message="cancelled by phone", by=actor,
                           reason="cancelled by phone"),
        ev.RunWoken(cause="intervention"),
        ev.RunDeadLettered(reason="operator", error_type="abandoned",
                           message="cancelled by phone", attempts=1,
                           job_id=(await run_row(pool, tenant_id, run_id)).job_id)]
    row = await run_row(pool, tenant_id, run_id)
    assert row.last_error["type"] == "abandoned" and row.wait_reason is None
    letter = (await client.get(f"/v1/dead-letters/{run_id}", headers=auth(key))).json()
    assert (letter["reason"], letter["error_type"], letter["triage_state"]) == (
        "operator", "abandoned", "new")
    body = assert_problem(await client.post(f"/v1/runs/{run_id}/fail", headers=auth(key),
                                            json={"reason": "again"}), 409)
    assert "dead-lettered already" in body["detail"]


async def test_a_compensated_step_is_never_replayed_by_a_set_aside(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key, _ = await operator(pool)
    calls: list[str] = []
    run_id = await queued_workflow_run(pool, tenant_id, "travel.saga")
    await drive(pool, gateway, key, [saga(calls, fail=True)], tenant_id, run_id,
                "dead_lettered")
    version = (await run_row(pool, tenant_id, run_id)).version
    body = assert_problem(await client.post(f"/v1/runs/{run_id}/steps/2/retry",
                                            headers=auth(key), json={"reason": "paid"}), 409)
    assert "compensation of step car, hotel" in body["detail"]
    assert (await run_row(pool, tenant_id, run_id)).version == version  # nothing recorded
    done = await intervene(client, key, f"/v1/runs/{run_id}/restart",
                           {"reason": "new card", "from_seq": 0})
    assert done["events"] == ["RunRestarted", "RunReopened"]
    await drive(pool, gateway, key, [saga(calls)], tenant_id, run_id, "succeeded")
    assert calls[5:] == ["book hotel", "book car", "pay"]
    assert await step_names(pool, tenant_id, run_id) == ["hotel", "car", "pay"]
    async with pool.acquire() as conn:
        aside = await steps.set_aside_page(conn, tenant_id, run_id, after=(0, -1), limit=10)
    assert [s.name for s in aside] == [
        "hotel", "car", "pay", "compensate:car", "compensate:hotel"]


async def test_a_failed_compensation_is_retried_and_the_saga_ends_cancelled(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key, _ = await operator(pool)
    calls: list[str] = []
    run_id = await queued_workflow_run(pool, tenant_id, "travel.saga")
    await drive(pool, gateway, key, [saga(calls, sleep=True, undo_fails=True)], tenant_id,
                run_id, "suspended")
    assert (await client.post(f"/v1/runs/{run_id}/cancel", headers=auth(key))).status_code == 200
    await drive(pool, gateway, key, [saga(calls, sleep=True, undo_fails=True)], tenant_id,
                run_id, "dead_lettered")
    assert await step_names(pool, tenant_id, run_id) == ["hotel", "car", "compensate:car"]
    done = await intervene(client, key, f"/v1/runs/{run_id}/steps/2/retry",
                           {"reason": "the car rental is reachable again"})
    assert done["events"] == ["StepRetried", "RunReopened"]
    await drive(pool, gateway, key, [saga(calls, sleep=True)], tenant_id, run_id, "cancelled")
    assert calls[-3:] == ["undo car", "undo car", "undo hotel"]  # the failed one, then again
    assert await step_names(pool, tenant_id, run_id) == [
        "hotel", "car", "compensate:car", "compensate:hotel"]
    assert since(await events_of(pool, tenant_id, run_id), ev.StepRetried)[-3:] == [
        "StepCompleted", "RunFailed", "RunCancelled"]


async def test_bad_requests_and_runs_in_the_wrong_state_change_nothing(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key, _ = await operator(pool)
    _, other_key, _ = await operator(pool)
    running = await claimed_run(pool, gateway, tenant_id, key)
    run_id = uuid.UUID(running.run_id)
    version = (await run_row(pool, tenant_id, run_id)).version
    body = assert_problem(await client.post(f"/v1/runs/{run_id}/restart", headers=auth(key),
                                            json={"reason": "r", "from_seq": 0}), 409)
    assert "is running" in body["detail"]
    for path, payload, field in [
        (f"/v1/runs/{run_id}/restart", {"from_seq": 0}, "reason"),
        (f"/v1/runs/{run_id}/restart", {"reason": "", "from_seq": 0}, "reason"),
        (f"/v1/runs/{run_id}/restart", {"reason": "x" * 1001, "from_seq": 0}, "reason"),
        (f"/v1/runs/{run_id}/restart", {"reason": "r", "from_seq": -1}, "from_seq"),
        (f"/v1/runs/{run_id}/succeed", {"reason": "r", "extra": 1}, "extra"),
        (f"/v1/runs/{run_id}/steps/0/skip", {"reason": "r"}, "output"),
    ]:
        assert_problem(await client.post(path, headers=auth(key), json=payload), 422, field)
    assert_problem(await client.post(f"/v1/runs/{run_id}/succeed", headers=auth(other_key),
                                     json={"reason": "r"}), 404)
    assert_problem(await client.post(f"/v1/runs/{uuid.uuid4()}/fail", headers=auth(key),
                                     json={"reason": "r"}), 404)
    assert_problem(await client.get(f"/v1/runs/{run_id}/steps/set-aside",
                                    headers=auth(other_key)), 404)
    assert (await run_row(pool, tenant_id, run_id)).version == version

    calls: list[str] = []
    done_id = await queued_workflow_run(pool, tenant_id, "shop.order")
    await drive(pool, gateway, key, [order(calls, declined=False)], tenant_id, done_id,
                "succeeded")
    body = assert_problem(await client.post(f"/v1/runs/{done_id}/steps/1/retry",
                                            headers=auth(key), json={"reason": "r"}), 409)
    assert "succeeded" in body["detail"]
    failed_id = await queued_workflow_run(pool, tenant_id, "shop.order")
    await drive(pool, gateway, key, [order(calls, declined=True)], tenant_id, failed_id,
                "dead_lettered")
    assert_problem(await client.post(f"/v1/runs/{failed_id}/steps/5/retry", headers=auth(key),
                                     json={"reason": "r"}), 422, "seq")
    assert_problem(await client.post(f"/v1/runs/{failed_id}/succeed", headers=auth(key),
                                     json={"reason": "r", "output": "x" * 2000}), 413)
    assert (await run_row(pool, tenant_id, failed_id)).state == "dead_lettered"


async def test_a_run_dead_lettered_twice_projects_its_fold_and_one_letter(
        pool: asyncpg.Pool) -> None:
    from ostinato.domain.lifecycle import fold
    from ostinato.eventlog.records import StreamHead
    from tests.helpers.rows import ROW, _as_run
    from tests.helpers.run_stories import T0, scheduled

    tenant_id, _ = await new_tenant(pool)

    def attempt(n: int) -> list[ev.Event]:
        return [ev.RunQueued(pool="default"),
                ev.RunStarted(attempt=n, fencing_token=n, worker_id="w", lease_expires_at=T0)]

    def dead(n: int) -> list[ev.Event]:
        return [ev.RunFailed(attempt=n, fencing_token=n, error_type=f"e{n}", message="m",
                             retryable=False),
                ev.RunDeadLettered(reason="permanent", error_type=f"e{n}", message="m",
                                   attempts=n)]

    story: list[ev.Event] = [
        scheduled(), *attempt(1),
        ev.StepCompleted(seq=0, name="a", attempt=1, fencing_token=1, output=1),
        ev.StepFailed(seq=1, name="b", attempt=1, fencing_token=1, error_type="x", message="m"),
        *dead(1),
        ev.StepSkipped(seq=1, name="b", set_aside=1, by="ops", reason="r", output=2),
        ev.RunReopened(cause="step_skipped", by="ops", reason="r"), *attempt(2),
        ev.StepCompleted(seq=2, name="c", attempt=2, fencing_token=2, output=3), *dead(2),
        ev.RunRestarted(from_seq=0, set_aside=3, by="ops", reason="again"),
        ev.RunReopened(cause="restarted", by="ops", reason="again"),
        ev.RunMarkedSucceeded(output_ref=None, by="ops", reason="done")]
    head = StreamHead(uuid.uuid4(), tenant_id)
    async with pool.acquire() as conn:
        async with conn.transaction():
            await store().append(conn, [head.next(e, "ops") for e in story])
        assert _as_run(await conn.fetchrow(ROW, head.stream_id)) == fold(story)
        letter = await conn.fetchrow(
            "SELECT error_type, triage_state, triage_comment FROM dead_letters"
            " WHERE run_id = $1", head.stream_id)
        aside = await conn.fetch(
            "SELECT set_aside_version, seq, output::text FROM run_steps_set_aside"
            " WHERE run_id = $1 ORDER BY 1, 2", head.stream_id)
        assert await conn.fetchval("SELECT count(*) FROM run_steps WHERE run_id = $1",
                                   head.stream_id) == 0
    assert tuple(letter) == ("e2", "fixed", "done")
    assert [tuple(r) for r in aside] == [(8, 1, None), (15, 0, "1"), (15, 1, "2"),
                                         (15, 2, "3")]
    await assert_rebuild_is_equal(pool)
