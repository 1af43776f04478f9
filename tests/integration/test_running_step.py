"""A running workflow shows the step it is in (issue 40 item 5; docs/WORKFLOW_STEPS.md, "while a
step runs"): a real SDK worker whose step blocks until the test has seen it, through the
worker-gateway and the public API on the real PostgreSQL, read with the typed clients (sync and
async); another tenant sees nothing; a stale or foreign start writes nothing; a bad start item
is a 4xx problem that changes nothing."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.client import AsyncClient, Client
from ostinato.sdk import Worker, WorkflowContext, workflow
from ostinato.wire import worker as p
from ostinato.wire.api import RunView
from tests.helpers.api import GATEWAY_BASE, assert_problem, auth
from tests.helpers.cli import cli
from tests.helpers.integration import login, new_tenant, queued_workflow_run, run_row
from tests.helpers.waiting import until
from tests.helpers.workflows import claimed_run, send_steps

pytestmark = pytest.mark.integration


def charging(seen: asyncio.Event) -> Any:
    """A workflow whose second step, `charge`, runs until `seen` is set."""

    async def charge() -> str:
        await seen.wait()
        return "charged"

    @workflow("shop.checkout")
    async def checkout(ctx: WorkflowContext, payload: None) -> str:
        await ctx.step("reserve", lambda: "reserved")
        return str(await ctx.step("charge", charge))

    return checkout


async def test_the_executing_step_is_shown_until_it_is_recorded(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, api_url: str, tmp_path: Path) -> None:
    tenant_id, key = await new_tenant(pool)
    seen = asyncio.Event()
    run_id = await queued_workflow_run(pool, tenant_id, "shop.checkout")
    worker = Worker(GATEWAY_BASE, key, [charging(seen)], http_client=gateway,
                    claim_wait_seconds=0.2, shutdown_grace_seconds=0)
    working = asyncio.create_task(worker.run())
    try:
        async with AsyncClient(api_url, key) as client:
            async def running() -> RunView | None:
                run = await client.runs.get(str(run_id))
                return run if run.running_step is not None else None
            run = await until(running, within=600, what="the charge step shown")  # hang guard
            assert run.state == "running"
            assert run.running_step is not None
            assert (run.running_step.seq, run.running_step.name) == (1, "charge")
            assert run.current_step == "charge" and run.steps_done == 1
            assert run.timestamps.started_at is not None
            assert run.running_step.since >= run.timestamps.started_at  # began in this attempt
            steps = [s async for s in client.runs.steps(str(run_id))]
            assert [(s.seq, s.name, s.state) for s in steps] == [
                (0, "reserve", "succeeded"), (1, "charge", "running")]
            assert steps[1].recorded_at is None and steps[1].started_at == run.running_step.since
            page = await client.runs.steps_page(str(run_id), after=0)
            assert [s.state for s in page.items] == ["running"] and page.steps_done == 1

        def read_sync() -> tuple[RunView, list[str]]:
            with Client(api_url, key) as sync:
                return (sync.runs.get(str(run_id)),
                        [s.state for s in sync.runs.steps(str(run_id))])
        view, states = await asyncio.to_thread(read_sync)
        assert view.running_step == run.running_step and states == ["succeeded", "running"]
        env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
        code, out, err = await cli(tmp_path, "runs", "get", str(run_id), "-o", "json", env=env)
        assert code == 0, err
        shown = json.loads(out)
        assert shown["running_step"]["name"] == "charge" and shown["current_step"] == "charge"
        code, out, err = await cli(tmp_path, "runs", "steps", str(run_id), "-o", "json", env=env)
        assert code == 0, err
        assert [(s["name"], s["state"]) for s in json.loads(out)] == [
            ("reserve", "succeeded"), ("charge", "running")]
        code, out, err = await cli(tmp_path, "runs", "steps", str(run_id), env=env)
        assert code == 0 and "running" in out.splitlines()[-1], out
        seen.set()  # the step may end now

        async def succeeded() -> bool:
            return (await run_row(pool, tenant_id, run_id)).state == "succeeded"
        await until(succeeded, within=600, what="the run succeeded")
    finally:
        seen.set()
        await worker.stop()
        await working
    async with AsyncClient(api_url, key) as client:
        done = await client.runs.get(str(run_id))
        assert done.running_step is None and done.current_step is None
        assert [s.state async for s in client.runs.steps(str(run_id))] == [
            "succeeded", "succeeded"]


async def test_the_run_page_shows_it_and_another_tenant_sees_no_such_run(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    _, other = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    await started(gateway, key, run, seq=0, name="charge")
    assert (await client.get(f"/v1/runs/{run.run_id}", headers=auth(key))
            ).json()["running_step"]["name"] == "charge"
    await login(client, key)
    page = (await client.get(f"/ui/runs/{run.run_id}")).text
    assert "charge" in page and "running since" in page and "(step 0, running since" in page
    for path in (f"/v1/runs/{run.run_id}", f"/v1/runs/{run.run_id}/steps"):
        assert_problem(await client.get(path, headers=auth(other)), 404)
    await login(client, other)
    assert (await client.get(f"/ui/runs/{run.run_id}")).status_code == 404
    # and the other tenant's worker cannot set it: its start writes nothing
    await started(gateway, other, run, seq=0, name="forged")
    assert (await client.get(f"/v1/runs/{run.run_id}", headers=auth(key))
            ).json()["running_step"]["name"] == "charge"


async def test_a_start_under_an_older_token_or_at_a_recorded_position_shows_nothing(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    assert run.step_starts  # this gateway takes them
    stale = p.ClaimedRun(**{**{f: getattr(run, f) for f in run.__struct_fields__},
                            "fencing_token": run.fencing_token - 1})
    await started(gateway, key, stale, seq=0, name="old")
    view = (await client.get(f"/v1/runs/{run.run_id}", headers=auth(key))).json()
    assert view["running_step"] is None
    [done] = await send_steps(gateway, key, [{"run_id": run.run_id, "fencing_token":
                                              run.fencing_token, "seq": 0, "name": "a"}])
    assert done.status == 200
    await started(gateway, key, run, seq=0, name="a")  # late: position 0 is recorded
    view = (await client.get(f"/v1/runs/{run.run_id}", headers=auth(key))).json()
    assert view["running_step"] is None and view["steps_done"] == 1
    await started(gateway, key, run, seq=1, name="b")
    await started(gateway, key, run, seq=0, name="a")  # never back to an earlier position
    view = (await client.get(f"/v1/runs/{run.run_id}", headers=auth(key))).json()
    assert view["running_step"]["seq"] == 1 and view["current_step"] == "b"


async def test_a_bad_start_item_is_a_problem_and_changes_nothing(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run = await claimed_run(pool, gateway, tenant_id, key)
    good = {"run_id": run.run_id, "fencing_token": run.fencing_token, "seq": 0, "name": "a"}
    for bad in ({**good, "seq": -1}, {**good, "name": ""}, {**good, "age_ms": -5},
                {**good, "name": "x" * (p.MAX_STEP_NAME_CHARS + 1)}, {**good, "extra": 1}):
        r = await gateway.post(p.BATCH_PATH, headers=auth(key),
                               json={"worker_id": "w1", "started": [bad]})
        assert_problem(r, 422)
    unknown = {**good, "run_id": str(uuid.uuid4())}
    r = await gateway.post(p.BATCH_PATH, headers=auth(key),
                           json={"worker_id": "w1", "started": [unknown, {**good,
                                                                          "run_id": "nope"}]})
    assert r.status_code == 200 and r.json()["results"] == []  # no result for a start
    view = (await client.get(f"/v1/runs/{run.run_id}", headers=auth(key))).json()
    assert view["running_step"] is None


async def started(gateway: httpx.AsyncClient, key: str, run: p.ClaimedRun, *, seq: int,
                  name: str) -> None:
    """A start as the SDK sends it, alone in a batch."""
    r = await gateway.post(p.BATCH_PATH, headers=auth(key), json={
        "worker_id": "w1", "started": [{"run_id": run.run_id, "fencing_token":
                                        run.fencing_token, "seq": seq, "name": name,
                                        "age_ms": 12.5}]})
    assert r.status_code == 200, r.text
