"""Child workflows and jobs (`ctx.child`, `ctx.start_child`; `ostinato.runs.children`) through the
worker-gateway's HTTP routes, the scheduler's and dispatcher's code and the real PostgreSQL: a
child's outcome becomes its parent's step (success, a dead letter, a cancel), the parent holds no
worker meanwhile, a started child is created once however often its step is reported, and
cancelling a parent cancels its children."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from ostinato.clock import FakeClock, SystemClock
from ostinato.domain import events as ev
from ostinato.leases import attempts as attempt_leases
from ostinato.runs.children import child_run_id
from ostinato.sdk import ChildFailedError, PermanentError, Worker, WorkflowContext, task, workflow
from ostinato.stores import runs
from services.reconciler.checks import pipeline
from tests.helpers.api import GATEWAY_BASE, auth
from tests.helpers.integration import new_tenant, queued_workflow_run, run_row, store
from tests.helpers.waiting import until
from tests.helpers.workflows import claimed_run, drive, events_of, kinds, send_steps, tell_parents

pytestmark = pytest.mark.integration


async def test_a_child_runs_once_and_its_output_becomes_the_parents_step(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    effects: list[str] = []

    @task("billing.charge")
    async def charge(payload: dict[str, int]) -> dict[str, int]:
        effects.append("charge")
        return {"charged": payload["amount"]}

    @workflow("billing.order")
    async def order(ctx: WorkflowContext, payload: dict[str, int]) -> Any:
        effects.append("order")
        charged = await ctx.child(charge, {"amount": payload["amount"]})
        return {"receipt": charged["charged"]}

    run_id = await queued_workflow_run(pool, tenant_id, "billing.order", {"amount": 9})
    # the parent suspends waiting for its child and holds no lease meanwhile
    worker = Worker(GATEWAY_BASE, key, [order], http_client=gateway, claim_wait_seconds=0.2,
                    shutdown_grace_seconds=0)
    running = asyncio.create_task(worker.run())
    try:
        async def suspended() -> bool:
            return (await run_row(pool, tenant_id, run_id)).state == "suspended"
        await until(suspended, within=600, what="the parent suspended")
    finally:
        await worker.stop()
        await running
    parent = await run_row(pool, tenant_id, run_id)
    child_id = child_run_id(run_id, 0)
    assert (parent.wait_reason, parent.wait_child, parent.wait_name) == (
        "child", child_id, "child:billing.charge")
    async with pool.acquire() as conn:
        assert await attempt_leases.current_tokens(conn, [run_id], tenant_id) == []
    child = await run_row(pool, tenant_id, child_id)
    assert (child.parent_run_id, child.job_id, child.scheduled_for, child.trigger) == (
        run_id, parent.job_id, parent.scheduled_for, "child")
    r = await client.get(f"/v1/runs/{run_id}", headers=auth(key))
    assert r.status_code == 200, r.text
    assert r.json()["waiting_reason"] == f"child run {child_id}"
    assert r.json()["waiting_for_child"] == str(child_id)
    assert (await client.get(f"/v1/runs/{child_id}", headers=auth(key))).json()[
        "parent_run_id"] == str(run_id)
    assert await tell_parents(pool) == 0  # the child is not final: nobody to tell
    now = await pipeline.check_once(pool, SystemClock(), stuck_after=timedelta(minutes=1))
    assert REGISTRY.get_sample_value("ostinato_workflows_suspended", {"reason": "child"}) == 1
    assert now.suspended_too_long == {}  # waiting for a moment only
    later = await pipeline.check_once(pool, FakeClock(datetime.now(UTC) + timedelta(days=2)),
                                      stuck_after=timedelta(minutes=1),
                                      suspended_alert_after=timedelta(days=1))
    assert later.suspended_too_long == {(str(tenant_id), "child"): 1}
    assert REGISTRY.get_sample_value("ostinato_workflows_suspended_too_long",
                                     {"tenant": str(tenant_id), "reason": "child"}) == 1

    await drive(pool, gateway, key, [order, charge], tenant_id, run_id, "succeeded")
    assert effects == ["order", "charge", "order"]  # the child ran once; the parent replayed
    assert kinds(await events_of(pool, tenant_id, run_id)) == [
        "RunScheduled", "RunQueued", "RunStarted", "ChildStarted", "RunSuspended",
        "ChildFinished", "RunWoken", "RunQueued", "RunStarted", "RunSucceeded"]
    finished = [e for e in await events_of(pool, tenant_id, run_id)
                if isinstance(e, ev.ChildFinished)]
    assert [(f.seq, f.state, f.output) for f in finished] == [(0, "succeeded", {"charged": 9})]
    child_events = await events_of(pool, tenant_id, child_id)
    assert kinds(child_events)[-2:] == ["RunSucceeded", "ParentNotified"]
    assert child_events[-1].woke is True
    assert await tell_parents(pool) == 0  # told once
    r = await client.get(f"/v1/runs/{run_id}/steps", headers=auth(key))
    [step] = r.json()["items"]
    assert (step["name"], step["succeeded"], step["output"]) == (
        "child:billing.charge", True, {"charged": 9})
    assert (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()["output"] == {
        "receipt": 9}


async def test_a_dead_lettered_child_fails_the_step_with_its_error(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    caught: list[tuple[str, str]] = []

    @task("cards.capture")
    async def capture(payload: None) -> None:
        raise PermanentError("card declined", type="declined")

    @workflow("cards.order")
    async def order(ctx: WorkflowContext, payload: None) -> str:
        try:
            await ctx.child("cards.capture")
        except ChildFailedError as exc:
            caught.append((exc.type, str(exc)))
            return "refunded"
        return "captured"

    run_id = await queued_workflow_run(pool, tenant_id, "cards.order")
    await drive(pool, gateway, key, [order, capture], tenant_id, run_id, "succeeded")
    assert caught == [("declined", "card declined")]
    child = await run_row(pool, tenant_id, child_run_id(run_id, 0))
    assert child.state == "dead_lettered"
    [finished] = [e for e in await events_of(pool, tenant_id, run_id)
                  if isinstance(e, ev.ChildFinished)]
    assert (finished.state, finished.error_type, finished.message) == (
        "dead_lettered", "declined", "card declined")


async def test_a_cancelled_child_fails_the_step_as_child_cancelled(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    caught: list[str] = []

    @workflow("reports.parent")
    async def parent(ctx: WorkflowContext, payload: None) -> str:
        try:
            return await ctx.child("reports.never_run")
        except ChildFailedError as exc:
            caught.append(exc.type)
            return "gave up"

    run_id = await queued_workflow_run(pool, tenant_id, "reports.parent")
    await drive(pool, gateway, key, [parent], tenant_id, run_id, "suspended")
    child_id = child_run_id(run_id, 0)
    r = await client.post(f"/v1/runs/{child_id}/cancel", headers=auth(key))
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    await drive(pool, gateway, key, [parent], tenant_id, run_id, "succeeded")
    assert caught == ["child_cancelled"]


async def test_cancelling_a_parent_cancels_its_children_and_theirs(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)

    @workflow("tree.middle")
    async def middle(ctx: WorkflowContext, payload: None) -> None:
        await ctx.child("tree.leaf")  # never served: stays queued

    @workflow("tree.root")
    async def root(ctx: WorkflowContext, payload: None) -> None:
        await ctx.start_child("tree.leaf")
        await ctx.child(middle)

    run_id = await queued_workflow_run(pool, tenant_id, "tree.root")
    middle_id, loose_id = child_run_id(run_id, 1), child_run_id(run_id, 0)
    await drive(pool, gateway, key, [root, middle], tenant_id, middle_id, "suspended")
    leaf_id = child_run_id(middle_id, 0)
    assert (await run_row(pool, tenant_id, leaf_id)).state in ("scheduled", "queued")
    r = await client.post(f"/v1/runs/{run_id}/cancel", headers=auth(key))
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    for rid in (run_id, middle_id, loose_id, leaf_id):
        assert (await run_row(pool, tenant_id, rid)).state == "cancelled", rid
    assert await tell_parents(pool) == 3  # each child marked told, nobody woken
    for rid in (middle_id, loose_id, leaf_id):
        notified = (await events_of(pool, tenant_id, rid))[-1]
        assert isinstance(notified, ev.ParentNotified) and notified.woke is False
    root_events = await events_of(pool, tenant_id, run_id)
    assert kinds(root_events)[-1] == "RunCancelled"
    r = await client.get(f"/v1/runs/{run_id}/children", headers=auth(key), params={"limit": 1})
    assert r.status_code == 200, r.text
    first = r.json()
    assert len(first["items"]) == 1 and first["next_after"] == first["items"][0]["id"]
    r = await client.get(f"/v1/runs/{run_id}/children", headers=auth(key),
                         params={"after": first["next_after"]})
    listed = first["items"] + r.json()["items"]
    assert sorted(c["id"] for c in listed) == sorted(map(str, (middle_id, loose_id)))
    assert {(c["state"], c["parent_notified"]) for c in listed} == {("cancelled", True)}
    _, other_key = await new_tenant(pool)
    assert (await client.get(f"/v1/runs/{run_id}/children",
                             headers=auth(other_key))).status_code == 404


async def test_a_started_child_does_not_hold_its_parent_and_is_created_once(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    item = {"run_id": run.run_id, "fencing_token": run.fencing_token, "seq": 0,
            "name": "start_child:mail.send", "child": {"task": "mail.send", "payload": {"to": 1},
                                                        "wait": False}}
    first, again = await send_steps(gateway, key, [item, item])
    run_id = uuid.UUID(run.run_id)
    child_id = child_run_id(run_id, 0)
    assert first.status == 200 and first.step is not None
    assert first.step.output == str(child_id) and not first.suspended
    assert again.status == 200  # a resend: already recorded
    parent = await run_row(pool, tenant_id, run_id)
    assert parent.state == "running" and parent.steps_done == 1
    assert kinds(await events_of(pool, tenant_id, run_id))[-1] == "ChildStarted"
    assert kinds(await events_of(pool, tenant_id, child_id)) == ["RunScheduled"]
    async with pool.acquire() as conn:
        payload = await conn.fetchval(
            "SELECT b.data FROM runs r JOIN blobs b ON b.id = r.payload_ref WHERE r.id = $1",
            child_id)
    assert payload == {"to": 1}  # the child's payload, in the blob store


async def test_bad_child_fields_are_refused_and_a_cancelled_parent_starts_no_child(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    base = {"run_id": run.run_id, "fencing_token": run.fencing_token, "seq": 0, "name": "c"}
    [bad] = await send_steps(gateway, key, [{**base, "child": {"task": "t", "pool": "nowhere"}}])
    assert bad.status == 422 and bad.detail is not None and "child.pool" in bad.detail
    [bad_retry] = await send_steps(gateway, key, [
        {**base, "child": {"task": "t", "retry": {"max_attempts": 0}}}])
    assert bad_retry.status == 422
    run_id = uuid.UUID(run.run_id)
    async with pool.acquire() as conn:
        assert await runs.children(conn, [child_run_id(run_id, 0)]) == {}
    r = await client.post(f"/v1/runs/{run_id}/cancel", headers=auth(key))
    assert r.status_code == 200 and r.json()["state"] == "running"  # asked to stop
    [refused] = await send_steps(gateway, key, [{**base, "child": {"task": "t"}}])
    assert refused.status == 200 and refused.cancel_requested and refused.step is None
    async with pool.acquire() as conn:
        assert await runs.children(conn, [child_run_id(run_id, 0)]) == {}
    assert (await run_row(pool, tenant_id, run_id)).steps_done == 0


async def test_a_large_signal_payload_is_kept_in_the_blob_store_and_delivered_whole(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    from ostinato.domain.workflow import INLINE_OUTPUT_BYTES
    from ostinato.runs.signals import send_signal

    tenant_id, key = await new_tenant(pool)
    seen: list[Any] = []

    @workflow("docs.review")
    async def review(ctx: WorkflowContext, payload: None) -> int:
        early = await ctx.wait_for_signal("early")  # sent before the wait: kept, then taken
        late = await ctx.wait_for_signal("late")  # sent while suspended: delivered at once
        seen.extend([early, late])
        return len(early["text"]) + len(late["text"])

    big = {"text": "x" * (INLINE_OUTPUT_BYTES + 1)}
    run_id = await queued_workflow_run(pool, tenant_id, "docs.review")
    async with pool.acquire() as conn:  # the API's limit is small in tests: send it directly
        await send_signal(conn, store(), tenant_id=tenant_id, run_id=run_id, name="early",
                          payload=big, actor="test", idempotency_key=None,
                          max_payload_bytes=1 << 20)
    await drive(pool, gateway, key, [review], tenant_id, run_id, "suspended")
    async with pool.acquire() as conn:
        await send_signal(conn, store(), tenant_id=tenant_id, run_id=run_id, name="late",
                          payload=big, actor="test", idempotency_key=None,
                          max_payload_bytes=1 << 20)
    await drive(pool, gateway, key, [review], tenant_id, run_id, "succeeded")
    assert seen == [big, big]
    events = await events_of(pool, tenant_id, run_id)
    for e in events:
        if isinstance(e, ev.SignalReceived | ev.SignalDelivered):
            assert e.payload is None and e.payload_ref is not None, e  # a reference only
    r = await client.get(f"/v1/runs/{run_id}/steps", headers=auth(key))
    assert [(s["output"], s["output_ref"] is not None) for s in r.json()["items"]] == [
        (None, True), (None, True)]
