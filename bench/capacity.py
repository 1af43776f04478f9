"""Capacity at the lag SLO (issue #19): the highest due rate each system sustains for --seconds
with start lag p99 ≤ 250 ms, stepping the rate up until it breaks, for Ostinato and pgqueuer in
the same run; start lag p50/p99 at every rate; and CPU per run: every process's CPU (services,
PostgreSQL, Kafka, the client and worker; for pgqueuer its workers, PostgreSQL and the client)
from the first due instant until every run started, divided by the runs started in it (the idle
lead before it is `bench.idle_cost`'s figure). Ostinato's steps also give the lag's scheduler
part and the three slowest seconds (by p99), to lay beside what else ran then.

    .venv/bin/python -m bench.capacity [--quick] [--rates 250,500,1000,...,6000]
                                       [--seconds 60] [--peer pgqueuer] [--no-peer]

Each rate is measured like `bench.start_lag`: one-off jobs due at the rate, all submitted before
the first falls due. Ostinato's steps share one cluster (warmed up once; a step starts only
after the previous one's runs all started); pgqueuer's each get a fresh lab (its harness).
A rate passes when every job started and p99 ≤ the SLO; the ladder stops at the first rate that
fails, for each system on its own. The figures are the capacities, their ratio, and p50/p99 at
the highest rate both passed.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from bench.common import (
    STATS_LAG_S,
    base_parser,
    bench_cluster,
    cpu_by_process_group,
    cpu_per_run_ms,
    cpu_spent,
    lag_figures,
    log,
    machine,
    rows_line,
    rows_per_run,
    sdk_worker,
    service_env,
    statement_stats,
    statements_per_run,
    submit_jobs,
    table,
    table_stats,
    wait_succeeded,
    write_result,
)
from bench.start_lag import warm_up
from ostinato import eventloop

SCENARIO = "capacity"
SLO_P99_MS = 250.0


def passes(step: dict[str, Any]) -> bool:
    """Every job started, and p99 start lag within the SLO."""
    lag = step.get("start_lag_ms") or {}
    return step.get("started") == step["jobs"] and lag.get("p99") is not None \
        and lag["p99"] <= SLO_P99_MS


def capacity(steps: list[dict[str, Any]]) -> float | None:
    """The highest rate of the passing prefix of the ladder (None: the first rate failed)."""
    best = None
    for step in steps:
        if not passes(step):
            break
        best = step["rate_per_s"]
    return best


def reached_limit(steps: list[dict[str, Any]]) -> bool:
    """Whether the ladder found the system's limit (a rate failed); otherwise the capacity is
    only at least its top rate."""
    return any(not passes(s) for s in steps)


async def ostinato_steps(args: Any) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    async with bench_cluster(SCENARIO, env=service_env(args)) as bench, \
            sdk_worker(bench, args.concurrency):
        await warm_up(bench, SCENARIO)
        services = {a: bench.pid(a) for a in bench.cluster.procs}
        for k, rate in enumerate(args.rates):
            total = int(rate * args.seconds)
            lead = 8 + total / 2500
            t0 = (datetime.now(UTC) + timedelta(seconds=lead)).replace(microsecond=0)

            def job(i: int, t0: datetime = t0, rate: float = rate, k: int = k) -> dict[str, Any]:
                return {"name": f"cap-{k}-{i}", "task": "noop",
                        "schedule": {"at": (t0 + timedelta(seconds=i / rate)).isoformat()}}

            log(SCENARIO, f"ostinato: {rate:g}/s for {args.seconds:g}s ({total} jobs)")
            await submit_jobs(bench, total, job, scenario=SCENARIO)
            # CPU from the first due instant (as the burst's): the idle lead before it is
            # idle_cost's figure, not the rate's
            await asyncio.sleep(max(0.0, (t0 - datetime.now(UTC)).total_seconds() - 1.0))
            tables, statements = await table_stats(bench.url), await statement_stats(bench.url)
            await asyncio.sleep(max(0.0, (t0 - datetime.now(UTC)).total_seconds()))
            before = cpu_by_process_group(services)
            where = (f"due_at >= '{t0.isoformat()}' AND due_at < "
                     f"'{(t0 + timedelta(seconds=args.seconds)).isoformat()}'")
            window = args.seconds
            started = await wait_succeeded(bench.url, total, within=window + args.grace,
                                           scenario=SCENARIO, where=where, quiet_for=window)
            cpu = cpu_spent(before, cpu_by_process_group(services))
            figures = await lag_figures(bench.url, where)
            await asyncio.sleep(STATS_LAG_S)
            rows = rows_per_run(tables, await table_stats(bench.url), started)
            per_run = statements_per_run(statements, await statement_stats(bench.url), started)
            step = {"rate_per_s": rate, "jobs": total, "started": started,
                    "start_lag_ms": figures["start_lag_ms"], "cpu_seconds": cpu,
                    "cpu_per_run_ms": cpu_per_run_ms(cpu, started),
                    "scheduler_lag_ms": figures["scheduler_lag_ms"],
                    "queue_to_start_ms": figures["queue_to_start_ms"],
                    "slowest_seconds": await slowest_seconds(bench.url, where, t0),
                    "rows_per_run": rows, "statements_per_run": per_run}
            steps.append(step)
            log(SCENARIO, f"ostinato {rate:g}/s: p99 {step['start_lag_ms'].get('p99')} ms, "
                          f"{step['cpu_per_run_ms']} ms CPU per run")
            if not passes(step):
                break
    return steps


async def slowest_seconds(url: str, where: str, t0: datetime, n: int = 3
                          ) -> list[dict[str, float]]:
    """The `n` seconds of the window (by due time, seconds after its start) whose start lag p99
    was worst, with that p99 and the scheduler's part of it: a p99 over the SLO is a few slow
    seconds or every second, and the slow ones can be laid beside what else ran then."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT floor(extract(epoch FROM due_at - $1::timestamptz)) AS second, "
            "       percentile_cont(0.99) WITHIN GROUP (ORDER BY started_at - due_at) AS p99, "
            "       percentile_cont(0.99) WITHIN GROUP (ORDER BY scheduled_at - due_at) AS s99 "
            f"FROM runs WHERE started_at IS NOT NULL AND {where} "
            "GROUP BY 1 ORDER BY 2 DESC LIMIT $2", t0, n)
    finally:
        await conn.close()
    return [{"second": float(r["second"]), "p99_ms": round(r["p99"].total_seconds() * 1000, 1),
             "scheduler_p99_ms": round(r["s99"].total_seconds() * 1000, 1)} for r in rows]


async def peer_steps(args: Any) -> list[dict[str, Any]]:
    from bench.peers.harness import peer_cpu, timed
    from bench.peers.run import load_peer

    peer = load_peer(args.peer)
    steps: list[dict[str, Any]] = []
    for rate in args.rates:
        total = int(rate * args.seconds)
        t0 = time.time() + 5 + total / 1000
        dues = [t0 + i / rate for i in range(total)]
        log(SCENARIO, f"{peer.name}: {rate:g}/s for {args.seconds:g}s ({total} jobs)")
        r = await timed(peer, dues, args.seconds + args.grace, f"{peer.name} capacity")
        cpu = peer_cpu(r["cpu_seconds"])
        step = {"rate_per_s": rate, "jobs": total, "started": r["started"],
                "start_lag_ms": r["start_lag_ms"], "cpu_seconds": cpu,
                "cpu_per_run_ms": cpu_per_run_ms(cpu, r["started"]),
                "rows_per_run": r["rows_per_run"]}
        steps.append(step)
        log(SCENARIO, f"{peer.name} {rate:g}/s: p99 {step['start_lag_ms'].get('p99')} ms, "
                      f"{step['cpu_per_run_ms']} ms CPU per job")
        if not passes(step):
            break
    return steps


def at_rate(steps: list[dict[str, Any]], rate: float | None) -> dict[str, Any] | None:
    return next((s for s in steps if s["rate_per_s"] == rate), None)


async def main(args: Any) -> dict[str, Any]:
    args.rates = sorted(float(r) for r in args.rates.split(",") if r)
    if args.quick:
        args.seconds = min(args.seconds, 15)
    ours = await ostinato_steps(args)
    theirs = [] if args.no_peer else await peer_steps(args)
    cap_ours, cap_theirs = capacity(ours), capacity(theirs)
    both = min(cap_ours, cap_theirs) if cap_ours is not None and cap_theirs is not None else None
    return {"scenario": SCENARIO, "seconds": args.seconds, "slo_p99_ms": SLO_P99_MS,
            "peer": None if args.no_peer else args.peer, "service_env": service_env(args),
            "ostinato": {"capacity_per_s": cap_ours, "limit_found": reached_limit(ours),
                         "steps": ours},
            "peer_result": {"capacity_per_s": cap_theirs, "limit_found": reached_limit(theirs),
                            "steps": theirs},
            "capacity_ratio": round(cap_ours / cap_theirs, 2) if cap_ours and cap_theirs
            else None,
            "both_sustain_per_s": both,
            "at_both": {"ostinato": at_rate(ours, both), "peer": at_rate(theirs, both)},
            "machine": await machine()}


def report(r: dict[str, Any]) -> str:
    ours, theirs = r["ostinato"], r["peer_result"]
    peer = r["peer"] or "peer"
    rows: list[tuple[str, Any, str]] = [
        ("Ostinato capacity (due/s at p99 ≤ 250 ms)", ours["capacity_per_s"],
         "" if ours.get("limit_found") else "≥: no rate failed"),
        (f"{peer} capacity", theirs["capacity_per_s"],
         "" if theirs.get("limit_found") else "≥: no rate failed"),
        ("ratio Ostinato / peer", r["capacity_ratio"], "target ≥ 0.85 (issue 44)")]
    for name, steps in (("Ostinato", ours["steps"]), (peer, theirs["steps"])):
        for s in steps:
            lag = s["start_lag_ms"] or {}
            rows.append((f"{name} {s['rate_per_s']:g}/s: p50 / p99 ms, CPU ms per run",
                         f"{lag.get('p50')} / {lag.get('p99')}, {s['cpu_per_run_ms']}",
                         "pass" if passes(s) else "fails"))
            if s.get("rows_per_run"):
                rows.append(("  … rows a run (ins/upd(HOT)/del)", rows_line(s["rows_per_run"]), ""))
            if s.get("statements_per_run"):
                rows.append(("  … statements a run, server ms a run",
                             f"{s['statements_per_run']['statements']}, "
                             f"{s['statements_per_run']['server_ms']}", ""))
            if s.get("slowest_seconds"):
                rows.append(("  … slowest seconds (offset: p99 ms)", ", ".join(
                    f"{w['second']:g}: {w['p99_ms']:g}" for w in s["slowest_seconds"]), ""))
    return table(f"Capacity at the lag SLO, {r['seconds']:g} s per rate", rows)


if __name__ == "__main__":
    parser = base_parser(__doc__)
    # past both systems' limits (issue 44): a ladder that never fails gives no capacity, only
    # a lower bound ("≥ its top rate")
    parser.add_argument("--rates", default="250,500,1000,1500,2000,2500,3000,4000,5000,6000")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--grace", type=float, default=60,
                        help="seconds past the window to wait for the last starts")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--peer", default="pgqueuer")
    parser.add_argument("--no-peer", action="store_true")
    from ostinato.telemetry.logging import configure_logging
    configure_logging("bench", "warning")
    result = eventloop.run(main(parser.parse_args()))
    write_result(SCENARIO, result)
    print(report(result))
