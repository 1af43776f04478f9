"""The dead-letter queue and run controls over the public API: list with filters and counts,
detail with attempt history, triage, replay with a corrected payload (audited, idempotent),
bulk replay, cancel and retry — each tenant-scoped."""

from __future__ import annotations

import json
import uuid

import asyncpg
import httpx
import pytest

from ostinato.eventlog.store import read_stream
from tests.helpers.api import assert_problem, auth, tenant
from tests.helpers.integration import dead_letters

pytestmark = pytest.mark.integration


async def test_the_dead_letter_queue_end_to_end(client: httpx.AsyncClient,
                                                pool: asyncpg.Pool) -> None:
    key = await tenant(client, "acme")
    other = await tenant(client, "globex")
    ids = await dead_letters(client, pool, key, ["bad_input", "bad_input", "rejected"])

    page = (await client.get("/v1/dead-letters", headers=auth(key))).json()
    assert {i["run_id"] for i in page["items"]} == set(ids)
    assert page["counts"] == {"total": 3, "by_error_type": {"bad_input": 2, "rejected": 1},
                              "by_triage_state": {"new": 3}}
    only = (await client.get("/v1/dead-letters", params={"error_type": "rejected"},
                             headers=auth(key))).json()
    assert [i["run_id"] for i in only["items"]] == [ids[2]]
    assert (await client.get("/v1/dead-letters", params={"older_than": "1h"},
                             headers=auth(key))).json()["items"] == []

    detail = (await client.get(f"/v1/dead-letters/{ids[0]}", headers=auth(key))).json()
    assert detail["payload"] == {"n": 0} and detail["reason"] == "permanent"
    [attempt] = detail["history"]
    assert attempt["worker_id"] == "w" and attempt["outcome"] == "RunFailed"
    assert attempt["error"]["type"] == "bad_input" and attempt["ended_at"] >= attempt[
        "started_at"]

    r = await client.post(f"/v1/dead-letters/{ids[0]}/triage", json={
        "state": "acknowledged", "comment": "looking"}, headers=auth(key))
    assert r.status_code == 200
    triaged = (await client.get(f"/v1/dead-letters/{ids[0]}", headers=auth(key))).json()
    assert (triaged["triage_state"], triaged["triage_comment"], triaged["triage_by"]) == (
        "acknowledged", "looking", "tenant:acme")

    body = {"payload": {"n": 100}, "request_key": "fix-1"}
    first = await client.post(f"/v1/dead-letters/{ids[0]}/replay", json=body, headers=auth(key))
    again = await client.post(f"/v1/dead-letters/{ids[0]}/replay", json=body, headers=auth(key))
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["run_id"] == again.json()["run_id"]
    new_run = (await client.get(f"/v1/runs/{first.json()['run_id']}", headers=auth(key))).json()
    assert new_run["trigger"] == "replay" and new_run["state"] == "scheduled"
    async with pool.acquire() as conn:
        tenant_id = await conn.fetchval("SELECT tenant_id FROM runs WHERE id = $1",
                                        uuid.UUID(ids[0]))
        audit = [r for r in await read_stream(conn, uuid.UUID(ids[0]), tenant_id)
                 if r.type == "DeadLetterReplayed"]
        payload = await conn.fetchval(
            "SELECT b.data::text FROM runs r JOIN blobs b ON b.id = r.payload_ref "
            "WHERE r.id = $1", uuid.UUID(first.json()["run_id"]))
    assert len(audit) == 1 and audit[0].event.payload_changed and audit[0].actor == "tenant:acme"
    assert json.loads(payload) == {"n": 100}
    assert_problem(await client.post(f"/v1/dead-letters/{ids[1]}/replay", json={
        "payload": {"big": "x" * 2000}}, headers=auth(key)), 413, "payload")

    bulk = {"error_type": "bad_input", "request_key": "bulk-1"}
    r1 = (await client.post("/v1/dead-letters/replay", json=bulk, headers=auth(key))).json()
    r2 = (await client.post("/v1/dead-letters/replay", json=bulk, headers=auth(key))).json()
    assert (r1["matched"], r1["replayed"]) == (2, 2)
    assert (r2["replayed"], r2["already_replayed"]) == (0, 2)

    # Another tenant sees none of it.
    assert (await client.get("/v1/dead-letters", headers=auth(other))).json()["items"] == []
    for path in (f"/v1/dead-letters/{ids[0]}",):
        assert_problem(await client.get(path, headers=auth(other)), 404)
    for path, body in ((f"/v1/dead-letters/{ids[0]}/replay", {}),
                       (f"/v1/dead-letters/{ids[0]}/triage", {"state": "fixed"}),
                       (f"/v1/runs/{ids[0]}/retry", {}), (f"/v1/runs/{ids[0]}/cancel", None)):
        assert_problem(await client.post(path, json=body, headers=auth(other)), 404)


async def test_cancel_and_retry_over_http(client: httpx.AsyncClient) -> None:
    key = await tenant(client, "acme")
    job = (await client.post("/v1/jobs", json={"name": "later", "schedule": {
        "at": "2030-01-01T00:00:00Z"}}, headers=auth(key))).json()
    trig = (await client.post(f"/v1/jobs/{job['id']}/trigger", headers=auth(key))).json()
    r = await client.post(f"/v1/runs/{trig['run_id']}/cancel", headers=auth(key))
    assert r.json() == {"state": "cancelled", "cancel": "done"}
    assert_problem(await client.post(f"/v1/runs/{trig['run_id']}/cancel", headers=auth(key)),
                   409)
    retried = await client.post(f"/v1/runs/{trig['run_id']}/retry",
                                json={"request_key": "again"}, headers=auth(key))
    assert retried.status_code == 201 and retried.json()["replay_of"] == trig["run_id"]
    new = (await client.get(f"/v1/runs/{retried.json()['run_id']}", headers=auth(key))).json()
    assert new["trigger"] == "retry" and new["state"] == "scheduled"
    assert_problem(await client.post(f"/v1/runs/{retried.json()['run_id']}/retry",
                                     headers=auth(key)), 409)
    logs = (await client.get(f"/v1/runs/{trig['run_id']}/logs", headers=auth(key))).json()
    assert logs["items"] == []
