"""Editing a job through the typed clients (sync and async) and the CLI (`ostinato jobs update`,
with `-o json`), over real HTTP against the API on the real PostgreSQL: the version read is
sent as If-Match, a stale one is the 412 problem (client: ApiError; CLI: exit 1), and a dry run
shows the upcoming occurrences before and after and changes nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ostinato.client import AsyncClient, Client
from ostinato.client.errors import ApiError
from tests.helpers.cli import cli, new_key

pytestmark = pytest.mark.integration


async def test_the_async_and_sync_clients_edit_with_if_match(api_url: str) -> None:
    key = await new_key(api_url)
    async with AsyncClient(api_url, key) as client:
        job = await client.jobs.create(name="digest", schedule={"cron": "0 6 * * *"},
                                       payload={"to": "ops"})
        assert job.version == 1
        dry = await client.jobs.update(job.id, {"schedule": {"cron": "0 7 * * *"}},
                                       dry_run=True)
        assert dry.dry_run and dry.version == 1 and dry.changed == ["schedule"]
        assert dry.upcoming_after.items[0].slot.hour == 7
        assert (await client.jobs.get(job.id)).schedule["cron"] == "0 6 * * *"
        done = await client.jobs.update(job.id, if_match=job.version, payload={"to": "dev"},
                                        reason="new list")
        assert (done.version, done.changed, done.job.payload) == (2, ["payload"],
                                                                  {"to": "dev"})
        with pytest.raises(ApiError) as stale:
            await client.jobs.update(job.id, if_match=1, priority="bulk")
        assert stale.value.status == 412

    def sync_edit() -> tuple[int, str]:
        with Client(api_url, key) as client:
            read = client.jobs.get(job.id)
            assert read.version is not None
            edited = client.jobs.update(job.id, if_match=read.version, owner="billing")
            return edited.version, client.jobs.get(job.id).owner or ""

    assert await asyncio.to_thread(sync_edit) == (3, "billing")


async def test_jobs_update_in_the_cli(api_url: str, tmp_path: Path) -> None:
    key = await new_key(api_url)
    env = {"OSTINATO_API_URL": api_url, "OSTINATO_API_KEY": key}
    async with AsyncClient(api_url, key) as client:
        job = await client.jobs.create(name="sync", schedule={"cron": "0 * * * *",
                                                              "timezone": "Europe/Berlin"})
    code, out, err = await cli(tmp_path, "jobs", "update", str(job.id), "--cron", "30 * * * *",
                               "--dry-run", env=env)
    assert code == 0, err
    assert "AFTER (LOCAL)" in out and "would change schedule" in err
    code, out, err = await cli(tmp_path, "jobs", "update", str(job.id), "--cron", "30 * * * *",
                               "--reason", "half past", "-o", "json", env=env)
    assert code == 0, err
    done = json.loads(out)
    assert done["version"] == 2 and done["changed"] == ["schedule"]
    assert done["job"]["schedule"]["cron"] == "30 * * * *"
    assert done["job"]["schedule"]["timezone"] == "Europe/Berlin"  # kept from the job as read
    assert done["upcoming_after"]["items"][0]["local"][14:16] == "30"
    code, out, err = await cli(tmp_path, "jobs", "update", str(job.id), "--priority", "bulk",
                               "--if-match", "1", env=env)
    assert code == 1 and "412" in err, (out, err)
    code, out, err = await cli(tmp_path, "jobs", "update", str(job.id), "--timeout", "-5s",
                               env=env)
    assert code == 1 and "timeout" in err, (out, err)
    async with AsyncClient(api_url, key) as client:
        now = await client.jobs.get(job.id)
        assert (now.version, now.priority, now.timeout_seconds) == (2, "default", None)
