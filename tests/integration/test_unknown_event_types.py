"""A run's stream holding an event of a type this release does not know, appended through the
store the way a newer release writes it during a rolling upgrade (docs/UPGRADES.md): the api
still answers the run, its events (the opaque one shown as written), its steps, the run list
and the UI page, all 200; the run's state is as before; this release's next append follows it
(the projection moved the stream's version), and a rebuild of the read models gives the same
rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from ostinato.domain import events as ev
from ostinato.domain.states import RunState
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.eventlog.records import StreamHead
from tests.helpers.api import assert_problem, auth
from tests.helpers.integration import login, new_tenant, queued_workflow_run, run_row, store

pytestmark = pytest.mark.integration

NEWER = {"type": "RunTeleported", "to": "mars", "why": {"asked_by": "a newer release"}}


async def test_a_newer_release_s_event_type_leaves_the_run_readable_and_unchanged(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    other_tenant, other_key = await new_tenant(pool)
    run_id = await queued_workflow_run(pool, tenant_id, "orders.approval")
    row = await run_row(pool, tenant_id, run_id)
    head = StreamHead.of(row)
    async with pool.acquire() as conn, conn.transaction():  # the run starts, records a step
        await store().append(conn, [
            head.next(ev.RunStarted(attempt=1, fencing_token=1, worker_id="w",
                                    lease_expires_at=datetime.now(UTC) + timedelta(hours=1)),
                      "gateway"),
            head.next(ev.StepCompleted(seq=0, name="charge", attempt=1, fencing_token=1,
                                       output={"ok": True}), "gateway")])
    before = (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()
    steps_before = (await client.get(f"/v1/runs/{run_id}/steps", headers=auth(key))).json()

    async with pool.acquire() as conn, conn.transaction():  # as a newer release writes it
        await store().append(conn, [head.next(
            ev.UnknownEvent(type_name=NEWER["type"], data=NEWER, stream_type="run"), "newer")])
    at = head.version

    r = await client.get(f"/v1/runs/{run_id}", headers=auth(key))
    assert r.status_code == 200, r.text
    after = r.json()
    assert after["state"] == before["state"] == "running"
    unchanged = {k: v for k, v in before.items() if k not in ("version", "updated_at")}
    assert {k: after[k] for k in unchanged} == unchanged

    r = await client.get(f"/v1/runs/{run_id}/events", headers=auth(key))
    assert r.status_code == 200, r.text
    last = r.json()["items"][-1]
    assert (last["version"], last["type"], last["data"], last["actor"]) == (
        at, "RunTeleported", NEWER, "newer")
    assert last["occurred_at"]

    r = await client.get(f"/v1/runs/{run_id}/steps", headers=auth(key))
    assert r.status_code == 200, r.text
    assert r.json() == steps_before and [s["name"] for s in r.json()["items"]] == ["charge"]

    r = await client.get("/v1/runs", params={"job_id": before["job_id"]}, headers=auth(key))
    assert r.status_code == 200, r.text
    assert [(i["id"], i["state"]) for i in r.json()["items"]] == [(str(run_id), "running")]

    assert_problem(await client.get(f"/v1/runs/{run_id}/events", headers=auth(other_key)), 404)
    assert other_tenant != tenant_id

    await login(client, key)
    page = await client.get(f"/ui/runs/{run_id}")
    assert page.status_code == 200 and "RunTeleported" in page.text and "mars" in page.text

    # this release's next append follows the opaque event: the projection moved the version
    r = await client.post(f"/v1/runs/{run_id}/cancel", headers=auth(key), json={})
    assert r.status_code in (200, 202), r.text
    row = await run_row(pool, tenant_id, run_id)
    assert row.version > at and row.state in (RunState.RUNNING, RunState.CANCELLED)

    async with pool.acquire() as conn:
        live = await snapshot(conn)
        await rebuild(conn)
        assert await snapshot(conn) == live
