"""The audit trail (migration 0027, `services.api.auditing`, GET /v1/audit) through the API over
the real PostgreSQL: every control action leaves exactly one row naming the key (id, name,
role), the request id, the tenant and the target, with before/after where it applies; a failed
action leaves no trace of itself but one rejected row, and a role's refusal one refused row;
`GET /v1/audit` is tenant-scoped (the admin reads any tenant's), filters and pages; the
services' role cannot rewrite a row."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from litestar.routes import HTTPRoute

from ostinato.client import AsyncClient
from ostinato.runtime.problems import UNSTORABLE
from tests.helpers.api import ADMIN, assert_problem, auth, issue, tenant
from tests.helpers.cli import cli, new_key
from tests.helpers.integration import event_count, tenant_id_of
from tests.helpers.privileges import APP_ROLE, refused

pytestmark = pytest.mark.integration


async def rows(pool: asyncpg.Pool, request_id: str) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch("SELECT * FROM audit WHERE request_id = $1", request_id)


class Caller:
    """Sends each request with its own X-Request-Id, so each audit row can be found by it."""

    def __init__(self, client: httpx.AsyncClient, headers: dict[str, str]) -> None:
        self.client, self.headers, self.n = client, headers, 0

    async def __call__(self, method: str, path: str,
                       body: Any = None) -> tuple[httpx.Response, str]:
        self.n += 1
        request_id = f"audit-test-{uuid.uuid4().hex[:8]}-{self.n}"
        r = await self.client.request(method, path, json=body,
                                      headers={**self.headers, "X-Request-Id": request_id})
        assert r.headers["x-request-id"] == request_id
        return r, request_id


async def one_row(pool: asyncpg.Pool, request_id: str, **expected: Any) -> asyncpg.Record:
    found = await rows(pool, request_id)
    assert len(found) == 1, (request_id, found)
    for name, value in expected.items():
        assert found[0][name] == value, (name, found[0][name], value)
    return found[0]


async def test_every_control_action_leaves_exactly_one_row_with_key_request_and_target(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    operator_key = await tenant(client, "audit-a")
    tid = await tenant_id_of(pool, "audit-a")
    ops = await issue(client, operator_key, "operator", "ops-bot")
    key_id = uuid.UUID(ops["id"])
    call = Caller(client, auth(ops["key"]))
    me = {"key_id": key_id, "key_name": "ops-bot", "role": "operator", "tenant_id": tid,
          "caller_tenant_id": tid, "actor": "tenant:audit-a/ops-bot", "outcome": "done"}

    async def done(method: str, path: str, body: Any, action: str, kind: str, target: str | None,
                   status: int) -> tuple[httpx.Response, asyncpg.Record]:
        r, rid = await call(method, path, body)
        assert r.status_code == status, (path, r.text)
        row = await one_row(pool, rid, action=action, target_kind=kind, status=status, **me)
        if target is not None:
            assert row["target_id"] == target
        return r, row

    at = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    r, row = await done("POST", "/v1/jobs", {"name": "billing", "task": "bill",
                                             "schedule": {"cron": "0 * * * *"}},
                        "job.create", "job", None, 201)
    job = r.json()["id"]
    assert row["target_id"] == job and row["after"]["name"] == "billing"
    assert row["before"] is None
    r, row = await done("POST", "/v1/jobs", {"name": "once", "schedule": {"at": at},
                                             "idempotency_key": "k1"},
                        "job.create", "job", None, 201)
    _, row = await done("POST", "/v1/jobs", {"name": "once", "schedule": {"at": at},
                                             "idempotency_key": "k1"},
                        "job.create", "job", r.json()["id"], 200)  # the repeat: 200, no change
    assert row["after"] is None
    _, row = await done("POST", "/v1/jobs/batch", {"jobs": [{"name": "b1"}, {"name": "b2"}]},
                        "job.create_batch", "job", "", 200)
    assert len(row["after"]["created"]) == 2
    gone = row["after"]["created"][0]
    _, row = await done("DELETE", f"/v1/jobs/{gone}", None, "job.delete", "job", gone, 204)
    assert row["before"]["name"] == "b1" and row["after"] is None
    _, row = await done("POST", f"/v1/jobs/{job}/pause", {"reason": "maintenance"},
                        "job.pause", "job", job, 200)
    assert (row["before"], row["after"]) == ({"status": "active"}, {"status": "paused"})
    _, row = await done("POST", f"/v1/jobs/{job}/resume", None, "job.resume", "job", job, 200)
    assert (row["before"], row["after"]) == ({"status": "paused"}, {"status": "active"})
    r, row = await done("POST", f"/v1/jobs/{job}/trigger", None, "job.trigger", "job", job, 201)
    run = r.json()["run_id"]
    assert row["after"] == {"run_id": run}
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    await done("POST", f"/v1/jobs/{job}/backfill",
               {"start": (now - timedelta(hours=3)).isoformat(),
                "end": (now - timedelta(hours=1)).isoformat()},
               "job.backfill", "job", job, 200)
    await done("PUT", "/v1/calendars/holidays", {"dates": ["2026-12-25"]},
               "calendar.put", "calendar", "holidays", 200)
    r, row = await done("POST", f"/v1/runs/{run}/signals/approve", {"ok": True},
                        "run.signal", "run", run, 202)
    assert row["after"]["signal"] == "approve"
    _, row = await done("POST", f"/v1/runs/{run}/cancel", None, "run.cancel", "run", run, 200)
    assert row["after"] == {"state": "cancelled"}
    r, row = await done("POST", f"/v1/runs/{run}/retry", None, "run.retry", "run", run, 201)
    rerun = r.json()["run_id"]
    _, row = await done("POST", f"/v1/runs/{rerun}/fail", {"reason": "bad data"},
                        "run.fail", "run", rerun, 200)
    assert row["after"]["state"] == "dead_lettered"
    _, row = await done("POST", f"/v1/dead-letters/{rerun}/triage", {"state": "acknowledged"},
                        "dead_letter.triage", "run", rerun, 200)
    assert (row["before"], row["after"]) == ({"triage_state": "new"},
                                             {"triage_state": "acknowledged"})
    r, row = await done("POST", f"/v1/dead-letters/{rerun}/replay", {"payload": {"fixed": 1}},
                        "dead_letter.replay", "run", rerun, 201)
    assert row["after"]["payload_changed"] is True
    replayed = r.json()["run_id"]
    await done("POST", f"/v1/runs/{replayed}/succeed", {"reason": "done by hand"},
               "run.succeed", "run", replayed, 200)
    await done("POST", "/v1/dead-letters/replay", {"request_key": "all"},
               "dead_letter.replay_many", "run", "", 200)
    await done("POST", "/v1/runs/pause", {"task": "bill"}, "runs.pause", "runs", "bill", 200)
    await done("POST", "/v1/runs/resume", {"task": "bill"}, "runs.resume", "runs", "bill", 200)
    _, row = await done("PUT", "/v1/limits/tasks/bill", {"max_concurrency": 3},
                        "limit.set", "limit", "task:bill", 200)
    assert row["before"] is None and row["after"]["max_concurrency"] == 3
    _, row = await done("PUT", "/v1/limits/tasks/bill", {"max_concurrency": 5},
                        "limit.set", "limit", "task:bill", 200)
    assert (row["before"]["max_concurrency"], row["after"]["max_concurrency"]) == (3, 5)
    await done("PUT", "/v1/limits/resources/smtp", {"rate_per_second": 2, "burst": 4},
               "limit.set", "limit", "resource:smtp", 200)
    _, row = await done("POST", "/v1/pools/default/pause", {"reason": "deploy"},
                        "pool.pause", "pool", "default", 200)
    assert (row["before"], row["after"]) == ({"paused": False}, {"paused": True})
    await done("POST", "/v1/pools/default/resume", None, "pool.resume", "pool", "default", 200)
    r, row = await done("POST", "/v1/keys", {"name": "grafana", "role": "viewer"},
                        "key.issue", "key", None, 201)
    viewer = r.json()
    assert row["target_id"] == viewer["id"] and row["after"]["role"] == "viewer"
    assert viewer["key"] not in str(dict(row))  # never the secret
    r, row = await done("POST", f"/v1/keys/{viewer['id']}/rotate", {"grace_seconds": 60},
                        "key.rotate", "key", viewer["id"], 201)
    assert r.json()["key"]["key"] not in str(dict(row))
    _, row = await done("DELETE", f"/v1/keys/{r.json()['key']['id']}", None,
                        "key.revoke", "key", r.json()["key"]["id"], 204)
    assert (row["before"]["active"], row["after"]["active"]) == (True, False)

    reads, _ = await call("GET", "/v1/jobs")
    assert reads.status_code == 200  # a read is no control action
    async with pool.acquire() as conn:
        total = await conn.fetchval("SELECT count(*) FROM audit WHERE key_id = $1", key_id)
    assert total == call.n - 1


async def test_admin_actions_name_the_admin_and_the_tenant_acted_for(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    admin = Caller(client, auth(ADMIN))
    r, rid = await admin("POST", "/v1/tenants", {"name": "audit-b"})
    assert r.status_code == 201
    tid = uuid.UUID(r.json()["id"])
    row = await one_row(pool, rid, action="tenant.create", target_kind="tenant",
                        target_id=str(tid), tenant_id=tid, key_id=None, caller_tenant_id=None,
                        role="admin", actor="admin", outcome="done", status=201)
    assert row["after"] == {"name": "audit-b", "weight": 1}
    assert r.json()["api_key"] not in str(dict(row))
    r, rid = await admin("PUT", f"/v1/tenants/{tid}/limits", {"max_concurrency": 10})
    assert r.status_code == 200
    await one_row(pool, rid, action="limit.set", target_id="tenant", tenant_id=tid,
                  role="admin")
    r, rid = await admin("PUT", f"/v1/tenants/{tid}/limits/api", {"rate_per_second": 50})
    await one_row(pool, rid, action="limit.set", target_id="api", tenant_id=tid)

    for_tenant = Caller(client, {**auth(ADMIN), "X-Ostinato-Tenant": str(tid)})
    r, rid = await for_tenant("POST", "/v1/jobs", {"name": "by-admin"})
    assert r.status_code == 201
    await one_row(pool, rid, action="job.create", tenant_id=tid, caller_tenant_id=None,
                  key_id=None, actor="admin", target_id=r.json()["id"])


async def test_a_failed_action_leaves_one_rejected_row_and_nothing_else(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "audit-c")
    call = Caller(client, auth(key))
    r, _ = await call("POST", "/v1/jobs", {"name": "once", "schedule": {
        "at": (datetime.now(UTC) + timedelta(days=1)).isoformat()}})
    job = r.json()["id"]
    r, _ = await call("POST", f"/v1/jobs/{job}/trigger")
    run = r.json()["run_id"]
    async with pool.acquire() as conn:
        events = await event_count(conn)

    r, rid = await call("POST", f"/v1/runs/{run}/pause", {"reason": "x"})  # not a workflow step
    assert r.status_code == 409, r.text
    row = await one_row(pool, rid, action="run.pause", target_id=run, status=409,
                        outcome="rejected")
    assert row["detail"] and row["after"] is None
    missing = uuid.uuid4()
    r, rid = await call("POST", f"/v1/jobs/{missing}/pause")
    assert_problem(r, 404)
    await one_row(pool, rid, action="job.pause", target_id=str(missing), status=404,
                  outcome="rejected")
    r, rid = await call("PUT", "/v1/calendars/bad", {"dates": ["not a date"]})
    assert r.status_code in (400, 422)
    assert len(await rows(pool, rid)) <= 1  # an unreadable body may never reach the action
    r, rid = await call("POST", "/v1/tenants", {"name": "nope"})  # an operator is no admin
    assert_problem(r, 403)
    await one_row(pool, rid, action="tenant.create", status=403, outcome="refused",
                  role="operator")
    # a refusal naming a value with a NUL, which the database cannot store in text: the row
    # is kept (schemathesis found the audit row itself lost), the NUL replaced in its detail
    r, rid = await call("POST", "/v1/keys", {"name": "n", "role": "worker",
                                             "pools": ["nul\u0000pool"]})
    assert_problem(r, 422, "pools")
    row = await one_row(pool, rid, action="key.issue", status=422, outcome="rejected")
    assert "nul\ufffdpool" in row["detail"]
    async with pool.acquire() as conn:
        assert await event_count(conn) == events  # nothing else


async def test_a_refused_role_is_recorded_and_changes_nothing(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    operator = await tenant(client, "audit-d")
    tid = await tenant_id_of(pool, "audit-d")
    viewer = await issue(client, operator, "viewer", "dash")
    call = Caller(client, auth(viewer["key"]))
    job = uuid.uuid4()
    r, rid = await call("DELETE", f"/v1/jobs/{job}")
    assert_problem(r, 403)
    await one_row(pool, rid, action="job.delete", target_kind="job", target_id=str(job),
                  status=403, outcome="refused", role="viewer", key_name="dash",
                  key_id=uuid.UUID(viewer["id"]), tenant_id=tid)
    r, _ = await call("GET", "/v1/audit")
    assert_problem(r, 403)  # a viewer does not read the audit trail
    other = await tenant(client, "audit-e")
    r, rid = await Caller(client, {**auth(other), "X-Ostinato-Tenant": str(tid)})(
        "POST", f"/v1/jobs/{job}/pause")
    assert_problem(r, 403)  # another tenant's key naming this tenant
    row = await one_row(pool, rid, action="job.pause", outcome="refused")
    assert row["tenant_id"] == await tenant_id_of(pool, "audit-e")  # recorded as its own


async def test_get_audit_is_tenant_scoped_filters_and_pages(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    a, b = await tenant(client, "audit-f"), await tenant(client, "audit-g")
    tid_a = await tenant_id_of(pool, "audit-f")
    call_a = Caller(client, auth(a))
    request_ids = []
    for i in range(5):
        r, rid = await call_a("PUT", f"/v1/limits/tasks/t{i}", {"max_concurrency": i})
        assert r.status_code == 200
        request_ids.append(rid)
    r, _ = await call_a("POST", "/v1/jobs", {"name": "j"})
    job = r.json()["id"]
    await Caller(client, auth(b))("PUT", "/v1/limits/tasks/t0", {"max_concurrency": 1})

    listed = (await client.get("/v1/audit", headers=auth(a))).json()
    assert [e["action"] for e in listed["items"]] == [
        "job.create", *["limit.set"] * 5, "tenant.create"]  # the admin's creation of a, too
    assert {e["tenant_id"] for e in listed["items"]} == {str(tid_a)}  # none of b's
    assert [e["request_id"] for e in listed["items"][1:6]] == request_ids[::-1]  # newest first

    seen, cursor = [], None
    while True:
        page = (await client.get("/v1/audit", params={"limit": 2, "action": "limit.set",
                                                     **({"cursor": cursor} if cursor else {})},
                                 headers=auth(a))).json()
        seen += [e["target_id"] for e in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"task:t{i}" for i in range(4, -1, -1)]

    async def only(**params: Any) -> list[dict[str, Any]]:
        r = await client.get("/v1/audit", params=params, headers=auth(a))
        assert r.status_code == 200, r.text
        return r.json()["items"]

    assert [e["target_id"] for e in await only(target_kind="job")] == [job]
    assert [e["target_id"] for e in await only(target_kind="limit", target_id="task:t3")] == [
        "task:t3"]
    assert len(await only(request_id=request_ids[2])) == 1
    first_key = (await client.get("/v1/keys", headers=auth(a))).json()["keys"][0]["id"]
    assert len(await only(key_id=first_key)) == 6
    assert await only(key_id=str(uuid.uuid4())) == []
    newest = listed["items"][0]["recorded_at"]
    assert [e["action"] for e in await only(**{"from": newest})] == ["job.create"]
    assert len(await only(to=newest)) == 6
    assert_problem(await client.get("/v1/audit", params={"from": "2026-01-01T00:00:00"},
                                    headers=auth(a)), 422)  # no offset
    assert_problem(await client.get("/v1/audit", params={"cursor": "garbage"},
                                    headers=auth(a)), 422)

    as_admin = (await client.get("/v1/audit", headers={**auth(ADMIN),
                                                       "X-Ostinato-Tenant": str(tid_a)})).json()
    assert as_admin["items"] == listed["items"]
    everything = (await client.get("/v1/audit", params={"limit": 500},
                                   headers=auth(ADMIN))).json()["items"]
    assert {e["action"] for e in everything} >= {"tenant.create", "limit.set", "job.create"}
    assert_problem(await client.get("/v1/audit", headers={
        **auth(b), "X-Ostinato-Tenant": str(tid_a)}), 403)


async def test_the_services_role_cannot_rewrite_or_erase_the_audit_trail(
        client: httpx.AsyncClient, pool: asyncpg.Pool, app: asyncpg.Connection) -> None:
    await tenant(client, "audit-h")
    before = await app.fetch("SELECT * FROM audit ORDER BY id")
    assert before  # the tenant's creation
    for statement in ("UPDATE audit SET actor = 'tampered'", "DELETE FROM audit",
                      "TRUNCATE audit", "SELECT id FROM audit FOR UPDATE"):
        assert await refused(app, statement) is None, statement
    assert await app.fetch("SELECT * FROM audit ORDER BY id") == before
    async with pool.acquire() as conn:  # a superuser, too, is stopped by the trigger
        for statement in ("UPDATE audit SET actor = 'tampered'", "DELETE FROM audit",
                          "TRUNCATE audit"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await conn.execute(statement)
    assert APP_ROLE != "postgres"


async def test_the_cli_manages_keys_and_lists_the_audit_trail(api_url: str,
                                                              tmp_path: Path) -> None:
    key = await new_key(api_url)
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    code, out, err = await cli(tmp_path, "keys", "create", "grafana", "--role", "viewer",
                               "-o", "json", env=env)
    assert code == 0, err
    viewer = json.loads(out)
    assert viewer["key"].startswith("ost_") and viewer["role"] == "viewer"
    code, out, err = await cli(tmp_path, "keys", "rotate", viewer["id"], "--grace", "60",
                               "-o", "json", env=env)
    assert code == 0, err
    rotated = json.loads(out)
    assert rotated["old_key_id"] == viewer["id"]
    code, out, err = await cli(tmp_path, "keys", "revoke", rotated["key"]["id"], "--yes",
                               env=env)
    assert code == 0, err
    code, out, err = await cli(tmp_path, "keys", "list", env=env)
    assert code == 0, err
    assert out.splitlines()[0].split()[:3] == ["ID", "NAME", "ROLE"]
    assert sum("grafana" in line for line in out.splitlines()) == 2  # the old and the new

    code, out, err = await cli(tmp_path, "audit", "list", "--target-kind", "key", "-o", "jsonl",
                               env=env)
    assert code == 0, err
    entries = [json.loads(line) for line in out.splitlines()]
    assert [e["action"] for e in entries] == ["key.revoke", "key.rotate", "key.issue"]
    assert {e["outcome"] for e in entries} == {"done"} and entries[0]["request_id"]
    code, out, err = await cli(tmp_path, "audit", "list", "--action", "key.issue", env=env)
    assert code == 0, err
    assert out.splitlines()[0].split()[:3] == ["AT", "ACTION", "TARGET"]
    [line] = [line for line in out.splitlines() if "key.issue" in line]
    assert viewer["id"] in line and "done 201" in line
    code, _, err = await cli(tmp_path, "audit", "list", "--from", "2026-01-01T00:00", env=env)
    assert code == 2 and "offset" in err
    async with AsyncClient(api_url, key) as client:  # the typed client reads the same rows
        assert [e.action async for e in client.audit.list(target_kind="key")] == [
            e["action"] for e in entries]
        assert len(await client.keys.list()) == 3


NOT_CONTROL_ACTIONS = {
    ("POST", "/v1/schedules/preview"),  # changes nothing (action READ)
    ("POST", "/ui/login"), ("POST", "/ui/logout"),  # a session of the web UI, no change
    # the web UI's previews of a form (a DAG's graph, a limit before and after): nothing saved
    ("POST", "/ui/dags/preview"), ("POST", "/ui/limits/{kind:str}/review"),
    ("POST", "/ui/jobs/preview"),  # a new job's occurrences: nothing created
}


def test_every_route_that_changes_something_is_a_control_action(
        client: httpx.AsyncClient) -> None:
    """A new mutating route without `opt=audited(...)` fails here, not in an audit."""
    api = client._transport.app  # type: ignore[attr-defined]
    unaudited, audited = [], 0
    for route in api.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            for method in handler.http_methods - {"GET", "HEAD", "OPTIONS"}:
                if (method, route.path) in NOT_CONTROL_ACTIONS:
                    continue
                if "audit" in handler.opt:
                    audited += 1
                else:
                    unaudited.append((method, route.path))
    assert unaudited == [] and audited >= 40


async def test_a_nul_refusal_is_recorded_with_the_problems_own_detail(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    """A NUL reaching the database inside an action is a 400 whose row says why, as the
    answer does (it said "None": the driver's error has a `detail` attribute that is None)."""
    call = Caller(client, auth(await tenant(client, "audit-nul")))
    r, _ = await call("POST", "/v1/jobs", {"name": "nul", "schedule": {
        "at": (datetime.now(UTC) + timedelta(days=1)).isoformat()}})
    job = r.json()["id"]
    # a pause's reason goes into the event's JSON document unchecked: the database refuses it
    r, rid = await call("POST", f"/v1/jobs/{job}/pause", {"reason": "a\x00b"})
    body = assert_problem(r, 400)
    row = await one_row(pool, rid, action="job.pause", status=400, outcome="rejected")
    assert body["detail"] == UNSTORABLE  # the database's refusal (asyncpg's error), mapped
    assert row["detail"] == body["detail"]
