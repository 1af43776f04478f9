"""Temporal as a durable-workflow peer of bench/workflows.py, beside DBOS: the same workflow
(10 no-op steps, each returning an int, as `wf10` there), N of them started at once, on
Temporal's development server (`temporal server start-dev`, built and started by
infra/temporal.sh: frontend, history, matching and worker services in one Go process, its state
in SQLite with a WAL journal), once with each step an activity and once a local activity.

An activity is a task the server queues, hands to a worker and records (scheduled, started,
completed events, each workflow task in between a round trip); a local activity runs inside the
workflow task's worker and is recorded as one marker event when the workflow task completes, so
it costs fewer server round trips. The worker and the client run in one process (this module's,
on uvloop as Ostinato's and DBOS's), the Python SDK's defaults otherwise (its Rust core, up to
100 concurrent workflow tasks and activities, 1,000 workflows cached) but for the workflow
sandbox, which is off (`sandboxed=False`: a module re-imported for every workflow run, a safety
net that DBOS and Ostinato don't pay for either). All N are started at once, at most
`--max-inflight` (default 16) running at a time: of 4, 8, 16, 64 and 256 in flight (150
workflows each, 64 in a run of 300; one session, 2026-12-07) 16 did best in both modes
(activities 3.7, 6.6, 7.6, 3.3, 4.6 workflows/s; local activities 29.3, 27.2, 38.8, 19.1,
22.2), so Temporal runs with it.
The clock runs from just before the first start to the last workflow's close time (the
server's clock); CPU is this process's (worker, client) plus the server process's
(/proc/<pid>/stat) over the same window.

    python -m bench.peers.temporal_workflow <host:port> <server pid> <workflows>
        [--steps 10] [--local] [--max-inflight 16]

prints one JSON object on its last line of stdout.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import time
import uuid
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from bench.common import ROOT, cpu_seconds, log
from bench.peers.harness import run_measured

MAX_INFLIGHT = 16  # its best here (module doc); DBOS runs with its own best, 64
TEMPORAL_SH = ROOT / "infra" / "temporal.sh"
STATE = ROOT / ".cache" / "temporal"


def sdk_version() -> str | None:
    """The installed Temporal Python SDK version (None when it is not installed)."""
    try:
        return version("temporalio")
    except PackageNotFoundError:
        return None


def server_binary() -> Path | None:
    """The dev server's binary as infra/temporal.sh builds it (None when it was not built)."""
    match = re.search(r"^TEMPORAL_VERSION=(\S+)", TEMPORAL_SH.read_text(), re.M)
    cache = Path(os.environ.get("OSTINATO_CACHE", Path.home() / ".cache" / "ostinato"))
    binary = cache / "bin" / f"temporal-{match.group(1) if match else '?'}"
    return binary if binary.exists() else None


async def _measure(target: str, server_pid: int, n: int, steps: int, local: bool,
                   max_inflight: int) -> dict[str, Any]:
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client, WorkflowExecutionStatus
    from temporalio.worker import Worker

    from bench.peers.temporal_wf10 import Wf10, noop

    client = await Client.connect(target)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    step_event = (EventType.EVENT_TYPE_MARKER_RECORDED if local
                  else EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)

    async def start(wid: str) -> Any:
        return await client.start_workflow(Wf10.run, args=[steps, local], id=wid,
                                           task_queue=queue)

    async with Worker(client, task_queue=queue, workflows=[Wf10], activities=[noop]):
        # Warm-up: the worker's pollers, the server's task queue and caches.
        warm = [await start(f"{queue}-warm-{i}") for i in range(20)]
        await asyncio.gather(*(h.result() for h in warm))
        gate = asyncio.Semaphore(max_inflight)
        ids = [f"{queue}-{i}" for i in range(n)]

        async def one(wid: str) -> int:
            async with gate:
                return int(await (await start(wid)).result())

        usage = resource.getrusage(resource.RUSAGE_SELF)
        server_before = cpu_seconds(server_pid)
        start_time = time.time()
        results = await asyncio.gather(*(one(w) for w in ids))
        returned = time.time()
        server_after = cpu_seconds(server_pid)
        used = resource.getrusage(resource.RUSAGE_SELF)
    worker_cpu = (used.ru_utime - usage.ru_utime) + (used.ru_stime - usage.ru_stime)
    server_cpu = server_after - server_before
    # After the window: what the server recorded (status, close time, a step event per step).
    closed, completed, recorded = [], 0, 0
    for wid in ids:
        handle = client.get_workflow_handle(wid)
        info = await handle.describe()
        completed += info.status == WorkflowExecutionStatus.COMPLETED
        if info.close_time is not None:
            closed.append(info.close_time.timestamp())
        history = await handle.fetch_history()
        recorded += sum(1 for e in history.events if e.event_type == step_event)
    seconds = max(closed) - start_time
    cpu = worker_cpu + server_cpu
    return {"workflows": n, "steps": steps, "local_activities": local,
            "succeeded": completed, "returned_ok": sum(1 for r in results if r == steps),
            "recorded_steps": recorded, "max_inflight": max_inflight,
            "seconds": round(seconds, 2), "seconds_to_last_result": round(returned - start_time, 2),
            "worker_cpu_s": round(worker_cpu, 2), "server_cpu_s": round(server_cpu, 2),
            "cpu_ms_per_workflow": round(1000 * cpu / n, 2),
            "cpu_ms_per_step": round(1000 * cpu / (n * steps), 3),
            "workflows_per_s": round(n / seconds, 1),
            "steps_per_s": round(n * steps / seconds, 1), "temporalio": sdk_version()}


def server_up() -> int:
    """Start the dev server unless it runs (infra/temporal.sh up, idempotent); its pid."""
    done = subprocess.run(["bash", str(TEMPORAL_SH), "up"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"infra/temporal.sh up failed: {(done.stderr or done.stdout)[-800:]}")
    return int((STATE / "temporal.pid").read_text().strip())


async def run(n: int, *, steps: int = 10, local: bool = False,
              max_inflight: int = MAX_INFLIGHT, scenario: str = "workflows",
              within: float = 900) -> dict[str, Any]:
    """With the dev server up (started if need be), run the measurement in its own process.
    Returns its figures and the server's binary."""
    pid = await asyncio.to_thread(server_up)
    target = f"127.0.0.1:{os.environ.get('OSTINATO_TEMPORAL_PORT', '17233')}"
    mode = "local" if local else "activities"
    logs = ROOT / ".cache" / "bench" / f"temporal-{mode}-{uuid.uuid4().hex[:8]}.log"
    cmd = [sys.executable, "-m", "bench.peers.temporal_workflow", target, str(pid), str(n),
           "--steps", str(steps), "--max-inflight", str(max_inflight)] + (
               ["--local"] if local else [])
    log(scenario, f"temporal ({mode}): {n} workflows of {steps} steps (log: {logs})")
    result = await run_measured("temporal", cmd, logs, within)
    binary = server_binary()
    result["server"] = binary.name if binary else None
    return result


def main() -> None:
    """The subprocess: measure, print the figures as JSON."""
    from ostinato import eventloop

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("target", help="the frontend's host:port")
    parser.add_argument("server_pid", type=int, help="the dev server's pid (its CPU is counted)")
    parser.add_argument("workflows", type=int)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--local", action="store_true", help="steps as local activities")
    parser.add_argument("--max-inflight", type=int, default=MAX_INFLIGHT,
                        help="workflows running at once (0: all)")
    args = parser.parse_args()
    result = eventloop.run(_measure(args.target, args.server_pid, args.workflows, args.steps,
                                    args.local, args.max_inflight or args.workflows))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
