"""Mixed versions during a rolling upgrade (issue 39 item 6): the previous release
(tests/compat/PREVIOUS, checked out into a worktree) and main run side by side on ONE database
migrated by main and one Kafka topic prefix.

Phase 1: old scheduler, new dispatcher, old worker-gateway, new reconciler, an old and a new
api. Phase 2 swaps each of the four (the gateway restarted on its port, as an orchestrator
replaces a pod behind one address) while both apis stay. An old-SDK worker (pool `old`) and a
new-SDK one (pool `new`) run throughout. Through both apis, in both phases: one-off jobs and
workflows (steps, a timer, a signal); phase 1's workflows are signalled after the swap, each
through the api that did not submit it. Every run ends once, every effect exists once, and each
api lists, shows and reads the events of every run, whichever version wrote them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.helpers.compat import (
    imported_from,
    launch,
    previous_commit,
    previous_tree,
    spawn,
    start_script,
    stop,
)
from tests.helpers.env import (
    KAFKA_BOOTSTRAP,
    app_url_for,
    drop_database,
    fresh_database,
    owner_url_for,
    url_for,
)
from tests.helpers.lab.cluster import ROOT, Cluster
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(600)]

WORKER = Path(__file__).with_name("worker.py")
GIVE_UP = 90.0  # seconds: only a hang is caught by it, never a duration asserted
FAST = {"OSTINATO_POOLS": "default,old,new", "OSTINATO_SCHEDULER_POLL_SECONDS": "0.1",
        "OSTINATO_RECONCILE_INTERVAL_SECONDS": "1", "OSTINATO_SHARD_LEASE_TTL_SECONDS": "3"}


@pytest.fixture(scope="module")
def old_tree() -> Path:
    """The previous release's tree; its code is what `spawn(..., old_tree)` really runs."""
    tree = previous_tree()
    for module in ("ostinato", "services"):
        assert imported_from(tree, module).is_relative_to(tree), module
    assert imported_from(None, "ostinato").is_relative_to(ROOT / "libs")
    return tree


@pytest.fixture
async def cluster(template_db: str, topic_prefix: str,
                  tmp_path: Path) -> AsyncIterator[tuple[Cluster, str]]:
    name = await fresh_database(template_db)  # migrated by main: the newer schema
    c = Cluster(database_url=app_url_for(name), kafka_bootstrap=KAFKA_BOOTSTRAP,
                topic_prefix=topic_prefix, log_dir=tmp_path / "logs", extra_env=dict(FAST))
    try:
        yield c, name
    finally:
        c.stop()
        await drop_database(name)


@asynccontextmanager
async def workers(c: Cluster, tree: Path, key: str, effects_url: str,
                  log_dir: Path) -> AsyncIterator[dict[str, Any]]:
    """The old-SDK worker (pool `old`) and the new-SDK one (pool `new`), on the gateway's one
    address; they outlive the gateway's upgrade."""
    procs = {version: start_script(WORKER, code, {
        "OSTINATO_GATEWAY_URL": c.gateway_url, "OSTINATO_API_KEY": key,
        "COMPAT_EFFECTS_URL": effects_url, "COMPAT_WORKER_ID": version, "COMPAT_POOL": version,
    }, log_dir / f"worker-{version}.log") for version, code in (("old", tree), ("new", None))}
    try:
        yield procs
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                await asyncio.wait_for(asyncio.to_thread(p.wait), 20)
            except TimeoutError:
                p.kill()


def sdk_of(log_dir: Path, version: str) -> str:
    for line in (log_dir / f"worker-{version}.log").read_text(errors="replace").splitlines():
        if line.startswith(f"compat worker {version} sdk="):
            return line.split("sdk=", 1)[1]
    return ""


def submissions(phase: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """(api, job) pairs: through each api, a job and a workflow for each worker's pool."""
    for api in ("old", "new"):
        for pool in ("old", "new"):
            yield api, {"name": f"fx-{phase}-{api}-{pool}", "task": "fx", "pool": pool,
                        "idempotency_key": f"fx-{phase}-{api}-{pool}"}
            yield api, {"name": f"flow-{phase}-{api}-{pool}", "task": "flow", "pool": pool,
                        "idempotency_key": f"flow-{phase}-{api}-{pool}", "payload": {"timer": 1}}


async def event_types(db: asyncpg.Connection, run_id: uuid.UUID) -> list[str]:
    return [r["type"] for r in await db.fetch(
        "SELECT type FROM events WHERE stream_id = $1 ORDER BY version", run_id)]


async def waiting_for_signal(db: asyncpg.Connection, run_ids: list[uuid.UUID]) -> bool:
    """Every workflow's timer fired and the run is suspended again, now on its signal."""
    for run_id in run_ids:
        types = await event_types(db, run_id)
        if "TimerFired" not in types or "RunSuspended" not in types[types.index("TimerFired"):]:
            return False
    return True


async def test_previous_release_and_main_share_a_database_and_topics_through_an_upgrade(
        cluster: tuple[Cluster, str], old_tree: Path, tmp_path: Path) -> None:
    c, name = cluster
    log_dir = c.log_dir
    first = {"api_old": ("api", old_tree), "api_new": ("api", None),
             "scheduler": ("scheduler", old_tree), "dispatcher": ("dispatcher", None),
             "gateway": ("worker_gateway", old_tree), "reconciler": ("reconciler", None)}
    for alias, (service, tree) in first.items():
        launch(c, alias, service, tree,
               port=c.ports["worker_gateway"] if alias == "gateway" else None)
    for alias in first:
        c.wait_ready(alias)
    apis = {v: httpx.AsyncClient(base_url=f"http://127.0.0.1:{c.ports[f'api_{v}']}", timeout=30)
            for v in ("old", "new")}
    db = await asyncpg.connect(url_for(name))
    try:
        created = await apis["old"].post("/v1/tenants", json={"name": "upgrade"},
                                         headers={"Authorization": f"Bearer {c.admin_key}"})
        assert created.status_code == 201, created.text
        key = created.json()["api_key"]
        auth = {"Authorization": f"Bearer {key}"}
        jobs: dict[str, tuple[str, dict[str, Any]]] = {}  # job id -> (api, job)

        async def submit(phase: int) -> None:
            for api, job in submissions(phase):
                r = await apis[api].post("/v1/jobs", json=job, headers=auth)
                assert r.status_code == 201, (api, r.text)
                jobs[r.json()["id"]] = (api, job)

        async def runs_of(names_prefix: str) -> dict[str, dict[str, Any]]:
            rows = await db.fetch(
                "SELECT j.name, r.id, r.state, r.attempt FROM runs r JOIN jobs j"
                " ON j.id = r.job_id WHERE j.name LIKE $1", names_prefix + "%")
            return {r["name"]: dict(r) for r in rows}

        async def ended(phase: int, kind: str) -> dict[str, dict[str, Any]] | None:
            runs = await runs_of(f"{kind}-{phase}-")
            done = len(runs) == 4 and all(r["state"] == "succeeded" for r in runs.values())
            return runs if done else None

        async with workers(c, old_tree, key, owner_url_for(name), log_dir) as procs:
            await submit(1)
            await until(lambda: ended(1, "fx"), GIVE_UP, "phase 1's jobs to succeed")
            flows_1 = await until(lambda: runs_of("flow-1-"), GIVE_UP, "phase 1's workflows")

            async def flows_1_waiting() -> bool:
                runs = await runs_of("flow-1-")
                return len(runs) == 4 and await waiting_for_signal(
                    db, [r["id"] for r in runs.values()])

            await until(flows_1_waiting, GIVE_UP, "phase 1's workflows to wait for 'go'")

            # the upgrade: each of the four swapped for the other version, one at a time
            for alias, (service, tree) in first.items():
                if alias.startswith("api_"):
                    continue
                assert stop(c, alias) == 0, c.tail(alias)
                spawn(c, alias, service, None if tree is not None else old_tree,
                      port=c.ports["worker_gateway"] if alias == "gateway" else None)

            flows_1 = await runs_of("flow-1-")
            for job_name, run in flows_1.items():  # signalled through the other api
                submitted_by = job_name.split("-")[2]
                other = "new" if submitted_by == "old" else "old"
                r = await apis[other].post(f"/v1/runs/{run['id']}/signals/go", json=other,
                                           headers=auth)
                assert r.status_code == 202, r.text
            await submit(2)
            await until(lambda: ended(2, "fx"), GIVE_UP, "phase 2's jobs to succeed")

            async def flows_2_waiting() -> bool:
                runs = await runs_of("flow-2-")
                return len(runs) == 4 and await waiting_for_signal(
                    db, [r["id"] for r in runs.values()])

            await until(flows_2_waiting, GIVE_UP, "phase 2's workflows to wait for 'go'")
            for job_name, run in (await runs_of("flow-2-")).items():
                other = "new" if job_name.split("-")[2] == "old" else "old"
                r = await apis[other].post(f"/v1/runs/{run['id']}/signals/go", json=other,
                                           headers=auth)
                assert r.status_code == 202, r.text
            for phase in (1, 2):
                await until(lambda p=phase: ended(p, "flow"), GIVE_UP,
                            f"phase {phase}'s workflows to succeed")
            assert all(p.poll() is None for p in procs.values()), "a worker exited"
            for version, api in apis.items():  # the registry either gateway wrote, read by both
                seen = (await api.get("/v1/workers", headers=auth)).json()["items"]
                assert {w["worker_id"] for w in seen} == {"old", "new"}, (version, seen)
                # an instant's spelling tells which release answered (isoformat before, Z now)
                assert {w["seen_at"][-6:] == "+00:00" for w in seen} == {version == "old"}, seen

        # each worker ran the code of its own release
        assert Path(sdk_of(log_dir, "old")).is_relative_to(old_tree)
        assert Path(sdk_of(log_dir, "new")).is_relative_to(ROOT / "libs")

        runs = await db.fetch("SELECT r.id, r.job_id, j.name, r.state, r.attempt FROM runs r"
                              " JOIN jobs j ON j.id = r.job_id")
        assert sorted(str(r["job_id"]) for r in runs) == sorted(jobs)  # one run per job
        effects = await db.fetch("SELECT run_id, what, attempt, worker_id FROM compat_effects")
        for run in runs:
            pool = run["name"].split("-")[3]
            mine = sorted((e["what"], e["worker_id"]) for e in effects
                          if e["run_id"] == run["id"])
            if run["name"].startswith("fx-"):
                assert mine == [("fx", pool)], run["name"]
            else:
                signaller = "new" if run["name"].split("-")[2] == "old" else "old"
                assert mine == [("a", pool), ("b", pool), (f"c:{signaller}", pool)], run["name"]
            assert run["state"] == "succeeded", dict(run)
            types = await event_types(db, run["id"])  # no attempt lost on the way
            assert types.count("RunSucceeded") == 1 and "LeaseExpired" not in types, types

        # each api lists, shows and reads the events of every run, whoever wrote them
        ids = {str(r["id"]) for r in runs}
        for version, api in apis.items():
            listed = (await api.get("/v1/runs", params={"limit": 100}, headers=auth)).json()
            assert {i["id"] for i in listed["items"]} == ids, version
            for run in runs:
                shown = await api.get(f"/v1/runs/{run['id']}", headers=auth)
                assert shown.status_code == 200 and shown.json()["state"] == "succeeded", \
                    (version, shown.text)
                timeline = await api.get(f"/v1/runs/{run['id']}/events", headers=auth)
                assert timeline.status_code == 200, (version, timeline.text)
                body = timeline.json()
                items = body["items"] if isinstance(body, dict) else body
                assert [e["type"] for e in items] == await event_types(db, run["id"]), version
        for alias in ("api_old", "api_new", "scheduler", "dispatcher", "gateway", "reconciler"):
            assert stop(c, alias) == 0, c.tail(alias)
    finally:
        await db.close()
        for api in apis.values():
            await api.aclose()
    assert previous_commit()  # (the pinned release the test ran)
