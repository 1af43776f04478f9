"""Retention per tenant and holds on runs through the API, the client, the CLI and the UI, on
the real PostgreSQL (docs/RETENTION.md): each change is an event in the log and an audit row,
its read model rebuilt from the log is the same, a tenant sees only its own, and bad input is a
422 problem that changes nothing."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.client import ApiError, AsyncClient, Client
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from services.api.app import create_app
from tests.helpers.api import ADMIN, assert_problem, auth, issue, tenant
from tests.helpers.cli import cli
from tests.helpers.integration import CSRF, login, store, tenant_id_of

pytestmark = pytest.mark.integration


async def a_run(client: httpx.AsyncClient, key: str) -> str:
    """A run of the tenant's (scheduled, by a manual trigger of a job due tomorrow)."""
    r = await client.post("/v1/jobs", headers=auth(key), json={
        "name": "kept", "schedule": {"at": (datetime.now(UTC) + timedelta(days=1)).isoformat()}})
    assert r.status_code == 201, r.text
    r = await client.post(f"/v1/jobs/{r.json()['id']}/trigger", headers=auth(key))
    assert r.status_code in (200, 201, 202), r.text
    return str(r.json()["run_id"])


def doc(value: Any) -> Any:
    """A json column as a document (the test pool's codec may have decoded it already)."""
    return json.loads(value) if isinstance(value, str) else value


async def events_of(pool: asyncpg.Pool, stream_id: uuid.UUID | str) -> list[tuple[str, Any, str]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT type, data, actor FROM events WHERE stream_id = $1 "
                                "ORDER BY version", uuid.UUID(str(stream_id)))
    return [(r["type"], doc(r["data"]), r["actor"]) for r in rows]


async def audit_rows(pool: asyncpg.Pool, action: str, target: str) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch("SELECT * FROM audit WHERE action = $1 AND target_id = $2 "
                                "ORDER BY recorded_at", action, target)


async def retention_rows(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch("SELECT * FROM tenant_retention WHERE tenant_id = $1", tenant_id)


async def hold_rows(pool: asyncpg.Pool, run_id: str) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch("SELECT * FROM run_holds WHERE run_id = $1", uuid.UUID(run_id))


async def test_a_tenants_retention_is_the_default_until_the_admin_sets_it(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    name = f"ret-{uuid.uuid4().hex[:6]}"
    key = await tenant(client, name)
    tid = await tenant_id_of(pool, name)
    path = f"/v1/tenants/{tid}/retention"
    default = (await client.get(path, headers=auth(ADMIN))).json()
    assert default == {"tenant_id": str(tid), "keep_seconds": 30 * 86400, "keep": "30d",
                       "archive": True, "default": True, "updated_at": None,
                       "updated_by": None}
    assert (await client.get(path, headers=auth(key))).json() == default  # its own key reads

    r = await client.put(path, headers=auth(key), json={"keep": "90d"})  # an operator's key
    assert_problem(r, 403)
    assert await retention_rows(pool, tid) == []
    r = await client.put(path, headers={**auth(ADMIN), "X-Request-Id": f"{name}-set"},
                         json={"keep": "90d", "archive": False, "reason": "audit: a quarter"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["keep_seconds"], body["keep"], body["archive"], body["default"],
            body["updated_by"]) == (90 * 86400, "90d", False, False, "admin")
    assert (await client.get(path, headers=auth(key))).json() == body
    [row] = await retention_rows(pool, tid)
    assert (row["keep_seconds"], row["archive"], row["updated_by"]) == (90 * 86400, False, "admin")

    set_events = [e for e in await events_of(pool, tid) if e[0] == "RetentionSet"]
    assert set_events == [("RetentionSet", {"type": "RetentionSet", "keep_seconds": 90 * 86400,
                                            "archive": False, "by": "admin",
                                            "reason": "audit: a quarter"}, "admin")]
    [audited] = [a for a in await audit_rows(pool, "retention.set", str(tid))
                 if a["outcome"] == "done"]
    assert audited["request_id"] == f"{name}-set" and audited["tenant_id"] == tid
    assert doc(audited["before"]) == {"keep_seconds": 30 * 86400, "archive": True,
                                             "default": True}
    assert doc(audited["after"]) == {"keep_seconds": 90 * 86400, "archive": False,
                                            "default": False}
    refused = [a for a in await audit_rows(pool, "retention.set", str(tid))
               if a["outcome"] == "refused"]
    assert len(refused) == 1 and refused[0]["role"] == "operator"

    # the same policy again: 200, nothing recorded; seconds are taken as well as durations
    again = await client.put(path, headers=auth(ADMIN), json={"keep": 90 * 86400,
                                                              "archive": False})
    assert again.status_code == 200 and again.json() == body
    assert len([e for e in await events_of(pool, tid) if e[0] == "RetentionSet"]) == 1


async def test_retention_is_isolated_between_tenants_and_an_unknown_tenant_is_a_404(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    a, b = f"ret-a-{uuid.uuid4().hex[:6]}", f"ret-b-{uuid.uuid4().hex[:6]}"
    await tenant(client, a)
    key_b = await tenant(client, b)
    tid_a = await tenant_id_of(pool, a)
    assert_problem(await client.get(f"/v1/tenants/{tid_a}/retention", headers=auth(key_b)), 404)
    nobody = uuid.uuid4()
    assert_problem(await client.get(f"/v1/tenants/{nobody}/retention", headers=auth(ADMIN)), 404)
    r = await client.put(f"/v1/tenants/{nobody}/retention", headers=auth(ADMIN),
                         json={"keep": "7d"})
    assert_problem(r, 404)
    assert await retention_rows(pool, nobody) == []
    assert await events_of(pool, nobody) == []


@pytest.mark.parametrize(("body", "field"), [
    ({"keep": 3599}, "keep"), ({"keep": "59m"}, "keep"), ({"keep": "3651d"}, "keep"),
    ({"keep": 10 * 365 * 86400 + 1}, "keep"), ({"keep": "30x"}, "keep"),
    ({"keep": "1y"}, "keep"), ({"keep": ""}, "keep"), ({"keep": "7d\u0000"}, "keep"),
    ({"keep": "7d", "reason": "bad\u0000"}, "reason"),
    ({"keep": "7d", "reason": "x" * 1001}, "reason"),
])
async def test_bad_retention_is_a_422_naming_the_field_and_changes_nothing(
        client: httpx.AsyncClient, pool: asyncpg.Pool, body: dict[str, Any], field: str) -> None:
    name = f"ret-bad-{uuid.uuid4().hex[:6]}"
    await tenant(client, name)
    tid = await tenant_id_of(pool, name)
    before = await events_of(pool, tid)
    problem = assert_problem(await client.put(f"/v1/tenants/{tid}/retention",
                                              headers=auth(ADMIN), json=body), 422, field)
    assert problem["detail"]
    assert await retention_rows(pool, tid) == []
    assert await events_of(pool, tid) == before
    shown = (await client.get(f"/v1/tenants/{tid}/retention", headers=auth(ADMIN))).json()
    assert shown["default"] is True


async def test_a_run_is_held_and_released_once_each_audited_and_in_its_timeline(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, f"hold-{uuid.uuid4().hex[:6]}")
    run_id = await a_run(client, key)
    view = (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()
    assert view["held"] is None

    r = await client.post(f"/v1/runs/{run_id}/hold", headers=auth(key),
                          json={"reason": "legal hold, ticket 4711"})
    assert r.status_code == 200, r.text
    first = r.json()
    assert first["run_id"] == run_id and first["changed"] is True
    held = first["held"]
    assert held["reason"] == "legal hold, ticket 4711" and held["by"].startswith("tenant:")
    # holding a held run: 200 with the existing hold, nothing recorded
    again = await client.post(f"/v1/runs/{run_id}/hold", headers=auth(key),
                              json={"reason": "another reason"})
    assert again.status_code == 200 and again.json() == {**first, "changed": False}
    assert (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()["held"] == held
    [row] = await hold_rows(pool, run_id)
    assert row["reason"] == "legal hold, ticket 4711"
    timeline = (await client.get(f"/v1/runs/{run_id}/events", headers=auth(key))).json()
    assert [e["type"] for e in timeline["items"]].count("RunHeld") == 1
    [held_event] = [e for e in timeline["items"] if e["type"] == "RunHeld"]
    assert held_event["data"]["reason"] == "legal hold, ticket 4711"
    assert held_event["actor"] == held["by"]

    r = await client.post(f"/v1/runs/{run_id}/release", headers=auth(key))
    assert r.status_code == 200 and r.json() == {"run_id": run_id, "held": None, "changed": True}
    r = await client.post(f"/v1/runs/{run_id}/release", headers=auth(key), json={})
    assert r.status_code == 200 and r.json()["changed"] is False
    assert (await client.get(f"/v1/runs/{run_id}", headers=auth(key))).json()["held"] is None
    assert await hold_rows(pool, run_id) == []
    kinds = [e[0] for e in await events_of(pool, run_id)]
    assert kinds.count("RunHeld") == 1 and kinds.count("RunReleased") == 1
    assert kinds.index("RunHeld") < kinds.index("RunReleased")
    done = [(a["action"], a["outcome"]) for a in await audit_rows(pool, "run.hold", run_id)]
    assert done == [("run.hold", "done"), ("run.hold", "done")]  # both answered 200
    releases = await audit_rows(pool, "run.release", run_id)
    assert [a["outcome"] for a in releases] == ["done", "done"]
    assert doc(releases[0]["before"])["reason"] == "legal hold, ticket 4711"


@pytest.mark.parametrize(("body", "field"), [
    (None, "reason"), ({}, "reason"), ({"reason": ""}, "reason"), ({"reason": "   "}, "reason"),
    ({"reason": "nul\u0000"}, "reason"), ({"reason": "x" * 1001}, "reason"),
])
async def test_a_hold_without_a_good_reason_is_a_422_and_holds_nothing(
        client: httpx.AsyncClient, pool: asyncpg.Pool, body: dict[str, Any] | None,
        field: str) -> None:
    key = await tenant(client, f"hold-bad-{uuid.uuid4().hex[:6]}")
    run_id = await a_run(client, key)
    before = await events_of(pool, run_id)
    r = await client.post(f"/v1/runs/{run_id}/hold", headers=auth(key),
                          **({} if body is None else {"json": body}))
    assert_problem(r, 422, field)
    assert await hold_rows(pool, run_id) == []
    assert await events_of(pool, run_id) == before


async def test_another_tenants_run_cannot_be_held_or_released_and_a_viewer_may_not(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    owner = await tenant(client, f"hold-own-{uuid.uuid4().hex[:6]}")
    other = await tenant(client, f"hold-oth-{uuid.uuid4().hex[:6]}")
    run_id = await a_run(client, owner)
    before = await events_of(pool, run_id)
    for verb in ("hold", "release"):
        r = await client.post(f"/v1/runs/{run_id}/{verb}", headers=auth(other),
                              json={"reason": "not mine"})
        assert_problem(r, 404)
    assert_problem(await client.post(f"/v1/runs/{uuid.uuid4()}/hold", headers=auth(owner),
                                     json={"reason": "no such run"}), 404)
    viewer = await issue(client, owner, "viewer", "wallboard")
    assert_problem(await client.post(f"/v1/runs/{run_id}/hold", headers=auth(viewer["key"]),
                                     json={"reason": "a viewer"}), 403)
    assert await hold_rows(pool, run_id) == []
    assert await events_of(pool, run_id) == before
    # held by its owner, the other tenant sees neither the run nor its hold
    r = await client.post(f"/v1/runs/{run_id}/hold", headers=auth(owner),
                          json={"reason": "mine"})
    assert r.status_code == 200
    assert_problem(await client.get(f"/v1/runs/{run_id}", headers=auth(other)), 404)
    assert_problem(await client.post(f"/v1/runs/{run_id}/release", headers=auth(other)), 404)
    assert len(await hold_rows(pool, run_id)) == 1


async def test_a_rebuild_from_the_log_gives_the_same_retention_and_hold_rows(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    name = f"ret-rb-{uuid.uuid4().hex[:6]}"
    key = await tenant(client, name)
    tid = await tenant_id_of(pool, name)
    runs = [await a_run(client, key) for _ in range(3)]
    for keep in ("7d", "2h", "12h"):
        r = await client.put(f"/v1/tenants/{tid}/retention", headers=auth(ADMIN),
                             json={"keep": keep, "archive": keep != "2h"})
        assert r.status_code == 200
    for run_id in runs:
        r = await client.post(f"/v1/runs/{run_id}/hold", headers=auth(key),
                              json={"reason": f"hold {run_id[:8]}"})
        assert r.status_code == 200
    r = await client.post(f"/v1/runs/{runs[1]}/release", headers=auth(key))
    assert r.status_code == 200
    async with pool.acquire() as conn:
        live = await snapshot(conn)
        mine = [r for r in live["tenant_retention"] if r["tenant_id"] == tid]
        assert [(r["keep_seconds"], r["archive"]) for r in mine] == [(12 * 3600, True)]
        held = {str(r["run_id"]) for r in live["run_holds"] if r["tenant_id"] == tid}
        assert held == {runs[0], runs[2]}
        await rebuild(conn)
        assert await snapshot(conn) == live


async def test_the_async_and_sync_clients_and_the_cli_set_retention_and_hold(
        api_url: str, pool: asyncpg.Pool, tmp_path: Path) -> None:
    name = f"ret-cl-{uuid.uuid4().hex[:6]}"
    async with AsyncClient(api_url, ADMIN) as admin:
        key = (await admin.tenants.create(name)).api_key
        tid = await tenant_id_of(pool, name)
        shown = await admin.tenants.get_retention(tid)
        assert shown.default and shown.keep == "30d"
        set_ = await admin.tenants.set_retention(tid, keep="2w", archive=True, reason="ops")
        assert (set_.keep_seconds, set_.default, set_.updated_by) == (14 * 86400, False, "admin")
        with pytest.raises(ApiError) as bad:
            await admin.tenants.set_retention(tid, keep=60)
        assert bad.value.status == 422
    async with AsyncClient(api_url, key) as tenant_client:
        job = await tenant_client.jobs.create(
            name="kept", schedule={"at": (datetime.now(UTC) + timedelta(days=1)).isoformat()})
        run_id = (await tenant_client.jobs.trigger(job.id)).run_id
        held = await tenant_client.runs.hold(run_id, reason="async hold")
        assert held.changed and held.held is not None and held.held.reason == "async hold"
        assert (await tenant_client.runs.get(run_id)).held == held.held
        assert (await tenant_client.tenants.get_retention(tid)).keep == "14d"
        released = await tenant_client.runs.release(run_id)
        assert released.changed and released.held is None

    def sync_work() -> tuple[bool, bool, str]:
        with Client(api_url, key) as c:
            first = c.runs.hold(run_id, reason="sync hold")
            second = c.runs.hold(run_id, reason="ignored")
            return first.changed, second.changed, second.held.reason if second.held else ""

    assert await asyncio.to_thread(sync_work) == (True, False, "sync hold")

    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": ADMIN}
    code, out, err = await cli(tmp_path, "tenants", "retention", "set", str(tid), "--keep",
                               "36h", "--no-archive", "-o", "json", env=env)
    assert code == 0, err
    assert json.loads(out)["keep_seconds"] == 36 * 3600 and json.loads(out)["archive"] is False
    code, out, err = await cli(tmp_path, "tenants", "retention", "get", str(tid), "-o", "json",
                               env=env)
    assert code == 0, err
    assert (json.loads(out)["keep"], json.loads(out)["archive"]) == ("1d12h", False)
    code, out, err = await cli(tmp_path, "tenants", "retention", "set", str(tid), "--keep",
                               "5m", env=env)
    assert code != 0 and "at least 3600 seconds" in out + err
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    code, out, err = await cli(tmp_path, "runs", "release", str(run_id), "-o", "json", env=env)
    assert code == 0, err
    assert json.loads(out) == {"run_id": str(run_id), "held": None, "changed": True}
    code, out, err = await cli(tmp_path, "runs", "hold", str(run_id), "--reason", "cli hold",
                               "-o", "json", env=env)
    assert code == 0, err
    assert json.loads(out)["held"]["reason"] == "cli hold"
    code, out, err = await cli(tmp_path, "runs", "hold", str(run_id), "--reason", "",
                               env=env)
    assert code != 0 and "reason" in out + err
    kinds = [e[0] for e in await events_of(pool, run_id)]
    assert (kinds.count("RunHeld"), kinds.count("RunReleased")) == (3, 2)


async def test_an_operator_holds_and_releases_from_the_run_page(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, f"hold-ui-{uuid.uuid4().hex[:6]}")
    run_id = await a_run(client, key)
    viewer = await issue(client, key, "viewer", "wallboard")
    token = await login(client, key)
    page = await client.get(f"/ui/runs/{run_id}")
    assert page.status_code == 200 and f'action="/ui/runs/{run_id}/hold"' in page.text
    # without the session's CSRF token: refused, nothing held
    r = await client.post(f"/ui/runs/{run_id}/hold", data={"reason": "forged"})
    assert r.status_code == 403 and await hold_rows(pool, run_id) == []
    r = await client.post(f"/ui/runs/{run_id}/hold", data={"_csrf": token, "reason": ""})
    assert r.status_code == 422 and await hold_rows(pool, run_id) == []
    r = await client.post(f"/ui/runs/{run_id}/hold",
                          data={"_csrf": token, "reason": "<b>legal</b> hold"})
    assert r.status_code == 303, r.text
    page = await client.get(f"/ui/runs/{run_id}")
    assert "Held by" in page.text and "&lt;b&gt;legal&lt;/b&gt; hold" in page.text
    assert f'action="/ui/runs/{run_id}/release"' in page.text
    assert [a["outcome"] for a in await audit_rows(pool, "run.hold", run_id)][-1] == "done"
    r = await client.post(f"/ui/runs/{run_id}/release", data={"_csrf": token})
    assert r.status_code == 303
    assert await hold_rows(pool, run_id) == []
    kinds = [e[0] for e in await events_of(pool, run_id)]
    assert (kinds.count("RunHeld"), kinds.count("RunReleased")) == (1, 1)
    # a viewer sees the hold, never the form
    r = await client.post(f"/ui/runs/{run_id}/hold",
                          data={"_csrf": token, "reason": "again"})
    assert r.status_code == 303
    await client.post("/ui/logout", data={"_csrf": token})
    await login(client, viewer["key"])
    page = await client.get(f"/ui/runs/{run_id}")
    assert "Held by" in page.text and "/release" not in page.text and "/hold\"" not in page.text


async def test_the_admin_sets_a_tenants_retention_from_its_page(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    name = f"ret-ui-{uuid.uuid4().hex[:6]}"
    await tenant(client, name)
    tid = await tenant_id_of(pool, name)
    form = await client.get("/ui/login")
    token = re.search(r'name="_login" value="([^"]+)"', form.text)
    assert token, form.text
    r = await client.post("/ui/login", data={"_login": token.group(1), "api_key": ADMIN,
                                             "next": "/ui/tenants"})
    assert r.status_code == 303, r.text
    page = await client.get(f"/ui/tenants/{tid}")
    assert page.status_code == 200 and 'name="keep" value="30d"' in page.text
    assert "The default (never set)" in page.text
    csrf = CSRF.search(page.text)
    assert csrf, page.text
    r = await client.post(f"/ui/tenants/{tid}/retention",
                          data={"_csrf": csrf.group(1), "keep": "3d", "reason": "from the UI"})
    assert r.status_code == 303, r.text
    [row] = await retention_rows(pool, tid)
    assert (row["keep_seconds"], row["archive"]) == (3 * 86400, False)  # the box unticked
    page = await client.get(f"/ui/tenants/{tid}")
    assert 'name="keep" value="3d"' in page.text and "Set by admin" in page.text
    r = await client.post(f"/ui/tenants/{tid}/retention",
                          data={"_csrf": csrf.group(1), "keep": "10m", "archive": "1"})
    assert r.status_code == 422 and "at least 3600 seconds" in r.text
    assert [(r["keep_seconds"], r["archive"]) for r in await retention_rows(pool, tid)] == [
        (3 * 86400, False)]
    assert [a["outcome"] for a in await audit_rows(pool, "retention.set", str(tid))] == [
        "done", "rejected"]


async def test_an_operators_lower_floor_lets_minutes_through_the_api_and_the_default_refuses(
        client: httpx.AsyncClient, pool: asyncpg.Pool, db_url: str) -> None:
    """OSTINATO_RETENTION_FLOOR_SECONDS (docs/RETENTION.md "The floor"): with the default an
    hour, keep "2m" (or 120 seconds) is a 422 naming the floor and records nothing; the same
    requests to an api whose operator set the floor to 60 are accepted and stored, as the
    projection's CHECK (migration 0051) lets them; below 60 is refused there, naming 60."""
    name = f"ret-floor-{uuid.uuid4().hex[:6]}"
    await tenant(client, name)
    tid = await tenant_id_of(pool, name)
    for keep in ("2m", 120):
        problem = assert_problem(await client.put(
            f"/v1/tenants/{tid}/retention", headers=auth(ADMIN), json={"keep": keep}), 422,
            "keep")
        assert "at least 3600 seconds (1h, the retention floor)" in problem["detail"]
    assert await retention_rows(pool, tid) == []

    service = Service("api", Settings(database_url=db_url, admin_key=ADMIN,
                                      retention_floor_seconds=60))
    service.pool = pool
    transport = httpx.ASGITransport(app=create_app(service, store()))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as lowered:
        r = await lowered.put(f"/v1/tenants/{tid}/retention", headers=auth(ADMIN),
                              json={"keep": "2m"})
        assert r.status_code == 200, r.text
        assert (r.json()["keep_seconds"], r.json()["keep"]) == (120, "2m")
        r = await lowered.put(f"/v1/tenants/{tid}/retention", headers=auth(ADMIN),
                              json={"keep": 90})
        assert r.status_code == 200 and r.json()["keep_seconds"] == 90, r.text
        problem = assert_problem(await lowered.put(
            f"/v1/tenants/{tid}/retention", headers=auth(ADMIN), json={"keep": "59s"}), 422,
            "keep")
        assert "at least 60 seconds (1m, the retention floor)" in problem["detail"]
    assert [r["keep_seconds"] for r in await retention_rows(pool, tid)] == [90]


def test_the_floor_setting_is_validated_at_start() -> None:
    with pytest.raises(ValueError, match="OSTINATO_RETENTION_FLOOR_SECONDS"):
        Settings(retention_floor_seconds=0)
    assert Settings().retention_floor_seconds == 3600
