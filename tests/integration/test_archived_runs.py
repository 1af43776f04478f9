"""Archived runs stay readable (issue 38 item 3, docs/RETENTION.md "Reading an archived run"):
on the real PostgreSQL and the real S3 server, a run the hot tables no longer hold is answered
from its archive object by GET /v1/runs/{id}, /events and /steps exactly as it was answered hot
(`archived` true and `archived_at` added), listed by GET /v1/runs?include=archived with its
filters, refused with 409 by the actions, never read across tenants; a corrupt object is a 424
`archive-unreadable` counted for its alert, the store stopped a 503 with Retry-After.

The archive objects are a real run's history (run through the scheduler's, dispatcher's and
gateway's code, read back with the stores' reads) encoded by `ostinato.archive` as the archiver
encodes it, filed under a run id only the archive knows: the hot copy stays for comparison."""

from __future__ import annotations

import asyncio
import gzip
import json
import shlex
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from ostinato.archive import ArchivedRun, run_key
from ostinato.client import ApiError, AsyncClient, Client
from ostinato.objects import ObjectStore
from ostinato.sdk import WorkflowContext, workflow
from ostinato.telemetry import metrics
from tests.helpers.api import assert_problem, auth
from tests.helpers.archives import api, history, put_archived, served
from tests.helpers.cli import ROOT, cli
from tests.helpers.integration import (
    drive_one_run,
    login,
    new_tenant,
    queued_workflow_run,
)
from tests.helpers.objects import PrivateS3
from tests.helpers.workflows import work_until

pytestmark = pytest.mark.integration

ARCHIVED_AT = datetime(2026, 11, 20, 3, 0, tzinfo=UTC)
ENDED_AFTER, ENDED_BEFORE = ("2026-01-01T00:00:00Z", "2026-01-31T00:00:00Z")


async def one_archived(pool: asyncpg.Pool, objects: ObjectStore, ended: datetime | None = None,
                       ) -> tuple[uuid.UUID, str, uuid.UUID, uuid.UUID]:
    """(tenant, key, hot run, archived run): a succeeded run's history filed in the archive
    under a run id only the archive knows (`ended`: as if it had ended then)."""
    tenant_id, key = await new_tenant(pool)
    _, hot_id = await drive_one_run(pool, succeed=True, tenant_id=tenant_id)
    cold_id = uuid.uuid4()
    doc = await history(pool, tenant_id, hot_id, ARCHIVED_AT, as_id=cold_id)
    if ended is not None:
        doc = msgspec.structs.replace(doc, run={**doc.run, "finished_at": ended})
    await put_archived(objects, doc)
    return tenant_id, key, hot_id, cold_id


@workflow("shop.checkout")
async def checkout(ctx: WorkflowContext, payload: Any) -> dict[str, Any]:
    await ctx.step("reserve", lambda: {"sku": payload["sku"]})
    await ctx.step("charge", lambda: "x" * 20_000)  # over the inline limit: a blob
    return {"order": payload["sku"], "paid": True}


async def finished_workflow(pool: asyncpg.Pool, gateway: httpx.AsyncClient
                            ) -> tuple[uuid.UUID, str, uuid.UUID]:
    """(tenant, key, run) of a succeeded workflow run with two recorded steps."""
    tenant_id, key = await new_tenant(pool)
    run_id = await queued_workflow_run(pool, tenant_id, "shop.checkout", {"sku": "A-1"})
    await work_until(pool, gateway, key, checkout, tenant_id, run_id, "succeeded")
    return tenant_id, key, run_id


def same_but_archived(hot: dict[str, Any], cold: dict[str, Any], hot_id: uuid.UUID,
                      cold_id: uuid.UUID) -> None:
    """`cold` is `hot` filed under `cold_id`, marked archived."""
    assert hot["archived"] is False and hot["archived_at"] is None
    assert cold["archived"] is True
    assert datetime.fromisoformat(cold["archived_at"]) == ARCHIVED_AT
    text = str(hot).replace(str(hot_id), str(cold_id))
    assert str({**cold, "archived": False, "archived_at": None}) == text


async def every_page(client: httpx.AsyncClient, path: str, key: str, limit: int,
                     start: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    after: int | None = start
    while after is not None:
        r = await client.get(path, params={"after": after, "limit": limit}, headers=auth(key))
        assert r.status_code == 200, r.text
        items += r.json()["items"]
        after = r.json()["next_after"]
    return items


async def test_an_archived_run_reads_as_it_did_hot(
        pool: asyncpg.Pool, db_url: str, gateway: httpx.AsyncClient,
        object_store: ObjectStore) -> None:
    tenant_id, key, hot_id = await finished_workflow(pool, gateway)
    cold_id = uuid.uuid4()  # only the archive knows it
    await put_archived(object_store, await history(pool, tenant_id, hot_id, ARCHIVED_AT,
                                                   as_id=cold_id))
    async with api(pool, db_url, object_store) as client:
        hot = (await client.get(f"/v1/runs/{hot_id}", headers=auth(key))).json()
        r = await client.get(f"/v1/runs/{cold_id}", headers=auth(key))
        assert r.status_code == 200, r.text
        cold = r.json()
        assert cold["state"] == "succeeded" and cold["output"] == {"order": "A-1", "paid": True}
        assert cold["payload"] == {"sku": "A-1"} and cold["steps_done"] == 2
        same_but_archived(hot, cold, hot_id, cold_id)

        for path, start in (("/v1/runs/{}/events", 0), ("/v1/runs/{}/steps", -1)):
            hot_page = (await client.get(path.format(hot_id), headers=auth(key))).json()
            cold_page = (await client.get(path.format(cold_id), headers=auth(key))).json()
            assert cold_page["run_id"] == str(cold_id) and cold_page["archived"] is True
            assert hot_page["archived"] is False
            assert cold_page["items"] == hot_page["items"] and cold_page["items"]
            # paged alike: every item once, in order, with next_after as the hot pages give it
            assert await every_page(client, path.format(cold_id), key, 2, start) == \
                await every_page(client, path.format(hot_id), key, 2, start) == hot_page["items"]
        hot_steps = (await client.get(f"/v1/runs/{hot_id}/steps",
                                      params={"inline_outputs": "true"}, headers=auth(key)))
        cold_steps = (await client.get(f"/v1/runs/{cold_id}/steps",
                                       params={"inline_outputs": "true"}, headers=auth(key)))
        assert cold_steps.json()["items"] == hot_steps.json()["items"]
        assert cold_steps.json()["items"][1]["output"] == "x" * 20_000  # the blob, put back
        # past the end: an empty page of a run that exists
        r = await client.get(f"/v1/runs/{cold_id}/events", params={"after": 10_000},
                             headers=auth(key))
        assert (r.status_code, r.json()["items"], r.json()["next_after"]) == (200, [], None)


async def test_the_actions_refuse_an_archived_run_with_409_and_an_unknown_one_is_404(
        pool: asyncpg.Pool, db_url: str, object_store: ObjectStore) -> None:
    _, key, _, cold_id = await one_archived(pool, object_store)
    actions: list[tuple[str, Any]] = [
        ("cancel", None), ("retry", None), ("signals/go", None), ("pause", None),
        ("resume", None), ("updates", {"name": "u"}), ("succeed", {"reason": "r"}),
        ("fail", {"reason": "r"}), ("restart", {"from_seq": 0, "reason": "r"}),
        ("steps/0/retry", {"reason": "r"}),
        ("steps/0/skip", {"name": "a", "output": 1, "reason": "r"}),
        ("hold", {"reason": "audit"}), ("release", None)]
    async with api(pool, db_url, object_store) as client:
        for path, body in actions:
            r = await client.post(f"/v1/runs/{cold_id}/{path}", json=body, headers=auth(key))
            problem = assert_problem(r, 409)
            assert problem["type"].endswith("/run-archived"), (path, problem)
            assert_problem(await client.post(f"/v1/runs/{uuid.uuid4()}/{path}", json=body,
                                             headers=auth(key)), 404)
        for path, body in (("triage", {"state": "acknowledged"}), ("replay", {})):
            r = await client.post(f"/v1/dead-letters/{cold_id}/{path}", json=body,
                                  headers=auth(key))
            assert assert_problem(r, 409)["type"].endswith("/run-archived")
        # each refusal is audited as it was answered (the key is its tenant's operator)
        r = await client.get("/v1/audit", params={"target_id": str(cold_id), "limit": 100},
                             headers=auth(key))
        assert r.status_code == 200, r.text
        audited = r.json()["items"]
        assert len(audited) == len(actions) + 2
        assert {(e["status"], e["outcome"]) for e in audited} == {(409, "rejected")}
        # nothing was written for the archived run
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM events WHERE stream_id = $1",
                                       cold_id) == 0


async def test_another_tenant_s_archived_run_is_a_404_and_never_read(
        pool: asyncpg.Pool, db_url: str, object_store: ObjectStore) -> None:
    _, key, _, cold_id = await one_archived(pool, object_store)
    _, other_key = await new_tenant(pool)
    async with api(pool, db_url, object_store) as client:
        assert (await client.get(f"/v1/runs/{cold_id}", headers=auth(key))).status_code == 200
        reads = metrics.ARCHIVE_READS.labels("read")._value.get()
        for path in ("", "/events", "/steps"):
            assert_problem(await client.get(f"/v1/runs/{cold_id}{path}",
                                            headers=auth(other_key)), 404)
        assert_problem(await client.post(f"/v1/runs/{cold_id}/cancel",
                                         headers=auth(other_key)), 404)
        assert metrics.ARCHIVE_READS.labels("read")._value.get() == reads  # its object never read
        r = await client.get("/v1/runs", params={"include": "archived", "ended_after":
                                                 ENDED_AFTER, "ended_before": ENDED_BEFORE},
                             headers=auth(other_key))
        assert r.status_code == 200 and r.json()["items"] == []


async def test_a_corrupt_archive_object_is_a_424_problem_counted_for_its_alert(
        pool: asyncpg.Pool, db_url: str, object_store: ObjectStore) -> None:
    tenant_id, key = await new_tenant(pool)
    _, hot_id = await drive_one_run(pool, succeed=True, tenant_id=tenant_id)
    flipped, torn, elsewhere = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    for cold_id in (flipped, torn, elsewhere):
        await put_archived(object_store, await history(pool, tenant_id, hot_id, ARCHIVED_AT,
                                                       as_id=cold_id))
    good = await object_store.get(run_key(tenant_id, flipped))
    body = bytearray(gzip.decompress(good))
    body[body.index(b'"state"') + 10] ^= 1  # one bit of the body: the checksum fails
    await object_store.put(run_key(tenant_id, flipped), gzip.compress(bytes(body)))
    await object_store.put(run_key(tenant_id, torn), good[:len(good) // 2])  # cut short
    # another run's object copied under this run's key
    await object_store.put(run_key(tenant_id, elsewhere), good)
    async with api(pool, db_url, object_store) as client:
        for cold_id, what in ((flipped, "checksum"), (torn, "gzip"), (elsewhere, "run")):
            before = metrics.ARCHIVE_READS.labels("unreadable")._value.get()
            for path in ("", "/events", "/steps"):
                problem = assert_problem(await client.get(f"/v1/runs/{cold_id}{path}",
                                                          headers=auth(key)), 424)
                assert problem["type"].endswith("/archive-unreadable")
                assert what in problem["detail"] and str(cold_id) in problem["detail"]
            assert metrics.ARCHIVE_READS.labels("unreadable")._value.get() == before + 3
            exported = (await client.get("/metrics")).text
            assert 'ostinato_archive_reads_total{outcome="unreadable"}' in exported


async def test_the_object_store_stopped_is_a_503_with_retry_after(
        pool: asyncpg.Pool, db_url: str, private_s3: PrivateS3) -> None:
    objects = private_s3.store("archive", timeout=5)
    try:
        _, key, hot_id, cold_id = await one_archived(pool, objects)
        async with api(pool, db_url, objects) as client:
            assert (await client.get(f"/v1/runs/{cold_id}", headers=auth(key))).status_code \
                == 200
            await private_s3.stop()
            for method, path in (("GET", ""), ("GET", "/events"), ("GET", "/steps"),
                                 ("POST", "/cancel")):
                r = await client.request(method, f"/v1/runs/{cold_id}{path}", headers=auth(key))
                problem = assert_problem(r, 503)
                assert problem["type"].endswith("/service-unavailable")
                assert int(r.headers["retry-after"]) >= 1
            r = await client.get("/v1/runs", params={"include": "archived", "ended_after":
                                                     ENDED_AFTER, "ended_before": ENDED_BEFORE},
                                 headers=auth(key))
            assert_problem(r, 503)
            # the hot runs are still answered
            assert (await client.get(f"/v1/runs/{hot_id}", headers=auth(key))).status_code \
                == 200
    finally:
        await objects.close()


async def listing(client: httpx.AsyncClient, key: str, **params: Any) -> list[dict[str, Any]]:
    """Every page of GET /v1/runs with `params`, followed by its cursor."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        r = await client.get("/v1/runs", params={**params, "cursor": cursor}
                             if cursor else params, headers=auth(key))
        assert r.status_code == 200, r.text
        items += r.json()["items"]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return items


async def test_include_archived_lists_hot_then_archived_runs_with_the_filters(
        pool: asyncpg.Pool, db_url: str, object_store: ObjectStore) -> None:
    tenant_id, key = await new_tenant(pool)
    _, hot_id = await drive_one_run(pool, succeed=True, tenant_id=tenant_id)
    base = await history(pool, tenant_id, hot_id, ARCHIVED_AT)
    ended = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
    made: dict[uuid.UUID, datetime] = {}
    docs = []
    for n in range(7):  # 7 runs that ended over 3 days, filed in two batches
        cold_id, at = uuid.uuid4(), ended + timedelta(days=n % 3, minutes=n)
        made[cold_id] = at
        docs.append(ArchivedRun(
            tenant_id=tenant_id, run_id=cold_id, archived_at=ARCHIVED_AT,
            run={**base.run, "id": cold_id, "finished_at": at,
                 "state": "cancelled" if n == 3 else "succeeded"},
            events=base.events, blobs=base.blobs,
            attributes={"customer": "acme" if n % 2 else "globex", "amount": n}))
    await put_archived(object_store, *docs[:4])
    await put_archived(object_store, *docs[4:])
    out_of_range = uuid.uuid4()
    await put_archived(object_store, ArchivedRun(
        tenant_id=tenant_id, run_id=out_of_range, archived_at=ARCHIVED_AT,
        run={**base.run, "id": out_of_range, "finished_at": ended + timedelta(days=40)},
        events=base.events))
    # the hot run archived too (between the archiver's put and its removal): listed once
    both_places = await history(pool, tenant_id, hot_id, ARCHIVED_AT)
    await put_archived(object_store, msgspec.structs.replace(
        both_places, run={**both_places.run, "finished_at": ended}))
    async with api(pool, db_url, object_store) as client:
        for name, type_ in (("customer", "keyword"), ("amount", "int")):
            r = await client.put(f"/v1/search-attributes/{name}", json={"type": type_},
                                 headers=auth(key))
            assert r.status_code in (200, 201), r.text
        window = {"include": "archived", "ended_after": ENDED_AFTER,
                  "ended_before": ENDED_BEFORE}
        hot_only = await listing(client, key)
        assert [i["id"] for i in hot_only] == [str(hot_id)]
        both = await listing(client, key, **window, limit=2)  # pages of 2: 4 pages
        ids = [uuid.UUID(i["id"]) for i in both]
        assert ids[0] == hot_id and both[0]["archived"] is False
        assert set(ids[1:]) == set(made) and len(ids) == 1 + len(made)  # each once
        assert all(i["archived"] is True and i["archived_at"] for i in both[1:])
        days = [made[i].date() for i in ids[1:]]
        assert days == sorted(days, reverse=True)  # latest day first
        assert "payload" not in both[1] or both[1]["payload"] is None  # as a listing shows it
        assert both[1]["output"] == {"ok": True}
        # filters an index row carries
        cancelled = await listing(client, key, **window, state="cancelled")
        assert [i["id"] for i in cancelled] == [str(docs[3].run_id)]
        acme = await listing(client, key, **window, where="customer=acme")
        assert {i["id"] for i in acme} == {str(d.run_id) for d in docs[1::2]}
        big = await listing(client, key, **window, where=["customer=acme", "amount>3"])
        assert {i["id"] for i in big} == {str(docs[5].run_id)}
        narrow = await listing(client, key, **{**window, "ended_after": "2026-01-11T00:00:00Z",
                                               "ended_before": "2026-01-12T00:00:00Z"})
        assert {uuid.UUID(i["id"]) for i in narrow} == {i for i, at in made.items()
                                                        if at.day == 11} | {hot_id}
        other_job = await listing(client, key, **window, job_id=str(uuid.uuid4()))
        assert other_job == []


@pytest.mark.parametrize(("params", "field"), [
    ({"include": "archived"}, "ended_after"),
    ({"include": "archived", "ended_after": "2026-01-01T00:00:00Z"}, "ended_before"),
    ({"include": "archived", "ended_after": "2026-01-01T00:00:00Z",
      "ended_before": "2026-03-01T00:00:00Z"}, "ended_before"),  # over 31 days
    ({"include": "archived", "ended_after": "2026-01-02T00:00:00Z",
      "ended_before": "2026-01-01T00:00:00Z"}, "ended_before"),  # reversed
    ({"ended_after": "2026-01-01T00:00:00Z"}, "ended_after"),  # without include=archived
    ({"include": "archived", "ended_after": "2026-01-01T00:00:00Z",
      "ended_before": "2026-01-02T00:00:00Z", "pool": "default"}, "pool"),
    ({"include": "archived", "ended_after": "2026-01-01T00:00:00Z",
      "ended_before": "2026-01-02T00:00:00Z", "cursor": "a.bm90IGEgY3Vyc29y"}, "cursor"),
])
async def test_a_bad_archived_listing_is_a_422_naming_the_parameter(
        pool: asyncpg.Pool, db_url: str, object_store: ObjectStore, params: dict[str, str],
        field: str) -> None:
    _, key = await new_tenant(pool)
    async with api(pool, db_url, object_store) as client:
        assert_problem(await client.get("/v1/runs", params=params, headers=auth(key)), 422,
                       field)
        r = await client.get("/v1/runs", params={"include": "everything"}, headers=auth(key))
        assert r.status_code in (400, 422), r.text


def worked_example() -> list[tuple[list[str], list[str]]]:
    """docs/RETENTION.md "Reading an archived run": each `$ ostinato ...` command of its
    console block with the lines shown after it."""
    text = (ROOT / "docs" / "RETENTION.md").read_text()
    section = text.split("## Reading an archived run", 1)[1].split("\n## ", 1)[0]
    block = section.split("```console\n", 1)[1].split("```", 1)[0]
    commands: list[tuple[list[str], list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append((shlex.split(line[2:])[1:], []))
        else:
            commands[-1][1].append(line)
    return commands


async def test_the_worked_example_of_reading_an_archived_run_runs(
        pool: asyncpg.Pool, db_url: str, object_store: ObjectStore, tmp_path: Path) -> None:
    _, key, hot_id, cold_id = await one_archived(pool, object_store,
                                                 datetime(2026, 1, 10, tzinfo=UTC))
    async with served(pool, db_url, object_store) as url:
        env = {"OSTINATO_API_URL": url, "OSTINATO_API_KEY": key}
        commands = worked_example()
        assert len(commands) >= 5
        for args, shown in commands:
            args = [str(cold_id) if a == "$RUN" else a for a in args]
            code, out, err = await cli(tmp_path, *args, env=env)
            if args[:2] == ["runs", "cancel"]:
                assert code == 1 and "(409)" in err and "archived" in err, (args, out, err)
                continue
            assert code == 0, (args, out, err)
            if args[:2] == ["runs", "get"] and "-o" not in args:
                assert out.splitlines()[0] == shown[0]  # "archived 2026-11-20 03:00:00Z"
            elif args[:2] == ["runs", "get"]:
                got = json.loads(out)
                assert got["archived"] is True and got["id"] == str(cold_id)
                assert datetime.fromisoformat(got["archived_at"]) == ARCHIVED_AT
            elif args[:2] == ["runs", "events"]:
                assert "RunScheduled" in out and "RunSucceeded" in out
            elif "json" in args:
                assert [i["id"] for i in json.loads(out)] == [str(hot_id), str(cold_id)]
            else:  # the table: the hot run, then the archived one, said so
                assert str(hot_id) in out and str(cold_id) in out and "archived 2026-11-20" in out


async def test_the_ui_s_run_page_shows_an_archived_run_without_actions(
        pool: asyncpg.Pool, db_url: str, object_store: ObjectStore) -> None:
    _, key, hot_id, cold_id = await one_archived(pool, object_store)
    async with api(pool, db_url, object_store) as client:
        await login(client, key)
        hot = await client.get(f"/ui/runs/{hot_id}")
        page = await client.get(f"/ui/runs/{cold_id}")
        assert page.status_code == 200, page.text
        assert 'class="archived-banner" role="status">archived <time' in page.text
        assert "2026-11-20 03:00:00 UTC" in page.text
        assert hot.status_code == 200 and "archived-banner" not in hot.text
        assert f'action="/ui/runs/{cold_id}/' not in page.text  # no form acts on it
        for shown in ("RunScheduled", "RunSucceeded", "hello", "world", "succeeded"):
            assert shown in page.text, shown  # the timeline and the output, from the archive
        _, other_key = await new_tenant(pool)
    async with api(pool, db_url, object_store) as other:
        await login(other, other_key)
        assert (await other.get(f"/ui/runs/{cold_id}")).status_code == 404


async def test_the_clients_read_and_list_archived_runs(
        pool: asyncpg.Pool, db_url: str, object_store: ObjectStore) -> None:
    _, key, hot_id, cold_id = await one_archived(pool, object_store,
                                                 datetime(2026, 1, 10, tzinfo=UTC))
    start, end = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 31, tzinfo=UTC)
    async with served(pool, db_url, object_store) as url:
        async with AsyncClient(url, key) as aio:
            run = await aio.runs.get(cold_id)
            assert run.archived and run.archived_at == ARCHIVED_AT and run.state == "succeeded"
            assert not (await aio.runs.get(hot_id)).archived
            assert [e.type async for e in aio.runs.events(cold_id, page_size=2)][:1] == [
                "RunScheduled"]
            listed = [r async for r in aio.runs.list(include_archived=True, ended_after=start,
                                                     ended_before=end, page_size=1)]
            assert [(r.id, r.archived) for r in listed] == [(hot_id, False), (cold_id, True)]
            with pytest.raises(ApiError) as caught:
                await aio.runs.cancel(cold_id)
            assert caught.value.status == 409 and caught.value.type.endswith("/run-archived")

        def sync_side() -> None:
            with Client(url, key) as sync:
                assert sync.runs.get(cold_id).archived_at == ARCHIVED_AT
                assert [r.id for r in sync.runs.list(include_archived=True, ended_after=start,
                                                     ended_before=end, state="succeeded")] \
                    == [hot_id, cold_id]
                with pytest.raises(ApiError) as caught:
                    list(sync.runs.list(include_archived=True, ended_after=start))
                assert caught.value.status == 422

        await asyncio.to_thread(sync_side)
