"""A running workflow's published state and its updates (issue 40 item 3), through the API's
routes, the worker-gateway and an SDK worker on the real PostgreSQL: `ctx.set` values are read
by name while the run waits and after it ended, a set already recorded is not sent again on
replay; an update is taken by the workflow's handler, answered, awaited by the caller, the
same idempotency key answers the same, an unknown name is refused by the workflow, a final run
refuses updates; other tenants see nothing and bad input changes nothing."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.client import (
    ApiError,
    AsyncClient,
    Client,
    UpdateRejectedError,
    UpdateTimeoutError,
)
from ostinato.domain.workflow import MAX_STATE_BYTES
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.sdk import StateTooLarge, WorkflowContext, workflow
from services.api.app import create_app
from tests.helpers.api import ADMIN, assert_problem, auth
from tests.helpers.cli import cli
from tests.helpers.integration import dispatch, login, new_tenant, queued_workflow_run, store
from tests.helpers.waiting import until
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

    # the run page shows the latest values
    await login(client, key)
    page = (await client.get(f"/ui/runs/{run_id}")).text
    assert "Published state" in page and "phase" in page and "&quot;done&quot;" in page

    # other tenants see nothing; bad input is refused
    _, other_key = await new_tenant(pool)
    await login(client, other_key)
    assert (await client.get(f"/ui/runs/{run_id}")).status_code == 404
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


@dataclass
class Api:
    url: str
    state: Any  # the app's state: its news listener (`run_news`) once someone waited


@pytest.fixture
async def api(pool: asyncpg.Pool, db_url: str) -> AsyncIterator[Api]:
    """The public API served over real HTTP, for the clients and the CLI."""
    service = Service("api", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    app = create_app(service, store())
    server = HttpServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        yield Api(f"http://127.0.0.1:{server.port}", app.state)
    finally:
        await server.stop()


async def _true(value: bool) -> bool:
    return value


def basket_workflow() -> Any:
    @workflow("shop.basket")
    async def basket(ctx: WorkflowContext, payload: None) -> list[str]:
        items: list[str] = []

        async def add_item(p: dict[str, Any]) -> dict[str, Any]:
            items.append(p["sku"])
            await ctx.set("basket", items)  # published from a handler
            return {"items": list(items)}

        while len(items) < 2:
            await ctx.handle_update({"add_item": add_item})
        return items

    return basket


async def test_clients_and_the_cli_send_updates_await_answers_and_read_state(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, api: Api, tmp_path: Path) -> None:
    tenant_id, key = await new_tenant(pool)
    basket = basket_workflow()
    run_id = await queued_workflow_run(pool, tenant_id, "shop.basket")
    await work_until(pool, gateway, key, basket, tenant_id, run_id, "suspended")
    worker = asyncio.create_task(drive(pool, gateway, key, [basket], tenant_id, run_id,
                                       "succeeded"))
    env = {"OSTINATO_API_URL": api.url, "OSTINATO_API_KEY": key}
    async with AsyncClient(api.url, key) as client:
        assert await client.runs.update(run_id, "add_item", {"sku": "a"}, timeout=60) == {
            "items": ["a"]}
        with pytest.raises(UpdateRejectedError) as refused:
            await client.runs.update(run_id, "clear", None, timeout=60)
        assert refused.value.error_type == "unknown_update" and refused.value.state == "rejected"
        view = await client.runs.state(run_id, "basket")
        assert view.values["basket"].value == ["a"]

        # a reader waiting for a name never published: answered by the run's end, a notice
        news = api.state.run_news
        never = asyncio.create_task(client.runs.state(run_id, "never", wait=60))
        await until(lambda: _true(news.connects >= 1 and news.waiting >= 1), 60,
                    "the reader waits on a listening connection")
        heard = news.notices
        code, out, err = await cli(tmp_path, "runs", "update", str(run_id), "add_item",
                                   "--payload", '{"sku": "b"}', "-o", "json", env=env)
        assert code == 0, err
        assert json.loads(out)["state"] == "completed"
        assert json.loads(out)["output"] == {"items": ["a", "b"]}
        await worker
        ended = await never
        assert ended.run_state == "succeeded" and ended.values == {}
        assert news.notices > heard  # woken by the notice, not by its wait running out
        code, out, err = await cli(tmp_path, "runs", "state", str(run_id), "-o", "json",
                                   env=env)
        assert code == 0, err
        body = json.loads(out)
        assert body["run_state"] == "succeeded" and body["values"]["basket"]["value"] == [
            "a", "b"]
        code, out, err = await cli(tmp_path, "runs", "update", str(run_id), "add_item",
                                   env=env)
        assert code == 1 and "takes no updates" in err  # a final run: the 409 problem

        # a run no worker takes: the caller's timeout, then the update is still pending
        idle = await queued_workflow_run(pool, tenant_id, "shop.basket")
        with pytest.raises(UpdateTimeoutError) as late:
            await client.runs.update(idle, "add_item", {"sku": "c"}, timeout=0.2)
        outcome = await client.runs.update_outcome(idle, late.value.update_id)
        assert outcome.state == "pending" and outcome.taken is False
        code, out, err = await cli(tmp_path, "runs", "update", str(idle), "add_item",
                                   "--timeout", "0", env=env)
        assert code == 5, (out, err)
    with Client(api.url, key) as sync:  # the sync client, in a thread: the API serves here
        view = await asyncio.to_thread(sync.runs.state, run_id)
        assert view.values["basket"].value == ["a", "b"]
        with pytest.raises(ApiError) as final:
            await asyncio.to_thread(sync.runs.update, run_id, "add_item", {"sku": "d"})
        assert final.value.status == 409


async def test_a_draining_api_answers_state_waits_at_once_as_things_stand(
        pool: asyncpg.Pool, api: Api) -> None:
    """SIGTERM (`stopping`) while readers wait for a name never published: each is answered
    with the values as they stand, not held until its wait ends or cut when the port closes."""
    tenant_id, key = await new_tenant(pool)
    run_id = await queued_workflow_run(pool, tenant_id, "reports.build")
    async with AsyncClient(api.url, key) as client:
        waits = [asyncio.create_task(client.runs.state(run_id, "never", wait=60))
                 for _ in range(3)]
        await until(lambda: _true(getattr(api.state, "run_news", None) is not None
                                  and api.state.run_news.waiting == 3), 60, "three waiting")
        assert not any(w.done() for w in waits)
        api.state.stopping.set()  # the drain begins
        # a give-up only: undrained, each would hold its 60 s wait (the cap) before answering
        finished, _ = await asyncio.wait(waits, timeout=50)
        assert len(finished) == 3, "the waits were held through the drain"
        answers = [w.result() for w in waits]
    assert [a.values for a in answers] == [{}, {}, {}]
    assert api.state.run_news.waiting == 0
