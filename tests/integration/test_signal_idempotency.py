"""A signal's `Idempotency-Key` names one signal, as a job's key names one job (issue 42): the
same key and body again answer the first signal (200), another body under the key is a 409
`idempotency-conflict` and is not recorded (it was once dropped under a 200)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.domain.errors import IdempotencyConflict
from ostinato.domain.workflow import INLINE_OUTPUT_BYTES
from ostinato.runs.signals import send_signal
from tests.helpers.api import assert_problem, auth
from tests.helpers.integration import new_tenant, queued_workflow_run, store

pytestmark = pytest.mark.integration


async def recorded(pool: asyncpg.Pool, run_id: uuid.UUID) -> tuple[list[Any], int]:
    """The run's kept signals' payloads and how many events its stream holds."""
    payloads = [r["payload"] for r in await pool.fetch(
        "SELECT payload FROM run_signals WHERE run_id = $1 ORDER BY received_at", run_id)]
    events = await pool.fetchval("SELECT count(*) FROM events WHERE stream_id = $1", run_id)
    return payloads, events


async def test_a_key_reused_with_another_body_is_a_conflict(
        pool: asyncpg.Pool, client: httpx.AsyncClient) -> None:
    tenant_id, key = await new_tenant(pool)
    run_id = await queued_workflow_run(pool, tenant_id, "orders.approval")
    url = f"/v1/runs/{run_id}/signals/approve"
    h = {**auth(key), "Idempotency-Key": "k1"}
    first = await client.post(url, json={"approved": True, "by": "ops"}, headers=h)
    assert first.status_code == 202, first.text
    before = await recorded(pool, run_id)
    assert before[0] == [{"approved": True, "by": "ops"}]

    body = assert_problem(await client.post(url, json={"approved": False, "by": "ops"},
                                            headers=h), 409)
    assert body["type"].endswith("/idempotency-conflict") and "k1" in body["detail"]
    assert await recorded(pool, run_id) == before  # the second body is not recorded
    assert_problem(await client.post(url, json=None, headers=h), 409)  # nor an empty one

    # the same body again (its keys in another order: canonical JSON) is the first signal
    again = await client.post(url, json={"by": "ops", "approved": True}, headers=h)
    assert again.status_code == 200, again.text
    assert again.json()["signal_id"] == first.json()["signal_id"]
    assert again.json()["created"] is False
    assert await recorded(pool, run_id) == before

    # another key is another signal; the key is per signal name, as the signal id is
    other = await client.post(url, json={"approved": False}, headers={**auth(key),
                                                                       "Idempotency-Key": "k2"})
    assert other.status_code == 202, other.text
    named = await client.post(f"/v1/runs/{run_id}/signals/reject", json={"x": 1}, headers=h)
    assert named.status_code == 202, named.text


async def test_a_payload_kept_in_the_blob_store_is_compared_too(pool: asyncpg.Pool) -> None:
    tenant_id, _ = await new_tenant(pool)
    run_id = await queued_workflow_run(pool, tenant_id, "orders.approval")
    big = {"lines": "x" * (INLINE_OUTPUT_BYTES + 1)}

    async def send(payload: Any) -> Any:
        async with pool.acquire() as conn:
            return await send_signal(conn, store(), tenant_id=tenant_id, run_id=run_id,
                                     name="approve", payload=payload, actor="test",
                                     idempotency_key="big", max_payload_bytes=1 << 20)

    first = await send(big)
    assert first.created
    assert await pool.fetchval("SELECT payload_ref FROM run_signals WHERE run_id = $1",
                               run_id) is not None
    again = await send(dict(big))
    assert (again.signal_id, again.created) == (first.signal_id, False)
    with pytest.raises(IdempotencyConflict):
        await send({"lines": "y" * (INLINE_OUTPUT_BYTES + 1)})
    assert await pool.fetchval("SELECT count(*) FROM run_signals WHERE run_id = $1",
                               run_id) == 1
