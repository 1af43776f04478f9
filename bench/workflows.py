"""Durable workflows end to end through all five services (docs/WORKFLOWS.md): prints steps/s
and workflows/s of 10-step no-op workflows, the resume latency of sleeping workflows (a timer's
due time to its run's next start), the wake poll's cost with many runs asleep against none, and
the SDK worker's memory while one long workflow runs.

    .venv/bin/python -m bench.workflows [--quick] [--workflows 2000] [--sleepers 500]
        [--asleep 100000] [--long-steps 100000] [--lone-steps 2000]
        [--only steps,resume,idle,long,lone,dbos,temporal]

Needs PostgreSQL and Kafka (`infra/up.sh`). Scenarios, each on its own services and database:

- steps: `--workflows` (quick 300) workflows of 10 no-op steps, submitted through
  POST /v1/jobs/batch, run by an SDK worker in this process (concurrency 256): workflows/s and
  steps/s from the first submission to the last run finished (the database's clock), and CPU
  a workflow: the five services, PostgreSQL, Kafka and this process (client and worker), /proc
  stat over the same window, as bench/throughput.py counts a run.
- resume: `--sleepers` (quick 100) workflows that sleep 2 s, then take one step: for each, the
  database time from the timer's due time (`TimerFired.due_at`) to the start of the run's next
  attempt (`RunStarted`), p50/p99/max.
- idle poll (`idle`): the scheduler's wake query (`claim_wakeups` with its parameters, on a
  connection planning as the scheduler's do, `plan_cache_mode = force_custom_plan`) with no run
  asleep, then with `--asleep` (quick 20,000) suspended runs due next month written straight
  into `runs`. The same method as bench/idle_cost.py, for both measurements alike: VACUUM
  ANALYZE, a new connection and a fresh prepared statement, 100 polls of warm-up, then `--polls`
  (500) polls each in its own transaction (rolled back), only the query timed; p50/p99 µs, the
  p50 ratio (the partial index `runs_wake` should make it ≈ 1), and the plan of each: the scan
  node's type and index, and the shared buffers hit (EXPLAIN (ANALYZE, BUFFERS)).
- long: one workflow of `--long-steps` (quick 20,000) steps, run twice (the second execution
  after the first fails at the last step, so it replays the whole history from pages): steps/s,
  and this process's RSS sampled every 0.5 s (first, peak, last): it must stay flat, as the
  history is read one page at a time.
- lone: the latency of a lone workflow's step: one workflow of `--lone-steps` (quick 500) no-op
  steps, one after another, nothing else running (the worker holds only it). Each step timed in
  the SDK worker's process around `await ctx.step(...)` (`time.perf_counter`: the step's own
  work, its report's round trip to the gateway, the recording transaction; what the workflow
  waits), the first 20 left out as warm-up; p50/p99/max ms. Cross-checked from the log: the
  gap between consecutive `StepCompleted.recorded_at` of the run (the whole cycle, the SDK's
  work between two reports included). The same on DBOS Transact in its own process (one
  workflow of as many steps on the same PostgreSQL server, each `await step(i)` timed the same
  way), and the ratio Ostinato/DBOS of the p50 (< 1 favours Ostinato); the issue's target is
  p50 <= 1.5 ms. `--profile`: py-spy the gateway and the SDK worker during the steps
  (bench/results/workflows-lone-profile-*.txt).
- dbos: the steps scenario's workload (`--workflows` workflows of the same 10 no-op steps) on
  DBOS Transact (bench/peers/dbos_workflow.py), on the same PostgreSQL server in its own
  database, in its own process: all started at once, at most 64 running (DBOS's best of 16, 64
  and 256 here); workflows/s and steps/s from the first start to the last finished (the database's
  clock), and the ratio Ostinato/DBOS of workflows/s when the steps scenario ran too.
- temporal: the same workload on Temporal's development server (bench/peers/temporal_workflow.py;
  `make bench-infra` builds it with infra/temporal.sh, `temporalio` is in the bench lock), once
  with each step an activity and once a local activity, a worker and client in their own
  process, at most 16 workflows in flight (its best): workflows/s, steps/s, CPU a workflow (that
  process and the server's), and the ratios to Ostinato's figures when the steps scenario ran.

`--only` runs the scenarios named (default: all). Writes bench/results/workflows.json (with
`--only`, only the scenarios that ran).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime
from typing import Any

import asyncpg

from bench.common import (
    Bench,
    Profiler,
    base_parser,
    bench_cluster,
    cpu_by_process_group,
    cpu_per_run_ms,
    cpu_spent,
    distribution,
    last_finished,
    log,
    machine,
    submit_jobs,
    table,
    wait_succeeded,
    write_result,
)
from ostinato import eventloop

SCENARIO = "workflows"
STEPS = 10
SCENARIOS = ("steps", "resume", "idle", "long", "lone", "dbos", "temporal")
LONE_WARMUP = 20  # the first steps of the lone workflow left out: connections, caches


def _lone_figures(ms: list[float]) -> dict[str, Any]:
    """The step latencies of a lone workflow, its warm-up left out: p50/p99/max and the rest."""
    return distribution(ms[LONE_WARMUP:], digits=3)


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


@asynccontextmanager
async def workflow_worker(bench: Bench, long_steps: int = 0, concurrency: int = 256,
                          lone: list[float] | None = None) -> AsyncIterator[Any]:
    """An SDK worker in this process serving the benchmark's workflows."""
    from ostinato.sdk import RetryableError, Worker, WorkflowContext, workflow

    async def noop(i: int) -> int:
        return i

    @workflow("wf10")
    async def wf10(ctx: WorkflowContext, payload: object) -> int:
        for i in range(STEPS):
            await ctx.step("noop", noop, i)
        return STEPS

    @workflow("sleeper")
    async def sleeper(ctx: WorkflowContext, payload: object) -> None:
        await ctx.sleep(2.0)
        await ctx.step("after", noop, 0)

    failed_once: list[bool] = []

    async def last(i: int) -> int:
        if not failed_once:
            failed_once.append(True)
            raise RetryableError("fail once at the end, to replay the whole history")
        return i

    @workflow("long")
    async def long(ctx: WorkflowContext, payload: object) -> int:
        for i in range(long_steps - 1):
            await ctx.step("noop", noop, i)
        return await ctx.step("last", last, long_steps)

    timed = lone if lone is not None else []

    @workflow("lone")
    async def lone_wf(ctx: WorkflowContext, payload: object) -> int:
        steps = int(payload) if isinstance(payload, int) else 0
        clock = time.perf_counter
        for i in range(steps):
            t = clock()
            await ctx.step("noop", noop, i)
            timed.append((clock() - t) * 1000)
        return steps

    worker = Worker(bench.cluster.gateway_url, bench.key, [wf10, sleeper, long, lone_wf],
                    concurrency=concurrency, claim_wait_seconds=1, capture_logs=False)
    running = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        await worker.stop()
        with suppress(Exception):
            await running


def _job(task: str, i: int) -> dict[str, Any]:
    return {"name": f"{task}-{i}", "task": task, "idempotency_key": f"{task}-{i}",
            "retry": {"max_attempts": 5, "initial_delay": "0s", "max_delay": "0s"}}


async def steps_scenario(n: int) -> dict[str, Any]:
    async with bench_cluster(SCENARIO) as bench, workflow_worker(bench):
        services = {a: bench.pid(a) for a in bench.cluster.procs}
        cpu_before = cpu_by_process_group(services)
        start = time.time()
        await submit_jobs(bench, n, lambda i: _job("wf10", i), batch=500, scenario=SCENARIO)
        done = await wait_succeeded(bench.url, n, within=600, scenario=SCENARIO)
        cpu = cpu_spent(cpu_before, cpu_by_process_group(services))
        seconds = await last_finished(bench.url) - start
    return {"workflows": n, "succeeded": done, "seconds": round(seconds, 2),
            "workflows_per_s": round(n / seconds, 1),
            "steps_per_s": round(n * STEPS / seconds, 1), "cpu_seconds": cpu,
            "cpu_ms_per_workflow": cpu_per_run_ms(cpu, n)}


async def resume_scenario(n: int) -> dict[str, Any]:
    async with bench_cluster(SCENARIO) as bench, workflow_worker(bench):
        await submit_jobs(bench, n, lambda i: _job("sleeper", i), batch=500, scenario=SCENARIO)
        done = await wait_succeeded(bench.url, n, within=300, scenario=SCENARIO)
        conn = await asyncpg.connect(bench.url)
        try:
            rows = await conn.fetch("""
                SELECT extract(epoch FROM (s.recorded_at
                       - (t.data->>'due_at')::timestamptz)) * 1000 AS ms
                FROM events t
                JOIN LATERAL (SELECT recorded_at FROM events s
                              WHERE s.stream_id = t.stream_id AND s.type = 'RunStarted'
                                AND s.version > t.version ORDER BY s.version LIMIT 1) s ON true
                WHERE t.type = 'TimerFired'""")
        finally:
            await conn.close()
    lags = sorted(float(r["ms"]) for r in rows)
    return {"workflows": n, "succeeded": done, "resume_ms": distribution(lags)}


async def lone_scenario(steps: int, profile: bool = False) -> dict[str, Any]:
    """One workflow of `steps` no-op steps, nothing else running: each step's latency, timed
    in the workflow around `ctx.step`, and the gaps between its steps' `recorded_at`.
    `profile`: py-spy the gateway and this process (the SDK worker) while it runs (a step's
    figures then include py-spy's sampling)."""
    timed: list[float] = []
    async with bench_cluster(SCENARIO) as bench, workflow_worker(bench, lone=timed):
        profiler = None
        if profile:  # about 1.2 ms a step under py-spy: long enough for the steps asked for
            profiler = Profiler(f"{SCENARIO}-lone", {"worker_gateway": bench.pid("worker_gateway"),
                                                      "sdk_worker": os.getpid()},
                                max(5.0, steps * 0.0012)).start()
        await submit_jobs(bench, 1, lambda i: {**_job("lone", i), "payload": steps},
                          scenario=SCENARIO)
        done = await wait_succeeded(bench.url, 1, within=1800, scenario=SCENARIO)
        tops = profiler.finish() if profiler else {}
        conn = await asyncpg.connect(bench.url)
        try:
            rows = await conn.fetch("""
                SELECT extract(epoch FROM recorded_at - lag(recorded_at) OVER (
                           PARTITION BY stream_id ORDER BY version)) * 1000 AS ms
                FROM events WHERE type = 'StepCompleted' ORDER BY stream_id, version""")
        finally:
            await conn.close()
    gaps = [float(r["ms"]) for r in rows if r["ms"] is not None]
    return {"steps": steps, "succeeded": done, "warmup_steps": LONE_WARMUP,
            "step_ms": _lone_figures(timed), "gap_ms": _lone_figures(gaps),
            "measured": "step_ms: around `await ctx.step` in the worker; gap_ms: between "
                        "consecutive StepCompleted.recorded_at",
            **({"profile_top": {a: t[:12] for a, t in tops.items()}} if profile else {})}


async def dbos_lone_scenario(steps: int) -> dict[str, Any]:
    """A lone DBOS workflow's steps, timed as Ostinato's, in its own process on a new database
    of the same PostgreSQL server (`python -m bench.workflows dbos-lone URL STEPS`)."""
    import uuid

    from bench.common import BASE_URL, ROOT
    from bench.peers import dbos_workflow
    from bench.peers.harness import run_measured

    if dbos_workflow.dbos_version() is None:
        return {"not_run": "DBOS Transact (`dbos`) is not installed: `make bench-deps`"}
    name = f"bench_dbos_lone_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = BASE_URL.rpartition("/")[0] + "/" + name
    logs = ROOT / ".cache" / "bench" / f"dbos-lone-{name[-8:]}.log"
    try:
        return await run_measured("dbos", [sys.executable, "-m", "bench.workflows", "dbos-lone",
                                           url, str(steps)], logs, 1800)
    except RuntimeError as e:
        log(SCENARIO, f"dbos lone: not measured: {e}")
        return {"not_run": f"the DBOS process failed: {str(e)[:300]}"}
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _dbos_lone(url: str, steps: int) -> dict[str, Any]:
    """In the DBOS process: one workflow of `steps` no-op steps, each timed around its call."""
    from dbos import DBOS, DBOSConfig

    from bench.peers import dbos_workflow

    timed: list[float] = []

    @DBOS.step()
    async def noop(i: int) -> int:
        return i

    @DBOS.workflow()
    async def lone(n: int) -> int:
        clock = time.perf_counter
        for i in range(n):
            t = clock()
            await noop(i)
            timed.append((clock() - t) * 1000)
        return n

    config: DBOSConfig = {"name": "ostinato-bench-lone", "system_database_url": url,
                          "log_level": "WARNING", "enable_otlp": False}
    DBOS(config=config)
    DBOS.launch()
    try:
        result = await (await DBOS.start_workflow_async(lone, steps)).get_result()
    finally:
        DBOS.destroy()
    return {"steps": steps, "returned_ok": result == steps, "warmup_steps": LONE_WARMUP,
            "step_ms": _lone_figures(timed), "dbos": dbos_workflow.dbos_version()}


def _plan_summary(plan: list[dict[str, Any]]) -> dict[str, Any]:
    """From EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON): the node chain, the scan's node type and
    index, and the shared buffers the whole statement hit and read."""
    top = plan[0]["Plan"]
    chain, node = [], top
    while True:
        chain.append(node["Node Type"])
        children = node.get("Plans") or []
        if not children:
            break
        node = children[0]
    return {"nodes": " -> ".join(chain), "scan": node["Node Type"],
            "index": node.get("Index Name"), "relation": node.get("Relation Name"),
            "shared_hit": top.get("Shared Hit Blocks"),
            "shared_read": top.get("Shared Read Blocks"),
            "rows": top.get("Actual Rows"), "planning_ms": plan[0].get("Planning Time"),
            "execution_ms": plan[0].get("Execution Time")}


async def time_wake_polls(url: str, polls: int, warmup: int = 100) -> dict[str, Any]:
    """The scheduler's wake poll, as it runs it (services/scheduler/tick.py wake_suspended: the
    store's SQL with the clock's now and WAKE_BATCH, on a connection with custom plans as the
    scheduler's pool has, db/pool.py), after VACUUM ANALYZE, on a new connection with a fresh
    prepared statement: `warmup` polls, then `polls` timed, each in its own transaction (rolled
    back); then its plan."""
    from ostinato.stores import runs
    from services.scheduler.tick import WAKE_BATCH

    admin = await asyncpg.connect(url)
    try:
        await admin.execute("VACUUM ANALYZE runs")
    finally:
        await admin.close()
    conn = await asyncpg.connect(url, server_settings={"plan_cache_mode": "force_custom_plan"})
    try:
        stmt = await conn.prepare(runs.Q["claim_wakeups"])
        samples = []
        for i in range(warmup + polls):
            tr = conn.transaction()
            await tr.start()
            now = datetime.now(UTC)
            t = time.perf_counter()
            await stmt.fetch(now, WAKE_BATCH)
            elapsed = (time.perf_counter() - t) * 1e6
            await tr.rollback()
            if i >= warmup:
                samples.append(elapsed)
        tr = conn.transaction()
        await tr.start()
        raw = await conn.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
                                  + runs.Q["claim_wakeups"], datetime.now(UTC), WAKE_BATCH)
        await tr.rollback()
    finally:
        await conn.close()
    plan = json.loads(raw) if isinstance(raw, str) else raw
    return {"us": distribution(samples), "plan": _plan_summary(plan), "plan_json": plan}


async def idle_poll_scenario(asleep: int, polls: int = 500) -> dict[str, Any]:
    async with bench_cluster(SCENARIO, services=("api",)) as bench:
        empty = await time_wake_polls(bench.url, polls)
        conn = await asyncpg.connect(bench.url)
        try:
            await conn.execute("""
                INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref,
                                  scheduled_for, state, attempt, fencing_token, updated_at,
                                  version, wait_reason, wait_seq, wait_name, wake_at)
                SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'sleeper',
                       'default', 'default', gen_random_uuid(), now(), 'suspended', 1, 1, now(),
                       4, 'timer', 0, 'sleep', now() + interval '30 days' + i * interval '1 s'
                FROM generate_series(1, $1) AS i""", asleep)
            counted = await conn.fetchval("SELECT count(*) FROM runs WHERE state = 'suspended'")
        finally:
            await conn.close()
        full = await time_wake_polls(bench.url, polls)
    p50_none, p50_full = empty["us"]["p50"], full["us"]["p50"]
    return {"asleep": asleep, "suspended_rows": counted, "polls": polls,
            "poll_us_none": empty["us"], "poll_us_asleep": full["us"],
            "plan_none": empty["plan"], "plan_asleep": full["plan"],
            "plan_json_none": empty["plan_json"], "plan_json_asleep": full["plan_json"],
            "ratio": round(p50_full / p50_none, 2) if p50_none else None,
            "ratio_p99": (round(full["us"]["p99"] / empty["us"]["p99"], 2)
                          if empty["us"]["p99"] else None),
            "target": "≈ 1 (one descent of runs_wake however many runs sleep)"}


async def dbos_scenario(n: int) -> dict[str, Any]:
    """The steps scenario's workload on DBOS Transact (bench/peers/dbos_workflow.py)."""
    from bench.peers import dbos_workflow

    if dbos_workflow.dbos_version() is None:
        return {"not_run": "DBOS Transact (`dbos`) is not installed: `make bench-deps` installs "
                           "the benchmark lock, which pins it"}
    try:
        return await dbos_workflow.run(n, steps=STEPS, scenario=SCENARIO)
    except RuntimeError as e:  # its process failed or overran: say so, keep the other figures
        log(SCENARIO, f"dbos: not measured: {e}")
        return {"not_run": f"the DBOS process failed: {str(e)[:300]}"}


async def temporal_scenario(n: int) -> dict[str, Any]:
    """The steps scenario's workload on Temporal's dev server, with activities and with local
    activities (bench/peers/temporal_workflow.py)."""
    from bench.peers import temporal_workflow

    if temporal_workflow.sdk_version() is None:
        return {"not_run": "Temporal's Python SDK (`temporalio`) is not installed: `make "
                           "bench-deps` installs the benchmark lock, which pins it"}
    if temporal_workflow.server_binary() is None:
        return {"not_run": "Temporal's dev server is not built: `make bench-infra` builds it "
                           "(infra/temporal.sh, once per machine)"}
    result: dict[str, Any] = {}
    for mode, local in (("activities", False), ("local_activities", True)):
        try:
            result[mode] = await temporal_workflow.run(n, steps=STEPS, local=local,
                                                       scenario=SCENARIO)
        except RuntimeError as e:  # the server or the process failed: say so, keep the rest
            log(SCENARIO, f"temporal ({mode}): not measured: {e}")
            result[mode] = {"not_run": f"the Temporal process failed: {str(e)[:300]}"}
    return result


def ratios(ours: dict[str, Any], peer: dict[str, Any]) -> dict[str, float | None]:
    """Ostinato's figures over a peer's (workflows/s, steps/s) and the peer's CPU a workflow over
    Ostinato's: > 1 favours Ostinato in each."""
    def over(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a and b else None

    return {"ratio_workflows_per_s": over(ours.get("workflows_per_s"), peer["workflows_per_s"]),
            "ratio_steps_per_s": over(ours.get("steps_per_s"), peer["steps_per_s"]),
            "ratio_cpu_per_workflow": over(peer.get("cpu_ms_per_workflow"),
                                           ours.get("cpu_ms_per_workflow"))}


async def long_scenario(steps: int) -> dict[str, Any]:
    samples: list[float] = []

    async def sample() -> None:
        while True:
            samples.append(_rss_mib())
            await asyncio.sleep(0.5)

    async with bench_cluster(SCENARIO) as bench, workflow_worker(bench, long_steps=steps):
        sampler = asyncio.create_task(sample())
        start = time.time()
        await submit_jobs(bench, 1, lambda i: _job("long", i), scenario=SCENARIO)
        done = await wait_succeeded(bench.url, 1, within=3600, scenario=SCENARIO)
        seconds = await last_finished(bench.url) - start
        sampler.cancel()
    executed = 2 * steps  # the first execution, then the replay of all of it
    return {"steps": steps, "succeeded": done, "seconds": round(seconds, 1),
            "steps_per_s_incl_replay": round(executed / seconds, 1),
            "rss_mib": {"first": round(samples[0], 1), "peak": round(max(samples), 1),
                        "last": round(samples[-1], 1), "samples": len(samples)}}


def _ratio_rows(who: str, peer: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """The ratios of Ostinato's figures to a peer's (present when the steps scenario ran)."""
    if peer.get("ratio_workflows_per_s") is None:
        return []
    return [(f"ratio Ostinato/{who}, workflows/s", peer["ratio_workflows_per_s"],
             "> 1 favours Ostinato"),
            (f"ratio Ostinato/{who}, steps/s", peer["ratio_steps_per_s"], ""),
            (f"ratio {who}/Ostinato, CPU a workflow", peer["ratio_cpu_per_workflow"],
             "> 1 favours Ostinato")]


def report(result: dict[str, Any]) -> str:
    """The printed table: a block of rows per scenario that ran."""
    rows: list[tuple[str, Any, str]] = []
    peers = result.get("peers", {})
    s, d = result.get("steps"), peers.get("dbos")
    if s:
        rows += [("workflows/s (10 no-op steps each)", s["workflows_per_s"], "end to end"),
                 ("steps/s", s["steps_per_s"], "end to end"),
                 ("CPU ms a workflow", s.get("cpu_ms_per_workflow"),
                  "services, PostgreSQL, Kafka, worker")]
    if d and "workflows_per_s" in d:
        rows += [(f"DBOS {d['dbos']}: workflows/s", d["workflows_per_s"],
                  f"same workload, ≤ {d['max_inflight']} in flight"),
                 ("DBOS steps/s", d["steps_per_s"], ""),
                 ("DBOS CPU ms a workflow", d.get("cpu_ms_per_workflow"),
                  "its process and PostgreSQL"),
                 *_ratio_rows("DBOS", d)]
    elif d:
        rows.append(("DBOS", "not run", d.get("not_run", "")))
    t = peers.get("temporal") or {}
    if "not_run" in t:
        rows.append(("Temporal", "not run", t["not_run"]))
    for mode, label in (("activities", "activities"), ("local_activities", "local activities")):
        f = t.get(mode)
        if f and "workflows_per_s" in f:
            who = f"Temporal ({label})"
            rows += [(f"{who}: workflows/s", f["workflows_per_s"],
                      f"{f.get('server')}, temporalio {f['temporalio']}, "
                      f"≤ {f['max_inflight']} in flight"),
                     (f"{who}: steps/s", f["steps_per_s"], ""),
                     (f"{who}: CPU ms a workflow", f["cpu_ms_per_workflow"],
                      "worker process and server"),
                     *_ratio_rows(who, f)]
        elif f:
            rows.append((f"Temporal ({label})", "not run", f.get("not_run", "")))
    if r := result.get("resume"):
        rows += [("resume latency p50 (ms)", r["resume_ms"].get("p50"), "timer due -> next start"),
                 ("resume latency p99 (ms)", r["resume_ms"].get("p99"), "")]
    if i := result.get("idle_poll"):
        for key, label in (("none", "none asleep"), ("asleep", f"{i['asleep']} asleep")):
            us, plan = i[f"poll_us_{key}"], i[f"plan_{key}"]
            rows += [(f"wake poll µs p50 / p99, {label}", f"{us['p50']} / {us['p99']}",
                      f"{plan['scan']}{' ' + plan['index'] if plan['index'] else ''}, "
                      f"shared hit {plan['shared_hit']} read {plan['shared_read']}, "
                      f"plan {plan['planning_ms']} ms, exec {plan['execution_ms']} ms")]
        rows.append(("wake poll p50 ratio asleep/none", i["ratio"],
                     f"target ≈ 1 (p99 ratio {i['ratio_p99']})"))
    if lo := result.get("lone"):
        ms, gap = lo["step_ms"], lo["gap_ms"]
        rows += [(f"lone step ms p50 / p99 / max ({lo['steps']} steps)",
                  f"{ms['p50']} / {ms['p99']} / {ms['max']}",
                  "around ctx.step in the worker; target p50 <= 1.5"),
                 ("lone step gap ms p50 / p99 / max", f"{gap['p50']} / {gap['p99']} / {gap['max']}",
                  "between StepCompleted.recorded_at")]
        dl = lo.get("dbos") or {}
        if "step_ms" in dl:
            dm = dl["step_ms"]
            rows += [(f"DBOS {dl['dbos']}: lone step ms p50 / p99 / max",
                      f"{dm['p50']} / {dm['p99']} / {dm['max']}", "around the step's call"),
                     ("ratio Ostinato/DBOS, lone step p50", lo.get("ratio_p50_dbos"),
                      "< 1 favours Ostinato")]
        elif dl:
            rows.append(("DBOS lone step", "not run", dl.get("not_run", "")))
    if lg := result.get("long"):
        rows += [(f"long workflow, {lg['steps']} steps: steps/s", lg["steps_per_s_incl_replay"],
                  "incl. one full replay"),
                 ("SDK worker RSS MiB first / peak / last",
                  f"{lg['rss_mib']['first']} / {lg['rss_mib']['peak']} / {lg['rss_mib']['last']}",
                  "must stay flat")]
    return table(f"workflows ({result.get('path', '')})", rows)


async def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--workflows", type=int, default=2000)
    parser.add_argument("--sleepers", type=int, default=500)
    parser.add_argument("--asleep", type=int, default=100_000)
    parser.add_argument("--polls", type=int, default=500)
    parser.add_argument("--long-steps", type=int, default=100_000)
    parser.add_argument("--lone-steps", type=int, default=2000)
    parser.add_argument("--lone-peer", action=argparse.BooleanOptionalAction, default=True,
                        help="the lone scenario on DBOS too (default: yes)")
    parser.add_argument("--only", default="",
                        help=f"comma-separated, of {','.join(SCENARIOS)} (default: all)")
    args = parser.parse_args()
    only = [x for x in args.only.split(",") if x] or list(SCENARIOS)
    if unknown := set(only) - set(SCENARIOS):
        parser.error(f"unknown scenarios: {sorted(unknown)}; choose from {','.join(SCENARIOS)}")
    if args.quick:
        args.workflows, args.sleepers, args.asleep, args.long_steps = 300, 100, 20_000, 20_000
        args.lone_steps = 500
    result: dict[str, Any] = {"scenario": SCENARIO, "machine": await machine(),
                              "scenarios_run": [x for x in SCENARIOS if x in only]}
    if "steps" in only:
        log(SCENARIO, f"steps: {args.workflows} workflows of {STEPS} steps")
        result["steps"] = await steps_scenario(args.workflows)
    if "dbos" in only:
        log(SCENARIO, f"dbos: {args.workflows} workflows of {STEPS} steps on DBOS Transact")
        dbos = await dbos_scenario(args.workflows)
        if "workflows_per_s" in dbos and "steps" in result:
            dbos.update(ratios(result["steps"], dbos))
        result.setdefault("peers", {})["dbos"] = dbos
    if "temporal" in only:
        log(SCENARIO, f"temporal: {args.workflows} workflows of {STEPS} steps on Temporal")
        temporal = await temporal_scenario(args.workflows)
        for figures in temporal.values():
            if isinstance(figures, dict) and "workflows_per_s" in figures and "steps" in result:
                figures.update(ratios(result["steps"], figures))
        result.setdefault("peers", {})["temporal"] = temporal
    if "resume" in only:
        log(SCENARIO, f"resume: {args.sleepers} sleeping workflows")
        result["resume"] = await resume_scenario(args.sleepers)
    if "idle" in only:
        log(SCENARIO, f"idle poll: {args.asleep} runs asleep")
        result["idle_poll"] = await idle_poll_scenario(args.asleep, args.polls)
    if "long" in only:
        log(SCENARIO, f"long: one workflow of {args.long_steps} steps")
        result["long"] = await long_scenario(args.long_steps)
    if "lone" in only:
        log(SCENARIO, f"lone: one workflow of {args.lone_steps} steps, alone")
        lone = await lone_scenario(args.lone_steps, profile=args.profile)
        if args.lone_peer:
            lone["dbos"] = dbos = await dbos_lone_scenario(args.lone_steps)
            if "step_ms" in dbos and dbos["step_ms"]["p50"] and lone["step_ms"]["p50"]:
                lone["ratio_p50_dbos"] = round(lone["step_ms"]["p50"] / dbos["step_ms"]["p50"], 2)
        result["lone"] = lone
    result["path"] = str(write_result(SCENARIO, result))
    print(report(result))


if __name__ == "__main__":
    from ostinato.telemetry.logging import configure_logging

    if sys.argv[1:2] == ["dbos-lone"]:  # the DBOS process of the lone scenario
        print(json.dumps(eventloop.run(_dbos_lone(sys.argv[2], int(sys.argv[3])))), flush=True)
        sys.exit(0)
    configure_logging("bench", "warning")  # the SDK worker's per-run lines off the table
    eventloop.run(main())
