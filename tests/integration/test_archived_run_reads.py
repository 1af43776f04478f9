"""An archived run's other reads (issue 38 item 3, docs/RETENTION.md "Reading an archived run"):
on the real PostgreSQL and the real S3 server, GET /v1/runs/{id}/result, /logs, /children,
/state, /updates/{id} and /steps/set-aside answer a run only the archive knows as they answered
it hot (`archived` true and `archived_at` added), where they answered 404 ("no such run"); a
run neither hot nor archived, or another tenant's, is still the 404.

The archive objects are a real workflow run's history (run by an SDK worker through the
gateway, read back by the archiver's own read) filed under a run id only the archive knows;
its child's object is filed under the child's own id, as the archiver files it."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.client import AsyncClient
from ostinato.objects import ObjectStore
from ostinato.sdk import WorkflowContext, workflow
from tests.helpers.api import auth
from tests.helpers.archives import api, history, put_archived, served
from tests.helpers.integration import new_tenant, queued_workflow_run
from tests.helpers.workflows import work_until

pytestmark = pytest.mark.integration

ARCHIVED_AT = datetime(2026, 11, 20, 3, 0, tzinfo=UTC)


@workflow("shop.report")
async def report(ctx: WorkflowContext, payload: Any) -> dict[str, Any]:
    logging.getLogger("shop").warning("reporting %s", payload["sku"])
    await ctx.set("phase", "started")
    await ctx.start_child("shop.never_served", {"n": 1})  # never served: it stays
    await ctx.set("phase", "done")
    await ctx.set("count", 3)
    return {"reported": payload["sku"]}


def same(hot: dict[str, Any], cold: dict[str, Any], hot_id: uuid.UUID,
         cold_id: uuid.UUID) -> None:
    """`cold` is `hot` answered for `cold_id` from the archive: the same but marked so."""
    assert hot["archived"] is False and hot["archived_at"] is None
    assert cold["archived"] is True and cold["archived_at"] is not None
    text = str(hot).replace(str(hot_id), str(cold_id))
    assert str({**cold, "archived": False, "archived_at": None}) == text


async def test_an_archived_run_s_result_logs_children_state_and_updates_read_as_hot(
        pool: asyncpg.Pool, db_url: str, gateway: httpx.AsyncClient,
        object_store: ObjectStore) -> None:
    tenant_id, key = await new_tenant(pool)
    hot_id = await queued_workflow_run(pool, tenant_id, "shop.report", {"sku": "A-1"})
    await work_until(pool, gateway, key, report, tenant_id, hot_id, "succeeded")
    cold_id = uuid.uuid4()  # only the archive knows it
    parent = await history(pool, tenant_id, hot_id, ARCHIVED_AT, as_id=cold_id)
    async with pool.acquire() as conn:
        [child_id] = [r["id"] for r in await conn.fetch(
            "SELECT id FROM runs WHERE parent_run_id = $1", hot_id)]
    await put_archived(object_store, parent,
                       await history(pool, tenant_id, child_id, ARCHIVED_AT))
    async with api(pool, db_url, object_store) as client:
        async def both(path: str, **params: Any) -> tuple[dict[str, Any], dict[str, Any]]:
            hot = await client.get(path.format(hot_id), params=params, headers=auth(key))
            cold = await client.get(path.format(cold_id), params=params, headers=auth(key))
            assert hot.status_code == 200, hot.text
            assert cold.status_code == 200, cold.text
            return hot.json(), cold.json()

        hot, cold = await both("/v1/runs/{}/result", wait="0s")
        assert cold["done"] is True and cold["output"] == {"reported": "A-1"}
        same(hot, cold, hot_id, cold_id)
        hot, cold = await both("/v1/runs/{}/logs")
        assert any("reporting A-1" in line["message"] for line in cold["items"])
        same(hot, cold, hot_id, cold_id)
        hot, cold = await both("/v1/runs/{}/children")
        assert [c["id"] for c in cold["items"]] == [str(child_id)]
        assert cold["items"][0]["state"] == "scheduled"  # never dispatched
        same(hot, cold, hot_id, cold_id)
        hot, cold = await both("/v1/runs/{}/state")
        assert {n: v["value"] for n, v in cold["values"].items()} == {"phase": "done",
                                                                       "count": 3}
        same(hot, cold, hot_id, cold_id)
        hot, cold = await both("/v1/runs/{}/state", name="phase", wait="5s")  # at once: final
        same(hot, cold, hot_id, cold_id)
        hot, cold = await both("/v1/runs/{}/steps/set-aside")
        assert cold["items"] == []
        same(hot, cold, hot_id, cold_id)

        # an update the run never had: the update's 404, for the hot and the archived run
        nothing = uuid.uuid4()
        for run_id in (hot_id, cold_id):
            r = await client.get(f"/v1/runs/{run_id}/updates/{nothing}", headers=auth(key))
            assert r.status_code == 404 and f"no update {nothing}" in r.json()["detail"]
        # a run neither hot nor archived, and the archived run asked by another tenant: 404
        _, other_key = await new_tenant(pool)
        for run_id, k in ((uuid.uuid4(), key), (cold_id, other_key)):
            for path in ("result", "logs", "children", "state", "steps/set-aside",
                         f"updates/{nothing}"):
                r = await client.get(f"/v1/runs/{run_id}/{path}", headers=auth(k))
                assert r.status_code == 404, (path, r.text)
                assert f"no run {run_id}" in r.json()["detail"], (path, r.text)

    async with served(pool, db_url, object_store) as url, \
            AsyncClient(url, key) as sdk:  # the client awaits and reads it
        handle = sdk.runs.get_handle(cold_id)
        assert await handle.result(timeout=30) == {"reported": "A-1"}
        assert (await handle.status()).archived is True
        logs = await sdk.runs.logs(cold_id)
        assert logs.archived is True and logs.items
        state = await sdk.runs.state(cold_id, "phase", wait=5)
        assert state.archived is True and state.values["phase"].value == "done"
