"""Every benchmark scenario, one after another, each in its own process (fresh services and
database each), then one summary table of the headline figures next to their targets.

    .venv/bin/python -m bench.run_all [--quick] [--only start_lag,burst] [--skip idle_cost]
                                      [--profile]

`make bench` runs this (QUICK=1, ONLY=..., SKIP=..., PROFILE=1 map to the flags). A scenario
that fails is reported and the next one runs; the exit status is 1 if any failed. Results:
bench/results/<scenario>.json, bench/results/summary.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.common import RESULTS, ROOT, log, machine, table, write_result

SCENARIOS = ("throughput", "start_lag", "burst", "idle_cost", "failover", "fairness",
             "workflows", "dags", "fanout", "peers", "capacity", "sdk_attempt",
             "hot_updates", "append_cost", "kafka_hop", "soak")

# scenario -> [(label, how to read the figure from its JSON, target)]
Reader = Callable[[dict[str, Any]], Any]
HEADLINES: dict[str, list[tuple[str, Reader, str]]] = {
    "throughput": [
        ("runs/s end to end", lambda r: r["median"]["completion_rate_per_s"], "≥ 2000"),
        ("submit jobs/s", lambda r: r["median"]["submit_rate_per_s"], ""),
        ("PostgreSQL commits per run", lambda r: r["median"]["db_xact_commit_per_run"], ""),
        ("CPU ms a run, all processes", lambda r: r["median"].get("cpu_per_run_ms"), "")],
    "start_lag": [
        ("start lag p50 ms @1000/s", lambda r: r["median"]["start_lag_ms_p50"], ""),
        ("start lag p99 ms @1000/s", lambda r: r["median"]["start_lag_ms_p99"], "≤ 250"),
        ("start lag max ms @1000/s", lambda r: r["median"]["start_lag_ms_max"], "")],
    "burst": [
        ("burst: all started (s)", lambda r: r["median"]["all_started_s"], "≤ 60"),
        ("burst: all finished (s)", lambda r: r["median"]["all_finished_s"], ""),
        ("burst: start lag p99 ms", lambda r: r["median"]["start_lag_ms_p99"], ""),
        ("burst: CPU ms a run", lambda r: r["median"].get("cpu_per_run_ms"), "")],
    "sdk_attempt": [
        ("SDK: CPU µs an attempt (no-op, in process)",
         lambda r: r["cpu_us_per_attempt"]["plain"], "")],
    "hot_updates": [
        ("runs: state changes µs a run, today", lambda r: r["median"]["today"]["all"]["us_per_run"],
         ""),
        ("runs: the same as HOT updates (ceiling, ff 50)",
         lambda r: r["median"]["hot, ff 50"]["all"]["us_per_run"], "")],
    "append_cost": [
        ("log: µs an event appended, today",
         lambda r: r["median_us_per_event"]["today"], ""),
        ("log: the same, bare (keys only, text, no RETURNING)",
         lambda r: r["median_us_per_event"]["bare"], "")],
    "kafka_hop": [
        ("Kafka: broker CPU µs a wake-up", lambda r: r["median"]["broker_us_per_hop"], ""),
        ("Kafka: producer + consumer CPU µs a wake-up",
         lambda r: r["median"]["clients_us_per_hop"], "")],
    "idle_cost": [
        ("idle: scheduler's idle poll p50 ratio with/without",
         lambda r: r["poll_p50_ratio_with_over_without"].get("any_due_jobs"), "≈ 1"),
        ("idle: due poll p50 ratio with/without",
         lambda r: r["poll_p50_ratio_with_over_without"]["claim_due_jobs"], "≈ 1"),
        ("idle: oldest_due p50 ratio with/without",
         lambda r: r["poll_p50_ratio_with_over_without"]["oldest_due"], "≈ 1"),
        ("idle: scheduler CPU ratio with/without",
         lambda r: r["cpu_ratio_with_over_without"], "≈ 1"),
        ("idle: bytes per future job", lambda r: r["bytes_per_future_job"]["database"], "")],
    "failover": [
        ("failover max (lease TTLs)", lambda r: r["failover_ttls_max"], "≤ 2"),
        ("failover: missed occurrences", lambda r: r["missed"], "0"),
        ("failover: duplicated occurrences", lambda r: r["duplicated"], "0")],
    "fairness": [
        ("fairness: worst tenant share / weight share",
         lambda r: min(t["share"] / t["weight_share"] for t in r["shares"]["tenants"].values()),
         "≈ 1"),
        ("fairness: light tenant critical wait p99 s",
         lambda r: r["waits"]["trickle/critical"]["p99_s"], ""),
        ("fairness: dispatch decisions/s (back to back)",
         lambda r: r["dispatcher"]["decisions_per_s_busy"], "")],
    "workflows": [
        ("workflows: steps/s (10-step workflows)", lambda r: r["steps"]["steps_per_s"], ""),
        ("workflows: resume p99 ms (timer due -> start)",
         lambda r: r["resume"]["resume_ms"]["p99"], ""),
        ("workflows: wake poll ratio asleep/none", lambda r: r["idle_poll"]["ratio"], "≈ 1"),
        ("workflows: long run RSS peak / first",
         lambda r: round(r["long"]["rss_mib"]["peak"] / r["long"]["rss_mib"]["first"], 2),
         "≈ 1"),
        ("workflows: Ostinato/DBOS workflows/s ratio",
         lambda r: r["peers"]["dbos"].get("ratio_workflows_per_s"), "> 1 favours Ostinato"),
        ("workflows: Ostinato/Temporal (activities) workflows/s ratio",
         lambda r: r["peers"]["temporal"]["activities"].get("ratio_workflows_per_s"),
         "> 1 favours Ostinato"),
        ("workflows: Ostinato/Temporal (local activities) workflows/s ratio",
         lambda r: r["peers"]["temporal"]["local_activities"].get("ratio_workflows_per_s"),
         "> 1 favours Ostinato"),
        ("workflows: Temporal (local activities)/Ostinato CPU a workflow",
         lambda r: r["peers"]["temporal"]["local_activities"].get("ratio_cpu_per_workflow"),
         "> 1 favours Ostinato")],
    "dags": [
        ("dags: parent end -> child start p50 ms (wide DAG)",
         lambda r: r["runs"][-1]["parent_end_to_child_start_ms"]["p50"], ""),
        ("dags: parent end -> child start p99 ms (wide DAG)",
         lambda r: r["runs"][-1]["parent_end_to_child_start_ms"]["p99"], ""),
        ("dags: last child end -> join start ms",
         lambda r: r["runs"][-1]["last_child_end_to_join_start_ms"], "")],
    "fanout": [
        ("fan-out: chunks/s (cap 50)", lambda r: r["fanout"]["chunks_per_s"], ""),
        ("fan-out: most chunk runs not final at once",
         lambda r: r["fanout"]["most_not_final_at_once"], "≤ the cap (50)"),
        ("fan-out: plain jobs runs/s (same work)", lambda r: r["plain"]["runs_per_s"], ""),
        ("fan-out: chunks/s / plain runs/s",
         lambda r: round(r["fanout"]["chunks_per_s"] / r["plain"]["runs_per_s"], 2), "")],
    "capacity": [
        ("capacity: due/s at p99 ≤ 250 ms, Ostinato", lambda r: r["ostinato"]["capacity_per_s"],
         ""),
        ("capacity: due/s at p99 ≤ 250 ms, pgqueuer",
         lambda r: r["peer_result"]["capacity_per_s"], ""),
        ("capacity: ratio Ostinato/pgqueuer", lambda r: r["capacity_ratio"], "≥ 1.0"),
        ("CPU ms per run at the rate both sustain, Ostinato",
         lambda r: (r["at_both"]["ostinato"] or {}).get("cpu_per_run_ms"), "≤ pgqueuer's"),
        ("CPU ms per job at the rate both sustain, pgqueuer",
         lambda r: (r["at_both"]["peer"] or {}).get("cpu_per_run_ms"), "")],
    "soak": [
        ("soak: hot database growth, last half (MB)",
         lambda r: round(r["hot_growth_last_half_bytes"] / 1e6, 2), "≈ 0 (flat)"),
        ("soak: archiver CPU / a run's CPU", lambda r: r["archiver_share_of_run_cpu"],
         "≤ 0.10"),
        ("soak: start lag p99 ms during archiving",
         lambda r: r["start_lag_ms"]["during_archiving"]["p99"], "≤ 250"),
        ("soak: GB/day archived @1000 runs/s",
         lambda r: r["gb_per_day_at_1000_per_s"]["archived"], "")],
    "peers": [
        (f"Ostinato/{peer} throughput ratio",
         lambda r, p=peer: r["ratios"].get(p, {}).get("throughput"), "")
        for peer in ("pgqueuer", "procrastinate", "celery")],
}


def run(name: str, args: argparse.Namespace) -> tuple[bool, float]:
    cmd = [sys.executable, "-m", f"bench.{'peers.run' if name == 'peers' else name}"]
    if args.quick:
        cmd.append("--quick")
    if args.profile and name in ("throughput", "start_lag", "burst"):
        cmd.append("--profile")
    log("bench", f"{name}: {' '.join(cmd[1:])}")
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, check=False)
    return done.returncode == 0, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--only", default="", help=f"comma-separated, of {', '.join(SCENARIOS)}")
    parser.add_argument("--skip", default="")
    args = parser.parse_args()
    only = [s for s in args.only.split(",") if s] or list(SCENARIOS)
    skip = {s for s in args.skip.split(",") if s}
    unknown = (set(only) | skip) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {sorted(unknown)}")
    status: dict[str, Any] = {}
    for name in (s for s in SCENARIOS if s in only and s not in skip):
        ok, seconds = run(name, args)
        status[name] = {"ok": ok, "seconds": round(seconds, 1)}
    rows: list[tuple[str, Any, str]] = []
    for name, st in status.items():
        path = RESULTS / f"{name}.json"
        if not st["ok"] or not path.exists():
            rows.append((f"{name}: FAILED", None, ""))
            continue
        result = json.loads(path.read_text())
        for label, read, target in HEADLINES[name]:
            try:
                value = read(result)
            except (KeyError, TypeError, ZeroDivisionError):
                value = None
            rows.append((label, value, f"target {target}" if target else ""))
    summary = {"quick": args.quick, "scenarios": status, "headlines": rows,
               "machine": asyncio.run(machine())}
    write_result("summary", summary)
    m = summary["machine"]
    print()
    print(table(f"Ostinato benchmarks{' (quick)' if args.quick else ''} — {m['cores']} cores, "
                f"{m['memory_gib']} GiB, PostgreSQL {m['postgresql']}, Python {m['python']}",
                rows))
    print(f"note: {m['note']}")
    return 0 if all(s["ok"] for s in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
