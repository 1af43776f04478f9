"""A running workflow's published state and its updates (issue 40 item 3), through the API's
routes, the worker-gateway and an SDK worker on the real PostgreSQL: `ctx.set` values are read
by name while the run waits and after it ended, a set already recorded is not sent again on
replay; an update is taken by the workflow's handler, answered, awaited by the caller, the
same idempotency key answers the same, an unknown name is refused by the workflow, a final run
refuses updates; other tenants see nothing and bad input changes nothing."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.domain.workflow import MAX_STATE_BYTES
from ostinato.sdk import StateTooLarge, WorkflowContext, workflow
from tests.helpers.api import assert_problem, auth
from tests.helpers.integration import dispatch, new_tenant, queued_workflow_run
from tests.helpers.workflows import (
    claimed_run,
    drive,
    send_steps,
    signal,
    state_of,
    step_names,
    work_until,
)

pytestmark = pytest.mark.integration


def publisher(ran: list[str]) -> Any:
    @workflow("reports.build")
    async def build(ctx: WorkflowContext, payload: None) -> str:
        await ctx.set("progress", {"done": 0, "of": 2})
        await ctx.step("first", ran.append, "first")
        await ctx.set("progress", {"done": 1, "of": 2})
        try:
            await ctx.set("huge", "x" * (MAX_STATE_BYTES + 1))
        except StateTooLarge:
            ran.append("refused")
        await ctx.wait_for_signal("go")
        await ctx.set("progress", {"done": 2, "of": 2})
        await ctx.set("phase", "done")
        return "built"

    return build


async def test_published_state_is_read_by_name_while_the_run_waits_and_after(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    ran: list[str] = []
    build = publisher(ran)
    run_id = await queued_workflow_run(pool, tenant_id, "reports.build")
    await work_until(pool, gateway, key, build, tenant_id, run_id, "suspended")
    assert ran == ["first", "refused"]  # the SDK refused the huge value before sending it

    r = await client.get(f"/v1/runs/{run_id}/state", headers=auth(key))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["run_state"] == "suspended"
    assert set(body["values"]) == {"progress"}
    assert body["values"]["progress"]["value"] == {"done": 1, "of": 2}
    assert body["values"]["progress"]["seq"] == 2
    r = await client.get(f"/v1/runs/{run_id}/state", params={"name": "phase", "wait": 0.3},
                         headers=auth(key))
    assert r.status_code == 200 and r.json()["values"] == {}  # not published yet

    # a waiter for "phase" is answered once the run publishes it
    waiter = asyncio.create_task(client.get(
        f"/v1/runs/{run_id}/state", params={"name": "phase", "wait": 60}, headers=auth(key)))
    await signal(pool, tenant_id, run_id)
    assert await dispatch(pool) == 1
    await work_until(pool, gateway, key, build, tenant_id, run_id, "succeeded")
    answered = await waiter
    assert answered.status_code == 200 and answered.json()["values"]["phase"]["value"] == "done"

    # replayed after the wake-up: the sets before the wait were not sent again
    assert ran == ["first", "refused", "refused"]
    assert await step_names(pool, tenant_id, run_id) == [
        "set:progress", "first", "set:progress", "signal:go", "set:progress", "set:phase"]
    r = await client.get(f"/v1/runs/{run_id}/state", headers=auth(key))
    values = r.json()["values"]
    assert values["progress"]["value"] == {"done": 2, "of": 2}
    assert values["phase"]["value"] == "done" and r.json()["run_state"] == "succeeded"

    # other tenants see nothing; bad input is refused
    _, other_key = await new_tenant(pool)
    assert_problem(await client.get(f"/v1/runs/{run_id}/state", headers=auth(other_key)), 404)
    assert_problem(await client.get(f"/v1/runs/{uuid.uuid4()}/state", headers=auth(key)), 404)
    assert_problem(await client.get(f"/v1/runs/{run_id}/state", params={"wait": 1000},
                                    headers=auth(key)), 422)
    assert_problem(await client.get(f"/v1/runs/{run_id}/state", params={"name": ""},
                                    headers=auth(key)), 422)


async def test_the_gateway_refuses_a_published_value_over_the_cap(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    base = {"run_id": str(run.run_id), "fencing_token": run.fencing_token, "seq": 0}
    [big] = await send_steps(gateway, key, [{**base, "name": "set:big",
                                             "output": "x" * (MAX_STATE_BYTES + 1)}])
    assert big.status == 413 and "limit" in (big.detail or "")
    assert await step_names(pool, tenant_id, run.run_id) == []  # nothing recorded
    [ok] = await send_steps(gateway, key, [{**base, "name": "set:big", "output": "small"}])
    assert ok.status == 200


def cart_workflow(reserved: list[str]) -> Any:
    @workflow("shop.cart")
    async def cart(ctx: WorkflowContext, payload: None) -> list[str]:
        items: list[str] = []

        async def add_item(p: dict[str, Any]) -> dict[str, Any]:
            await ctx.step("reserve", reserved.append, p["sku"])  # a step inside a handler
            items.append(p["sku"])
            return {"items": list(items)}

        while len(items) < 2:
            await ctx.handle_update({"add_item": add_item})
        await ctx.set("items", items)
        return items

    return cart


async def test_an_update_is_answered_once_per_key_and_an_unknown_name_is_refused(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    reserved: list[str] = []
    cart = cart_workflow(reserved)
    run_id = await queued_workflow_run(pool, tenant_id, "shop.cart")
    await work_until(pool, gateway, key, cart, tenant_id, run_id, "suspended")
    url = f"/v1/runs/{run_id}/updates"
    worker = asyncio.create_task(drive(pool, gateway, key, [cart], tenant_id, run_id,
                                       "succeeded"))

    async def update(name: str, payload: Any, ikey: str) -> dict[str, Any]:
        r = await client.post(url, json={"name": name, "payload": payload,
                                         "idempotency_key": ikey}, headers=auth(key))
        assert r.status_code in (200, 202), r.text
        sent = r.json()
        r = await client.get(f"{url}/{sent['update_id']}", params={"wait": 60},
                             headers=auth(key))
        assert r.status_code == 200, r.text
        return {**r.json(), "created": sent["created"]}

    first = await update("add_item", {"sku": "a"}, "k1")
    assert first["state"] == "completed" and first["output"] == {"items": ["a"]}
    assert first["name"] == "add_item" and first["taken"] is True and first["created"]
    again = await update("add_item", {"sku": "a"}, "k1")
    assert again["update_id"] == first["update_id"] and again["created"] is False
    assert again["output"] == {"items": ["a"]}
    refused = await update("remove_item", {"sku": "a"}, "k2")
    assert refused["state"] == "rejected" and refused["error"]["type"] == "unknown_update"
    assert "add_item" in refused["error"]["message"]
    second = await update("add_item", {"sku": "b"}, "k3")
    assert second["output"] == {"items": ["a", "b"]}
    await worker
    assert reserved == ["a", "b"]  # each update handled once, across the wake-ups
    names = await step_names(pool, tenant_id, run_id)
    assert names.count("update") == 3 and sum(n.startswith("reply:") for n in names) == 3

    # a final run takes no update; its answered updates stay readable
    assert await state_of(pool, tenant_id, run_id) == "succeeded"
    body = assert_problem(await client.post(url, json={"name": "add_item"}, headers=auth(key)),
                          409)
    assert "takes no updates" in body["detail"]
    r = await client.get(f"{url}/{first['update_id']}", headers=auth(key))
    assert r.json()["state"] == "completed"

    # other tenants see nothing; bad input changes nothing
    _, other_key = await new_tenant(pool)
    assert_problem(await client.get(f"{url}/{first['update_id']}", headers=auth(other_key)),
                   404)
    assert_problem(await client.post(url, json={"name": "add_item"}, headers=auth(other_key)),
                   404)
    assert_problem(await client.get(f"{url}/{uuid.uuid4()}", headers=auth(key)), 404)
    live = await queued_workflow_run(pool, tenant_id, "shop.cart")
    live_url = f"/v1/runs/{live}/updates"
    assert_problem(await client.post(live_url, json={"name": ""}, headers=auth(key)), 422)
    assert_problem(await client.post(live_url, json={"name": "a", "x": 1}, headers=auth(key)),
                   422)
    assert_problem(await client.post(live_url, json={
        "name": "add_item", "payload": "x" * (MAX_STATE_BYTES + 1)}, headers=auth(key)), 413)
    r = await client.post(f"/v1/runs/{live}/signals/$update", json=1, headers=auth(key))
    assert_problem(r, 422, "name")  # the engine's channel is not a user's signal
    assert await pool.fetchval("SELECT count(*) FROM run_signals WHERE run_id = $1", live) == 0


async def test_an_update_left_unanswered_by_a_run_that_ended_is_abandoned(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)

    @workflow("shop.quick")
    async def quick(ctx: WorkflowContext, payload: None) -> str:
        return "done"

    run_id = await queued_workflow_run(pool, tenant_id, "shop.quick")
    r = await client.post(f"/v1/runs/{run_id}/updates", json={"name": "add_item"},
                          headers=auth(key))
    assert r.status_code == 202 and r.json()["state"] == "pending", r.text
    await work_until(pool, gateway, key, quick, tenant_id, run_id, "succeeded")
    r = await client.get(f"/v1/runs/{run_id}/updates/{r.json()['update_id']}",
                         params={"wait": 60}, headers=auth(key))
    assert r.json()["state"] == "abandoned" and r.json()["taken"] is False
