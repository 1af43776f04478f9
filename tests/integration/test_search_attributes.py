"""Searchable attributes (issue 40 item 4, docs/SEARCH_ATTRIBUTES.md) on the real PostgreSQL,
through the API, the scheduler's and dispatcher's code, the worker-gateway and an SDK worker:
declared per tenant, set at submission (a job's runs inherit them) and by
`ctx.upsert_attributes` (recorded once, replayed without being sent again), used as filters of
GET /v1/runs and of a bulk cancel; another tenant's names and values never match; bad input is
a 422 that changes nothing."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.client import AsyncClient, Client
from ostinato.clock import SystemClock
from ostinato.domain.workflow import ATTRIBUTES_STEP
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.operations import work
from ostinato.sdk import WorkflowContext, workflow
from services.scheduler.tick import fire_due
from tests.helpers.api import assert_problem, auth, tenant
from tests.helpers.cli import cli, new_key
from tests.helpers.integration import dispatch, login, store, tenant_id_of
from tests.helpers.workflows import claimed_run, send_steps, signal, work_until

pytestmark = pytest.mark.integration

DECLARED = {"customer": "keyword", "amount": "int", "stage": "keyword", "due": "datetime"}


async def declare(client: httpx.AsyncClient, key: str, types: dict[str, str]) -> None:
    for name, type_ in types.items():
        r = await client.put(f"/v1/search-attributes/{name}", json={"type": type_},
                             headers=auth(key))
        assert r.status_code == 201, r.text


async def submit(client: httpx.AsyncClient, key: str, name: str,
                 attributes: dict[str, Any] | None) -> httpx.Response:
    body: dict[str, Any] = {"name": name, "task": "orders.process",
                            "schedule": {"at": datetime.now(UTC).isoformat()}}
    if attributes is not None:
        body["attributes"] = attributes
    return await client.post("/v1/jobs", json=body, headers=auth(key))


async def listed(client: httpx.AsyncClient, key: str, *where: str) -> list[dict[str, Any]]:
    r = await client.get("/v1/runs", params=[("where", w) for w in where], headers=auth(key))
    assert r.status_code == 200, r.text
    return r.json()["items"]


def order_workflow() -> Any:
    @workflow("orders.process")
    async def process(ctx: WorkflowContext, payload: None) -> str:
        await ctx.upsert_attributes({"stage": "shipped"})
        await ctx.wait_for_signal("go")
        return "done"

    return process


async def test_declared_attributes_are_set_upserted_filtered_and_bulk_cancelled(
        client: httpx.AsyncClient, gateway: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "attrs-a")
    tenant_id = await tenant_id_of(pool, "attrs-a")
    await declare(client, key, DECLARED)
    listing = (await client.get("/v1/search-attributes", headers=auth(key))).json()
    assert [(d["name"], d["type"]) for d in listing["items"]] == sorted(DECLARED.items())
    assert listing["cap"] == 20
    due = "2026-12-01T09:00:00+01:00"
    for name, attrs in [("big-acme", {"customer": "acme", "amount": 150, "due": due}),
                        ("small-acme", {"customer": "acme", "amount": 50}),
                        ("globex", {"customer": "globex", "amount": 500}),
                        ("plain", None)]:
        r = await submit(client, key, name, attrs)
        assert r.status_code == 201, r.text
    assert len(await fire_due(pool, store(), SystemClock())) == 4
    assert await dispatch(pool) == 4

    by_job = {r["job_id"]: r for r in await listed(client, key)}
    jobs = {j["name"]: j["id"] for j in
            (await client.get("/v1/jobs", headers=auth(key))).json()["items"]}
    assert by_job[jobs["big-acme"]]["attributes"] == {  # inherited, the datetime in UTC
        "customer": "acme", "amount": 150, "due": "2026-12-01T08:00:00.000000Z"}
    assert by_job[jobs["plain"]]["attributes"] is None
    job = (await client.get(f"/v1/jobs/{jobs['small-acme']}", headers=auth(key))).json()
    assert job["attributes"] == {"customer": "acme", "amount": 50}
    assert {j["name"]: j["attributes"] for j in (await client.get(
        "/v1/jobs", headers=auth(key))).json()["items"]}["globex"] == {
        "customer": "globex", "amount": 500}

    acme = await listed(client, key, "customer=acme")
    assert {r["job_id"] for r in acme} == {jobs["big-acme"], jobs["small-acme"]}
    [big] = await listed(client, key, "customer=acme", "amount>100")
    assert big["job_id"] == jobs["big-acme"]
    assert {r["job_id"] for r in await listed(client, key, "amount<=150", "customer!=globex")
            } == {jobs["big-acme"], jobs["small-acme"]}
    [with_due] = await listed(client, key, "due>2026-12-01T07:59:00Z")
    assert with_due["job_id"] == jobs["big-acme"]
    assert await listed(client, key, "stage=shipped") == []

    # the workflow sets `stage` on each run; the runs wait for a signal
    process = order_workflow()
    globex_run = by_job[jobs["globex"]]["id"]
    await work_until(pool, gateway, key, process, tenant_id, globex_run, "suspended")
    for r in await listed(client, key, "customer~ACM"):
        await work_until(pool, gateway, key, process, tenant_id, r["id"], "suspended")
    shipped = await listed(client, key, "stage=shipped", "customer=acme")
    assert {r["job_id"] for r in shipped} == {jobs["big-acme"], jobs["small-acme"]}
    assert shipped[0]["attributes"]["stage"] == "shipped"
    assert shipped[0]["attributes"]["customer"] == "acme"  # the others stay

    # resumed, the workflow replays its upsert: recorded once, never sent again
    await signal(pool, tenant_id, globex_run)
    assert await dispatch(pool) == 1
    await work_until(pool, gateway, key, process, tenant_id, globex_run, "succeeded")
    async with pool.acquire() as conn:
        assert await conn.fetchval(
            "SELECT count(*) FROM events WHERE stream_id = $1 AND type = 'AttributesUpserted'",
            globex_run) == 1

    # a bulk cancel by attribute: the two acme runs, nothing else
    body = {"kind": "cancel", "filter": {"where": ["customer=acme"]}}
    dry = await client.post("/v1/operations", json={**body, "dry_run": True}, headers=auth(key))
    assert dry.status_code == 200 and dry.json()["count"] == 2, dry.text
    r = await client.post("/v1/operations", json=body, headers=auth(key))
    assert r.status_code == 202 and r.json()["total"] == 2, r.text
    while await work.work_once(pool, store(), SystemClock()):
        pass
    states = {r["job_id"]: r["state"] for r in await listed(client, key)}
    assert states == {jobs["big-acme"]: "cancelled", jobs["small-acme"]: "cancelled",
                      jobs["globex"]: "succeeded", jobs["plain"]: "suspended"}

    # the attributes are read models of the log: a rebuild gives the same rows
    async with pool.acquire() as conn:
        live = await snapshot(conn)
        assert len(live["run_attributes"]) == 4 and len(live["job_attributes"]) == 3
        await rebuild(conn)
        rebuilt = await snapshot(conn)
    assert rebuilt["run_attributes"] == live["run_attributes"]
    assert rebuilt["job_attributes"] == live["job_attributes"]


async def test_another_tenants_names_and_values_never_match(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key_a, key_b = await tenant(client, "iso-a"), await tenant(client, "iso-b")
    await declare(client, key_a, {"customer": "keyword"})
    await declare(client, key_b, {"customer": "keyword", "region": "keyword"})
    assert (await submit(client, key_a, "a", {"customer": "acme"})).status_code == 201
    assert (await submit(client, key_b, "b", {"customer": "acme", "region": "eu"})
            ).status_code == 201
    await fire_due(pool, store(), SystemClock())
    [mine] = await listed(client, key_a, "customer=acme")
    [theirs] = await listed(client, key_b, "customer=acme")
    assert mine["id"] != theirs["id"]
    # B's name is not A's: refused, not an empty match of B's runs
    assert_problem(await client.get("/v1/runs", params={"where": "region=eu"},
                                    headers=auth(key_a)), 422, "where")
    assert_problem(await submit(client, key_a, "a2", {"region": "eu"}), 422,
                   "attributes.region")
    r = await client.post("/v1/operations", json={
        "kind": "cancel", "dry_run": True, "filter": {"where": ["customer=acme"]}},
        headers=auth(key_a))
    assert r.json()["count"] == 1
    declared_a = (await client.get("/v1/search-attributes", headers=auth(key_a))).json()
    assert [d["name"] for d in declared_a["items"]] == ["customer"]
    assert (await client.delete("/v1/search-attributes/region", headers=auth(key_a))
            ).status_code == 404


async def test_bad_input_is_a_422_that_changes_nothing(
        client: httpx.AsyncClient, gateway: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "attrs-bad")
    tenant_id = await tenant_id_of(pool, "attrs-bad")
    await declare(client, key, {"customer": "keyword", "amount": "int", "vip": "bool"})
    for attrs, field in [({"nope": 1}, "attributes.nope"),
                         ({"amount": "ten"}, "attributes.amount"),
                         ({"amount": 1.5}, "attributes.amount"),
                         ({"vip": 1}, "attributes.vip"),
                         ({"customer": 7}, "attributes.customer")]:
        assert_problem(await submit(client, key, "bad", attrs), 422, field)
    for where in ["customer", "=acme", "nope=1", "amount>ten", "vip>true", "amount~1",
                  "customer=acme;DROP TABLE runs"]:
        r = await client.get("/v1/runs", params={"where": where}, headers=auth(key))
        if where.startswith("customer=acme;"):  # a value like any other: no match, no harm
            assert r.status_code == 200 and r.json()["items"] == []
        else:
            assert_problem(r, 422, "where")
    assert_problem(await client.post("/v1/operations", json={
        "kind": "cancel", "filter": {"where": ["amount>x"]}}, headers=auth(key)), 422, "where")
    for name, body, field in [("amount", {"type": "keyword"}, "type"),  # declared as int
                              ("9lives", {"type": "int"}, "name"),
                              ("x", {"type": "uuid"}, None)]:
        r = await client.put(f"/v1/search-attributes/{name}", json=body, headers=auth(key))
        assert r.status_code in (400, 422), r.text
        if field:
            assert_problem(r, 422, field)
    again = await client.put("/v1/search-attributes/amount", json={"type": "int"},
                             headers=auth(key))
    assert again.status_code == 200  # a repeat
    await declare(client, key, {f"extra{i}": "keyword" for i in range(17)})  # 20 now
    assert_problem(await client.put("/v1/search-attributes/one_more", json={"type": "int"},
                                    headers=auth(key)), 422, "name")
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE tenant_id = $1",
                                   tenant_id) == 0
        assert await conn.fetchval("SELECT count(*) FROM search_attributes WHERE tenant_id = $1",
                                   tenant_id) == 20
    assert (await client.delete("/v1/search-attributes/extra0", headers=auth(key))
            ).status_code == 204
    assert (await client.put("/v1/search-attributes/one_more", json={"type": "int"},
                             headers=auth(key))).status_code == 201

    # from a workflow: an undeclared name or a wrong type records nothing (422)
    run = await claimed_run(pool, gateway, tenant_id, key)
    for output in [{"nope": 1}, {"amount": "x"}, [1], {}]:
        [result] = await send_steps(gateway, key, [{
            "run_id": run.run_id, "fencing_token": run.fencing_token, "seq": 0,
            "name": ATTRIBUTES_STEP, "output": output}])
        assert result.status == 422, result
    [ok] = await send_steps(gateway, key, [{
        "run_id": run.run_id, "fencing_token": run.fencing_token, "seq": 0,
        "name": ATTRIBUTES_STEP, "output": {"amount": 3}}])
    assert ok.status == 200
    r = await client.get(f"/v1/runs/{run.run_id}", headers=auth(key))
    assert r.json()["attributes"] == {"amount": 3}
    async with pool.acquire() as conn:
        assert await conn.fetchval(
            "SELECT count(*) FROM events WHERE type = 'AttributesUpserted' AND tenant_id = $1",
            tenant_id) == 1



async def test_the_cli_and_the_clients_declare_filter_and_cancel_by_attribute(
        api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    code, out, err = await cli(tmp_path, "attributes", "declare", "customer", "keyword",
                               "-o", "json", env=env)
    assert code == 0, err
    assert json.loads(out)["type"] == "keyword"
    code, _, err = await cli(tmp_path, "attributes", "declare", "amount", "money", env=env)
    assert code == 2 and "one of keyword" in err

    def declare_amount() -> str:  # the sync client (off the loop serving the API)
        with Client(api_url, key) as sync:
            return sync.search_attributes.declare("amount", "int").type

    assert await asyncio.to_thread(declare_amount) == "int"
    async with AsyncClient(api_url, key) as client:
        assert [d.name for d in (await client.search_attributes.list()).items] == [
            "amount", "customer"]
        acme = await client.jobs.create(name="acme", schedule={"every": "1h"},
                                        attributes={"customer": "acme", "amount": 7})
        other = await client.jobs.create(name="other", schedule={"every": "1h"},
                                         attributes={"customer": "globex"})
        for job in (acme, other, acme):
            await client.jobs.trigger(job.id)  # manual runs inherit the job's attributes
        mine = [r async for r in client.runs.list(where=["customer=acme", "amount>=7"])]
        assert len(mine) == 2 and {r.job_id for r in mine} == {acme.id}
        assert mine[0].attributes == {"customer": "acme", "amount": 7}

    code, out, err = await cli(tmp_path, "runs", "list", "--where", "customer=globex",
                               "-o", "json", env=env)
    assert code == 0, err
    assert [r["job_id"] for r in json.loads(out)] == [str(other.id)]
    code, _, err = await cli(tmp_path, "runs", "list", "--where", "region=eu", env=env)
    assert code == 1 and "(422)" in err
    code, out, err = await cli(tmp_path, "runs", "cancel", "--where", "customer=acme",
                               "--yes", "-o", "json", env=env)
    assert code == 0, err
    assert "cancelled 2 of 2 runs" in err

    def states() -> tuple[list[tuple[bool, str]], list[str]]:
        with Client(api_url, key) as sync:
            return (sorted((r.job_id == acme.id, r.state) for r in sync.runs.list()),
                    [r.state for r in sync.runs.list(where=["customer=acme"])])

    assert await asyncio.to_thread(states) == (
        [(False, "scheduled"), (True, "cancelled"), (True, "cancelled")],
        ["cancelled", "cancelled"])
    code, out, err = await cli(tmp_path, "attributes", "list", "-o", "json", env=env)
    assert code == 0 and [d["name"] for d in json.loads(out)] == ["amount", "customer"], err
    code, _, err = await cli(tmp_path, "attributes", "remove", "amount", env=env)
    assert code == 0, err
    code, _, err = await cli(tmp_path, "attributes", "remove", "amount", env=env)
    assert code == 1 and "(404)" in err


async def test_the_cli_sets_attributes_at_submission(api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    for name, type_ in (("customer", "keyword"), ("amount", "int")):
        assert (await cli(tmp_path, "attributes", "declare", name, type_, env=env))[0] == 0
    code, out, err = await cli(tmp_path, "jobs", "create", "--name", "nightly", "--every", "1h",
                               "-a", "customer=initech", "-a", "amount=9", "-o", "json", env=env)
    assert code == 0, err
    job = json.loads(out)
    assert job["attributes"] == {"customer": "initech", "amount": 9}
    code, out, err = await cli(tmp_path, "run", "report", "--attribute", "customer=initech",
                               "-o", "json", env=env)
    assert code == 0, err
    started = json.loads(out)["job_id"]  # its run inherits them when the scheduler makes it
    code, out, err = await cli(tmp_path, "jobs", "get", started, "-o", "json", env=env)
    assert code == 0, err
    assert json.loads(out)["attributes"] == {"customer": "initech"}
    code, _, err = await cli(tmp_path, "run", "report", "-a", "amount=nine", env=env)
    assert code == 1 and "(422)" in err  # text where an int is declared: the API refuses it
    code, _, err = await cli(tmp_path, "run", "report", "-a", "no-equals-sign", env=env)
    assert code == 2 and "NAME=VALUE" in err


async def test_the_ui_runs_list_filters_by_its_where_box_and_offers_the_bulk_cancel(
        client: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    key = await tenant(client, "attrs-ui")
    await declare(client, key, {"customer": "keyword", "amount": "int"})
    for name, attrs in [("ui-acme", {"customer": "acme", "amount": 150}),
                        ("ui-small", {"customer": "acme", "amount": 5}),
                        ("ui-globex", {"customer": "globex", "amount": 150})]:
        assert (await submit(client, key, name, attrs)).status_code == 201
    await fire_due(pool, store(), SystemClock())
    runs = {r["job_id"]: r["id"] for r in await listed(client, key)}
    jobs = {j["name"]: j["id"] for j in
            (await client.get("/v1/jobs", headers=auth(key))).json()["items"]}
    await login(client, key)
    page = await client.get("/ui/runs", params={"where": "customer=acme AND amount>100"})
    assert page.status_code == 200, page.text
    assert 'name="where" value="customer=acme AND amount&gt;100"' in page.text
    shown = {run for run in runs.values() if f"/ui/runs/{run}" in page.text}
    assert shown == {runs[jobs["ui-acme"]]}
    offer = re.search(r'data-kind="cancel" href="([^"]+)"', page.text)
    assert offer, page.text  # the bulk cancel of exactly this filter
    confirm = await client.get(offer.group(1).replace("&amp;", "&"))
    assert confirm.status_code == 200, confirm.text
    assert '<b id="confirm-count">1 run</b>' in confirm.text
    detail = await client.get(f"/ui/runs/{runs[jobs['ui-acme']]}")
    assert "attributes" in detail.text and "acme" in detail.text
    bad = await client.get("/ui/runs", params={"where": "region=eu"})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("text/html")
