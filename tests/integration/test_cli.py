"""The `ostinato` CLI as a user runs it: `python -m ostinato ...` as a process against the
public API over real HTTP (the `api_url` fixture, on the real PostgreSQL), with its own empty
HOME so no profile of the machine is read. What it shows is checked against the API (through
`ostinato.client`), and what it changes is checked there too."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from ostinato.client import AsyncClient
from ostinato.clock import SystemClock
from tests.helpers.api import ADMIN
from tests.helpers.cli import ROOT, cli, new_key

pytestmark = pytest.mark.integration


async def test_a_job_created_through_the_client_is_listed_by_the_cli(
        api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    async with AsyncClient(api_url, key) as client:
        job = await client.jobs.create(name="nightly-report",
                                       schedule={"cron": "30 2 * * *",
                                                 "timezone": "Europe/Berlin"})
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}

    code, out, err = await cli(tmp_path, "jobs", "list", env=env)
    assert code == 0, err
    header, row = out.splitlines()[0].split(), next(line for line in out.splitlines()
                                                    if str(job.id) in line)
    assert header[:4] == ["ID", "NAME", "TASK", "STATUS"]
    assert "nightly-report" in row and "cron 30 2 * * * Europe/Berlin" in row

    code, out, err = await cli(tmp_path, "jobs", "list", "-o", "json", env=env)
    assert code == 0, err
    [listed] = json.loads(out)
    assert listed["id"] == str(job.id) and listed["schedule"]["cron"] == "30 2 * * *"

    code, out, err = await cli(tmp_path, "-o", "jsonl", "jobs", "get", str(job.id), env=env)
    assert code == 0, err
    assert [json.loads(line)["name"] for line in out.splitlines()] == ["nightly-report"]


async def test_jobs_created_by_the_cli_and_its_errors(api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    code, out, err = await cli(tmp_path, "jobs", "create", "--name", "send-invoice",
                               "--at", "2030-12-01T09:00:00Z", "--payload", "-", "-o", "json",
                               env=env, stdin='{"invoice": 7}')
    assert code == 0, err
    created = json.loads(out)
    assert created["next_run_at"] == "2030-12-01T09:00:00Z"
    async with AsyncClient(api_url, key) as client:
        assert (await client.jobs.get(created["id"])).payload == {"invoice": 7}

        # a bad request: exit 1, the problem's title on stderr, nothing on stdout or stored
        code, out, err = await cli(tmp_path, "jobs", "create", "--name", "x", "--cron",
                                   "61 * * * *", "-o", "json", env=env)
        assert code == 1 and out == ""
        with pytest.raises(Exception) as refused:
            await client.jobs.create(name="x", schedule={"cron": "61 * * * *"})
        problem = refused.value
        assert f"error: {problem.title} (422)" in err  # type: ignore[attr-defined]
        assert "schedule.cron" in err
        assert [j.name async for j in client.jobs.list()] == ["send-invoice"]

    code, _, err = await cli(tmp_path, "runs", "get", str(uuid.uuid4()), env=env)
    assert code == 1 and "(404)" in err
    code, _, err = await cli(tmp_path, "runs", "list", "--state", "sleeping", env=env)
    assert code == 2 and "unknown state 'sleeping'" in err
    code, _, err = await cli(tmp_path, "jobs", "list", env={**env, "OSTINATO_API_KEY": "bad"})
    assert code == 1 and "(401)" in err


async def test_a_bulk_cancel_counts_asks_and_cancels_exactly_the_counted_runs(
        api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    async with AsyncClient(api_url, key) as client:
        target = await client.jobs.create(name="target", schedule={"every": "1h"})
        other = await client.jobs.create(name="other", schedule={"every": "1h"})
        for job, n in ((target, 3), (other, 2)):
            for _ in range(n):
                await client.jobs.trigger(job.id)
        mine = {r.id for r in [r async for r in client.runs.list(job_id=target.id)]}
        assert len(mine) == 3

        async def states() -> dict[str, str]:
            return {str(r.id): r.state async for r in client.runs.list()}

        before = await states()
        assert set(before.values()) <= {"scheduled", "queued"} and len(before) == 5

        code, out, err = await cli(tmp_path, "runs", "cancel", "--state", "waiting", "--job",
                                   str(target.id), "--dry-run", "-o", "json", env=env)
        assert code == 0, err
        assert {r["id"] for r in json.loads(out)} == {str(i) for i in mine}
        assert "3 runs selected" in err and "dry run: nothing cancelled" in err
        assert await states() == before

        code, _, err = await cli(tmp_path, "runs", "cancel", "--state", "waiting", "--job",
                                 str(target.id), env=env, stdin="n\n")
        assert code == 1 and "Cancel 3 runs?" in err
        assert await states() == before

        code, _, err = await cli(tmp_path, "runs", "cancel", "--state", "waiting", "--job",
                                 str(target.id), "--yes", env=env)
        assert code == 0, err
        assert "cancelled 3 of 3 runs" in err
        after = await states()
        assert {i for i, s in after.items() if s == "cancelled"} == {str(i) for i in mine}
        assert {i: s for i, s in after.items() if i not in {str(m) for m in mine}} == {
            i: s for i, s in before.items() if i not in {str(m) for m in mine}}

        code, _, err = await cli(tmp_path, "runs", "cancel", env=env)
        assert code == 2 and "--state, --job or --task" in err


async def test_a_profile_file_is_read_and_the_environment_overrides_it(
        api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    async with AsyncClient(api_url, key) as client:
        job = await client.jobs.create(name="from-profile")
    config = tmp_path / ".config" / "ostinato" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[profiles.ci]\napi_url = "{api_url}"\napi_key = "{key}"\n'
                      'output = "jsonl"\n')

    code, out, err = await cli(tmp_path, "--profile", "ci", "jobs", "list")
    assert code == 0, err
    assert [json.loads(line)["id"] for line in out.splitlines()] == [str(job.id)]

    code, _, err = await cli(tmp_path, "--profile", "ci", "jobs", "list",
                             env={"OSTINATO_API_KEY": "ost_wrong"})
    assert code == 1 and "(401)" in err

    code, _, err = await cli(tmp_path, "--profile", "nope", "jobs", "list")
    assert code == 2 and "no profile 'nope'" in err


async def test_runs_dead_letters_and_capacity_from_the_cli(
        api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    async with AsyncClient(api_url, key) as client:
        job = await client.jobs.create(name="report")
        run = (await client.jobs.trigger(job.id)).run_id
    code, out, err = await cli(tmp_path, "runs", "events", str(run), "-o", "json", env=env)
    assert code == 0, err
    assert json.loads(out)[0]["type"] == "RunScheduled"
    code, out, err = await cli(tmp_path, "runs", "events", str(run), "--limit", "1", "-o",
                               "jsonl", env=env)  # read a page at a time; the first N
    assert code == 0, err
    assert [json.loads(line)["type"] for line in out.splitlines()] == ["RunScheduled"]
    code, out, err = await cli(tmp_path, "runs", "signal", str(run), "approval", "--payload",
                               '{"ok": true}', "-o", "json", env=env)
    assert code == 0, err
    assert json.loads(out)["created"] is True
    code, out, err = await cli(tmp_path, "dead-letters", "list", "-o", "json", env=env)
    assert (code, json.loads(out)) == (0, []), err
    code, out, err = await cli(tmp_path, "schedules", "preview", "--cron", "30 2 * * *",
                               "--tz", "Europe/Berlin", "--count", "2", "-o", "json", env=env)
    assert code == 0, err
    assert [i["local"][10:19] for i in json.loads(out)] == ["T02:30:00", "T02:30:00"]
    code, out, err = await cli(tmp_path, "pools", "-o", "json", env=env)
    assert code == 0, err
    assert [p["name"] for p in json.loads(out)] == ["default"]
    for resource in ("workers", "tasks"):
        code, out, err = await cli(tmp_path, resource, "list", "-o", "json", env=env)
        assert code == 0, err
        assert isinstance(json.loads(out), list)


async def test_the_admin_commands_keep_their_arguments(tmp_path: Path) -> None:
    code, out, err = await cli(tmp_path, "schemas", "--check")
    assert code == 0, err
    assert "catalogue.json is current" in out
    code, out, _ = await cli(tmp_path, "workflows", "check", "--help")
    assert code == 0 and "--all-versions" in out and "--timeout" in out


async def test_a_bulk_verb_over_more_than_a_page_runs_as_a_tracked_operation(
        api_url: str, pool: Any, tmp_path: Path) -> None:
    """150 matching runs (more than the client's page of 100): the CLI counts them with a dry
    run of POST /v1/operations, asks, starts one operation and follows it to the end (the
    api's duty, run here beside the in-process api), instead of 150 calls of its own."""
    from ostinato.operations import work
    from tests.helpers.integration import runs_of, store

    async with AsyncClient(api_url, ADMIN) as admin:
        created = await admin.tenants.create(f"t-{uuid.uuid4().hex[:8]}")
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": created.api_key}
    await runs_of(pool, created.id, "many", 150)
    await runs_of(pool, created.id, "few", 3)

    code, out, err = await cli(tmp_path, "runs", "cancel", "--task", "many", "--dry-run",
                               "-o", "json", env=env)
    assert code == 0, err
    assert json.loads(out)["count"] == 150 and "150 runs selected (more than a page" in err
    code, _, err = await cli(tmp_path, "runs", "cancel", "--task", "many", env=env, stdin="n\n")
    assert code == 1 and "Cancel 150 runs?" in err

    stop = asyncio.Event()

    async def duty() -> None:  # what the api process runs as its `operations` duty
        while not stop.is_set():
            if not await work.work_once(pool, store(), SystemClock()):
                await asyncio.sleep(0.05)

    worker = asyncio.create_task(duty())
    try:
        code, out, err = await cli(tmp_path, "runs", "cancel", "--task", "many", "--yes",
                                   "-o", "json", env=env)
    finally:
        stop.set()
        await worker
    assert code == 0, err
    assert "cancelled 150 of 150 runs (0 skipped, 0 failed)" in err
    op = json.loads(out)
    assert (op["state"], op["done"], op["filter"]["task"]) == ("completed", 150, "many")
    async with AsyncClient(api_url, created.api_key) as client:
        got = {}
        async for r in client.runs.list():
            got[r.task, r.state] = got.get((r.task, r.state), 0) + 1
    assert got == {("many", "cancelled"): 150, ("few", "scheduled"): 3}
    # a page or less: item by item, as before
    code, _, err = await cli(tmp_path, "runs", "cancel", "--task", "few", "--yes", env=env)
    assert code == 0 and "cancelled 3 of 3 runs" in err, err


async def test_alert_sinks_alerts_and_usage_from_the_cli_and_the_client(
        api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    code, out, err = await cli(tmp_path, "-o", "json", "alert-sinks", "put", "pager",
                               "https://hooks.example/a", "--owner", "billing", "--owner", "ops",
                               "--secret-header", "Authorization", "--secret", "Bearer x",
                               env=env)
    assert code == 0, err
    assert json.loads(out)["owners"] == ["billing", "ops"]
    async with AsyncClient(api_url, key) as client:
        [sink] = await client.alert_sinks.list()
        assert (sink.name, sink.secret_header, sink.default) == ("pager", "Authorization", False)
        await client.alert_sinks.put("catch-all", "https://hooks.example/b", default=True)
        job = await client.jobs.create(name="owned", owner="billing", complete_within="1h")
        health = await client.jobs.health(job.id, "1h")
        assert (health.runs, health.complete_within_seconds) == (0, 3600.0)
        assert (await client.usage.get()).total.runs == 0  # a run needs the scheduler
        assert await client.alerts.list() == []
    code, out, err = await cli(tmp_path, "alert-sinks", env=env)
    assert code == 0, err
    assert out.splitlines()[0].split()[:2] == ["NAME", "URL"] and "catch-all" in out
    code, out, err = await cli(tmp_path, "alert-sinks", "delete", "pager", env=env)
    assert code == 0, err
    code, out, err = await cli(tmp_path, "alert-sinks", "delete", "pager", env=env)
    assert code == 1 and "no alert sink" in err
    code, out, err = await cli(tmp_path, "-o", "json", "usage", "--granularity", "day", env=env)
    assert code == 0, err
    assert json.loads(out)[-1]["runs"] == 0
    code, out, err = await cli(tmp_path, "-o", "json", "alerts", env=env)
    assert code == 0 and json.loads(out) == [], err


async def test_jobs_backfill_lists_the_slots_first_and_asks_before_creating_them(
        api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    async with AsyncClient(api_url, key) as client:
        job = await client.jobs.create(name="nightly", schedule={
            "cron": "30 2 * * *", "timezone": "Europe/Berlin"})

        async def runs() -> list[str]:
            return sorted([r.scheduled_for.isoformat()
                           async for r in client.runs.list(job_id=job.id)])

        span = ("--start", "2026-03-27T12:00:00Z", "--end", "2026-03-30T00:00:00Z")
        code, out, err = await cli(tmp_path, "jobs", "backfill", str(job.id), *span,
                                   "--dry-run", "-o", "jsonl", env=env)
        assert code == 0, err
        assert [(s["local"], s["action"]) for s in map(json.loads, out.splitlines())] == [
            ("2026-03-28T02:30:00+01:00", "create"), ("2026-03-29T03:00:00+02:00", "create")]
        assert "2 slots to backfill of 2 in range (Europe/Berlin); nothing changed" in err
        assert await runs() == []

        code, out, err = await cli(tmp_path, "jobs", "backfill", str(job.id), *span, env=env,
                                   stdin="n\n")
        assert code == 1 and "Backfill 2 slots?" in err and "aborted" in err
        assert "2026-03-29T03:00:00+02:00" in out  # the table shown before the question
        assert await runs() == []

        code, out, err = await cli(tmp_path, "jobs", "backfill", str(job.id), *span, "--yes",
                                   "-o", "json", env=env)
        assert code == 0, err
        assert [s["action"] for s in json.loads(out)] == ["create", "create"]
        assert "2 runs created, 0 slots had runs, 0 skipped" in err
        assert await runs() == ["2026-03-28T01:30:00+00:00", "2026-03-29T01:00:00+00:00"]


async def test_tenants_create_and_list_and_the_admin_acting_for_a_tenant(
        api_url: str, tmp_path: Path) -> None:
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": ADMIN}
    name = f"t-{uuid.uuid4().hex[:8]}"
    code, out, err = await cli(tmp_path, "tenants", "create", name, "--weight", "3", "-o",
                               "json", env=env)
    assert code == 0, err
    created = json.loads(out)
    assert created["name"] == name and created["api_key"].startswith("ost_")
    code, out, err = await cli(tmp_path, "tenants", "list", "-o", "json", env=env)
    assert code == 0, err
    assert [(t["id"], t["weight"]) for t in json.loads(out) if t["name"] == name] == [
        (created["id"], 3)]
    code, out, err = await cli(tmp_path, "tenants", "list", env=env)
    assert code == 0 and out.splitlines()[0].split() == ["ID", "NAME", "WEIGHT", "CREATED"]

    code, _, err = await cli(tmp_path, "jobs", "create", "--name", "x", env=env)
    assert code == 1 and "(403)" in err and "X-Ostinato-Tenant" in err  # no tenant named
    code, out, err = await cli(tmp_path, "--tenant", created["id"], "jobs", "create", "--name",
                               "for-them", "-o", "json", env=env)
    assert code == 0, err
    job = json.loads(out)["id"]
    async with AsyncClient(api_url, created["api_key"]) as own:
        assert [j.id async for j in own.jobs.list()] == [uuid.UUID(job)]
    # the profile's tenant key does the same; a tenant's key lists no tenants
    config = tmp_path / ".config" / "ostinato" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[profiles.ops]\napi_url = "{api_url}"\napi_key = "{ADMIN}"\n'
                      f'tenant = "{created["id"]}"\n')
    code, out, err = await cli(tmp_path, "--profile", "ops", "jobs", "list", "-o", "json")
    assert code == 0, err
    assert [j["id"] for j in json.loads(out)] == [job]
    code, _, err = await cli(tmp_path, "tenants", "list", env={
        "OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": created["api_key"]})
    assert code == 1 and "(403)" in err


async def test_jobs_delete_pause_resume_and_trigger_by_id(api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    async with AsyncClient(api_url, key) as client:
        job = await client.jobs.create(name="hourly", schedule={"every": "1h"})
        other = await client.jobs.create(name="other", schedule={"every": "1h"})

        async def status() -> dict[str, str]:
            return {str(j.id): j.status async for j in client.jobs.list()}

        code, _, err = await cli(tmp_path, "jobs", "pause", str(job.id), "--reason", "freeze",
                                 env=env)
        assert code == 0, err
        assert await status() == {str(job.id): "paused", str(other.id): "active"}
        paused = [e async for e in client.jobs.events(job.id) if e.type == "JobPaused"]
        assert [e.data["reason"] for e in paused] == ["freeze"]

        code, _, err = await cli(tmp_path, "jobs", "resume", str(job.id), "--misfire", "skip",
                                 env=env)
        assert code == 0, err
        assert await status() == {str(job.id): "active", str(other.id): "active"}
        resumed = [e async for e in client.jobs.events(job.id) if e.type == "JobResumed"]
        assert [e.data["misfire"] for e in resumed] == ["skip"]
        code, _, err = await cli(tmp_path, "jobs", "resume", str(job.id), env=env)
        assert code == 1 and "(409)" in err  # not paused

        code, out, err = await cli(tmp_path, "jobs", "trigger", str(job.id), "-o", "json",
                                   env=env)
        assert code == 0, err
        triggered = json.loads(out)
        assert triggered["trigger"] == "manual"
        assert [str(r.id) async for r in client.runs.list(job_id=job.id)] == [
            triggered["run_id"]]

        code, _, err = await cli(tmp_path, "jobs", "delete", str(job.id), env=env)
        assert code == 0, err
        assert await status() == {str(job.id): "deleted", str(other.id): "active"}
        code, _, err = await cli(tmp_path, "jobs", "trigger", str(job.id), env=env)
        assert code == 1 and "(409)" in err and "deleted" in err


async def test_runs_and_dead_letters_verbs_on_a_failed_workflow_run(
        api_url: str, pool: Any, gateway: Any, tmp_path: Path) -> None:
    """A workflow run with two recorded steps fails permanently with a log line: `runs get`,
    `logs` and `steps` show it; `dead-letters get`, `triage` and `replay` work on its dead
    letter, and `runs retry` re-runs it."""
    import msgspec

    from ostinato.wire import worker as p
    from tests.helpers.api import auth
    from tests.helpers.integration import new_tenant
    from tests.helpers.workflows import claimed_run, send_steps

    tenant_id, key = await new_tenant(pool)
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    run = await claimed_run(pool, gateway, tenant_id, key)
    token = run.fencing_token
    await send_steps(gateway, key, [
        {"run_id": run.run_id, "fencing_token": token, "seq": 0, "name": "fetch", "output": 4},
        {"run_id": run.run_id, "fencing_token": token, "seq": 1, "name": "sum", "output": 6}])
    r = await gateway.post(p.BATCH_PATH, headers=auth(key), json={"worker_id": "w1", "failures": [
        {"run_id": run.run_id, "fencing_token": token,
         "error": {"type": "bad_input", "message": "row 3 is broken", "retryable": False,
                   "classified": True},
         "logs": [{"t": 0.25, "level": "warning", "message": "row 3 skipped"}]}]})
    assert r.status_code == 200, r.text
    assert [x.status for x in msgspec.json.decode(r.content, type=p.BatchResponse).results] \
        == [200]

    code, out, err = await cli(tmp_path, "runs", "get", run.run_id, "-o", "json", env=env)
    assert code == 0, err
    got = json.loads(out)
    assert (got["id"], got["state"], got["steps_done"]) == (run.run_id, "dead_lettered", 2)
    code, out, err = await cli(tmp_path, "runs", "logs", run.run_id, "-o", "json", env=env)
    assert code == 0, err
    assert [(x["level"], x["message"]) for x in json.loads(out)] == [("warning", "row 3 skipped")]
    code, out, err = await cli(tmp_path, "runs", "steps", run.run_id, "-o", "jsonl", env=env)
    assert code == 0, err
    assert [(s["seq"], s["name"]) for s in map(json.loads, out.splitlines())] == [
        (0, "fetch"), (1, "sum")]

    code, out, err = await cli(tmp_path, "dead-letters", "get", run.run_id, "-o", "json",
                               env=env)
    assert code == 0, err
    letter = json.loads(out)
    assert (letter["error_type"], letter["triage_state"]) == ("bad_input", "new")
    code, out, err = await cli(tmp_path, "dead-letters", "triage", run.run_id, "--to",
                               "acknowledged", "--comment", "looking", env=env)
    assert code == 0, err
    async with AsyncClient(api_url, key) as client:
        assert (await client.dead_letters.get(run.run_id)).triage_state == "acknowledged"
    code, out, err = await cli(tmp_path, "dead-letters", "replay", run.run_id, "--payload",
                               '{"fixed": true}', "--request-key", "fix-1", "-o", "json",
                               env=env)
    assert code == 0, err
    [replayed] = json.loads(out)
    code, out, err = await cli(tmp_path, "runs", "retry", run.run_id, "-o", "json", env=env)
    assert code == 0, err
    [retried] = json.loads(out)
    async with AsyncClient(api_url, key) as client:
        new = await client.runs.get(replayed["run_id"])
        again = await client.runs.get(retried["run_id"])
        assert (new.replay_of, new.payload) == (uuid.UUID(run.run_id), {"fixed": True})
        assert again.replay_of == uuid.UUID(run.run_id) and again.id != new.id
        assert (await client.dead_letters.get(run.run_id)).replays == 2
    code, _, err = await cli(tmp_path, "runs", "get", str(uuid.uuid4()), env=env)
    assert code == 1 and "(404)" in err


async def test_shell_completion_is_printed_for_bash(tmp_path: Path) -> None:
    # typer finds the shell among the command's parent processes (shellingham), as when a user
    # types it: so it runs under bash here, not under whatever started the test run (a runner
    # with no shell above it made this "Shell  not supported"). Two commands: bash does not
    # exec the last one in its place.
    proc = await asyncio.create_subprocess_exec(
        "/bin/bash", "-c", f"{sys.executable} -m ostinato --show-completion; exit $?",
        cwd=ROOT, env={**os.environ, "HOME": str(tmp_path), "NO_COLOR": "1"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)  # a hang guard
    assert proc.returncode == 0, err.decode()
    assert b"complete " in out and b"_OSTINATO_COMPLETE" in out


async def test_runs_list_filters_by_priority_class_and_error_type(
        api_url: str, pool: Any, tmp_path: Path) -> None:
    """`runs list --priority/--error-type` (and the client's `runs.list`) pass the filters to
    GET /v1/runs: a bulk-class run, and a run whose attempt failed with `bad_input`."""
    from ostinato.wire import worker as p
    from services.worker_gateway.attempts import Attempts
    from services.worker_gateway.reports import Outcome
    from tests.helpers.integration import dispatch, store

    async with AsyncClient(api_url, ADMIN) as admin:
        created = await admin.tenants.create(f"t-{uuid.uuid4().hex[:8]}")
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": created.api_key}
    async with AsyncClient(api_url, created.api_key) as client:
        bulk = await client.jobs.create(name="bulky", task="ui.bulky", priority="bulk",
                                        schedule={"every": "1h"})
        plain = await client.jobs.create(name="plain", task="ui.plain",
                                         schedule={"every": "1h"})
        bulk_run = str((await client.jobs.trigger(bulk.id)).run_id)
        plain_run = str((await client.jobs.trigger(plain.id)).run_id)
        await dispatch(pool)
        attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
        claimed = await attempts.claim(created.id, p.ClaimRequest(
            worker_id="w", max_runs=10, tasks=["ui.plain"]))
        [run] = [c for c in claimed if c.run_id == plain_run]
        await attempts.record(created.id, "w", [Outcome(
            uuid.UUID(run.run_id), run.run_id, run.fencing_token, "fail", error=p.ErrorInfo(
                type="bad_input", message="no", retryable=False, classified=True))])
        assert [str(r.id) async for r in client.runs.list(error_type="bad_input")] == [
            plain_run]
        assert [str(r.id) async for r in client.runs.list(priority="bulk")] == [bulk_run]

    code, out, err = await cli(tmp_path, "runs", "list", "--priority", "bulk", "-o", "json",
                               env=env)
    assert code == 0, err
    assert [r["id"] for r in json.loads(out)] == [bulk_run]
    code, out, err = await cli(tmp_path, "runs", "list", "--error-type", "bad_input", "-o",
                               "json", env=env)
    assert code == 0, err
    assert [(r["id"], r["state"]) for r in json.loads(out)] == [(plain_run, "dead_lettered")]
    code, out, err = await cli(tmp_path, "runs", "list", "--priority", "bulk", "--error-type",
                               "bad_input", "-o", "json", env=env)
    assert code == 0 and json.loads(out) == []
    code, _, err = await cli(tmp_path, "runs", "list", "--priority", "urgent", env=env)
    assert code == 1 and "(422)" in err and "priority" in err
