"""The pre-deploy check end to end: workflow runs driven by an SDK worker through the
worker-gateway and the real PostgreSQL to a suspended state (one waiting for a signal, one
asleep on a long timer past it), then `python -m ostinato workflows check` run as a process
against the public API (served over TCP) with new code written to files: a compatible change
passes, an incompatible one exits 1 and names the run, the position and the differing step."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.sdk import WorkflowContext, workflow
from tests.helpers.api import auth
from tests.helpers.integration import new_tenant, queued_workflow_run, run_row
from tests.helpers.workflows import work_until

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def approval_v1() -> Any:
    @workflow("orders.approval", version="2026.1")
    async def approval(ctx: WorkflowContext, order: dict[str, Any]) -> str:
        await ctx.step("reserve", lambda: {"reservation": f"r-{order['id']}"})
        await ctx.step("charge", lambda: {"charge": "c-1"})
        await ctx.wait_for_signal("approval")
        await ctx.sleep(timedelta(days=30))
        await ctx.step("ship", lambda: "shipped")
        return "done"

    return approval


HEADER = """
from datetime import timedelta

from ostinato.sdk import WorkflowContext, workflow


def never(*args):
    raise AssertionError("the check ran a step")

"""

COMPATIBLE = HEADER + """
@workflow("orders.approval", version="2026.1")  # the version kept: it resumes the runs
async def approval(ctx: WorkflowContext, order: dict) -> str:
    label = f"order {order['id']}"  # new code between steps; the payload comes from the API
    await ctx.step("reserve", never, label)
    await ctx.step("charge", never)
    decision = await ctx.wait_for_signal("approval")
    await ctx.sleep(timedelta(days=30))
    if await ctx.patched("ship-v2"):
        await ctx.step("ship-v2", never, decision)
    else:
        await ctx.step("ship", never)
    await ctx.step("notify", never)  # appended
    return "done"
"""

INCOMPATIBLE_BODY = """
async def approval(ctx: WorkflowContext, order: dict) -> str:
    await ctx.step("reserve", never)
    await ctx.step("charge", never)
    await ctx.wait_for_signal("approval")
    await ctx.wait_for_signal("shipping")  # instead of the 30-day timer
    await ctx.step("ship", never)
    return "done"
"""
INCOMPATIBLE = HEADER + '@workflow("orders.approval", version="2026.1")' + INCOMPATIBLE_BODY
# No version declared: derived from the code, so a new version that resumes no pinned run
NEW_VERSION = HEADER + '@workflow("orders.approval")' + INCOMPATIBLE_BODY


async def check(api_url: str, key: str, *args: str,
                pythonpath: Path | None = None) -> tuple[int, str, str]:
    """`python -m ostinato workflows check ...` as a process; (exit code, stdout, stderr)."""
    env = {**os.environ, "OSTINATO_API_KEY": key, "OSTINATO_API_URL": api_url}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath),
                                                          env.get("PYTHONPATH")]))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ostinato", "workflows", "check", *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 600)  # a hang guard only
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_pre_deploy_check_passes_a_compatible_change_and_names_an_incompatible_one(
        pool: asyncpg.Pool, gateway: httpx.AsyncClient, api_url: str, tmp_path: Path) -> None:
    tenant_id, key = await new_tenant(pool)
    old = approval_v1()
    # run A waits for its approval signal
    waiting = await queued_workflow_run(pool, tenant_id, "orders.approval", {"id": 1})
    await work_until(pool, gateway, key, old, tenant_id, waiting, "suspended")
    # run B got its approval before it asked (taken at once), and sleeps for 30 days
    asleep = await queued_workflow_run(pool, tenant_id, "orders.approval", {"id": 2})
    async with httpx.AsyncClient(base_url=api_url, headers=auth(key)) as api:
        sent = await api.post(f"/v1/runs/{asleep}/signals/approval", json={"ok": True})
        assert sent.status_code == 202, sent.text
        await work_until(pool, gateway, key, old, tenant_id, asleep, "suspended")
        shown = (await api.get(f"/v1/runs/{asleep}")).json()
    assert (shown["steps_done"], shown["current_step"], shown["wait_reason"]) == (
        3, "sleep", "timer")
    assert shown["payload"] == {"id": 2}
    assert (await run_row(pool, tenant_id, waiting)).wait_name == "signal:approval"

    (tmp_path / "approval_compatible.py").write_text(COMPATIBLE)
    code, out, err = await check(api_url, key, str(tmp_path / "approval_compatible.py"),
                                 "--strict")
    assert code == 0, (out, err)
    assert "checked 2 in-flight run(s) of orders.approval: 2 compatible" in out
    assert "none would meet a non-determinism error" in out

    (tmp_path / "approval_incompatible.py").write_text(INCOMPATIBLE)
    code, out, err = await check(api_url, key, "approval_incompatible", pythonpath=tmp_path)
    assert code == 1, (out, err)
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["RUN", "TASK", "VERSION", "RESULT", "POSITION", "RECORDED", "MET"]
    # run B's timer: its wake-up records `sleep` at position 3, where the code now waits for
    # a signal; run A's wait is the code's too, so it is not listed
    assert rows[1] == [str(asleep), "orders.approval", "2026.1", "incompatible", "3",
                       "sleep#1", "(waiting)", "signal:shipping#1"]
    assert str(waiting) not in out
    assert (f"{asleep}: non-deterministic workflow: at step position 3 the history recorded "
            "step sleep#1 but the code now runs step signal:shipping#1") in out
    assert "1 would meet a non-determinism error" in out

    code, out, _ = await check(api_url, key, str(tmp_path / "approval_incompatible.py"),
                               "--json", "--all", "--task", "orders.approval")
    assert code == 1
    by_run = {uuid.UUID(r["run_id"]): r for r in json.loads(out)["runs"]}
    assert by_run.keys() == {waiting, asleep}
    assert (by_run[waiting]["result"], by_run[waiting]["recorded"]) == (
        "compatible", "signal:approval")
    assert (by_run[asleep]["result"], by_run[asleep]["seq"], by_run[asleep]["recorded"],
            by_run[asleep]["met"], by_run[asleep]["waiting"]) == (
        "incompatible", 3, "sleep#1", "signal:shipping#1", True)

    # the same change under a derived version: the runs stay pinned to 2026.1, whose workers
    # resume them; listed, not failing, unless asked
    (tmp_path / "approval_new_version.py").write_text(NEW_VERSION)
    code, out, _ = await check(api_url, key, str(tmp_path / "approval_new_version.py"))
    assert code == 0, out
    assert "2026.1 *" in out and ("2 runs pinned to version 2026.1 are served by workers of "
                                  "that version and are not affected") in out
    assert "none would meet a non-determinism error" in out  # the exit code's meaning
    code, _, _ = await check(api_url, key, str(tmp_path / "approval_new_version.py"),
                             "--all-versions")
    assert code == 1

    code, _, err = await check(api_url, "ost_not_a_key", str(tmp_path / "approval_compatible.py"))
    assert code == 2 and "refused the key" in err and "Traceback" not in err
