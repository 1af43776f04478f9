"""Peers on the same machine and the same PostgreSQL, measured like Ostinato: scenario 1
(throughput: N no-op jobs enqueued in bulk, then drained), 2 (start lag: jobs due at --rate
per second for --seconds) and 3 (due burst: --burst jobs due in the same second) for pgqueuer,
procrastinate and Celery (Redis broker); prints each peer's figures and the ratios
Ostinato/peer, from Ostinato's results of the same `make bench` run (bench/results/
throughput.json, start_lag.json, burst.json: run those scenarios first).

    .venv/bin/python -m bench.peers.run [--quick] [--peers pgqueuer,procrastinate,celery]

Each peer and scenario starts on a fresh database (Celery: a flushed Redis database) with the
peer's own worker processes (bench/README.md lists each setup) and a 500-job warm-up. A peer
slower than the scenario's load is measured as far as --timeout allows (the result says how
many jobs started). One repetition per figure (--repeat for more, median taken).
"""

from __future__ import annotations

import json
import time
from typing import Any

from bench.common import (
    RESULTS,
    base_parser,
    cpu_per_run_ms,
    log,
    machine,
    median_of,
    repeat_count,
    table,
    write_result,
)
from bench.peers.harness import Peer, peer_cpu, throughput, timed
from ostinato import eventloop

SCENARIO = "peers"
PEERS = ("pgqueuer", "procrastinate", "celery")


def load_peer(name: str) -> Peer:
    if name == "pgqueuer":
        from bench.peers.pgqueuer_peer import PEER
    elif name == "procrastinate":
        from bench.peers.procrastinate_peer import PEER
    elif name == "celery":
        from bench.peers.celery_peer import PEER
    else:
        raise ValueError(f"unknown peer {name}")
    return PEER


async def measure(peer: Peer, args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"workers": peer.workers}
    reps = repeat_count(args)
    runs = []
    for rep in range(1, reps + 1):
        log(SCENARIO, f"{peer.name} #{rep}: throughput, {args.jobs} jobs")
        runs.append(await throughput(peer, args.jobs, args.timeout))
    out["throughput"] = {"runs": runs, "completion_rate_per_s": median_of(
        runs, "completion_rate_per_s"), "enqueue_rate_per_s": median_of(runs,
                                                                        "enqueue_rate_per_s")}
    runs = []
    for rep in range(1, reps + 1):
        total = int(args.rate * args.seconds)
        t0 = time.time() + 5 + total / 1000  # procrastinate defers distinct dues one by one
        dues = [t0 + i / args.rate for i in range(total)]
        log(SCENARIO, f"{peer.name} #{rep}: start lag, {args.rate:g}/s for {args.seconds:g}s")
        runs.append(await timed(peer, dues, args.timeout, f"{peer.name} start lag"))
    out["start_lag"] = {"runs": runs, **{f"start_lag_ms_{q}": median_of(runs, "start_lag_ms", q)
                                         for q in ("p50", "p95", "p99", "max")}}
    runs = []
    for rep in range(1, reps + 1):
        t0 = time.time() + 5 + args.burst / 2000
        dues = [t0] * args.burst  # one instant: every peer can enqueue them in bulk
        log(SCENARIO, f"{peer.name} #{rep}: burst, {args.burst} jobs in one second")
        runs.append(await timed(peer, dues, args.timeout, f"{peer.name} burst"))
    for run in runs:
        run["cpu_per_run_ms"] = cpu_per_run_ms(peer_cpu(run["cpu_seconds"]), run["started"])
    out["burst"] = {"runs": runs, "all_started_s": median_of(runs, "all_started_s"),
                    "started": median_of(runs, "started"),
                    "cpu_per_run_ms": median_of(runs, "cpu_per_run_ms"),
                    **{f"start_lag_ms_{q}": median_of(runs, "start_lag_ms", q)
                       for q in ("p50", "p99", "max")}}
    return out


def ostinato_figures() -> dict[str, Any]:
    """Ostinato's figures from this run's result files (None where a scenario did not run)."""
    def read(name: str) -> dict[str, Any] | None:
        path = RESULTS / f"{name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def median(result: dict[str, Any] | None, key: str) -> Any:
        return (result or {}).get("median", {}).get(key)

    t, s, b = read("throughput"), read("start_lag"), read("burst")
    return {"throughput": median(t, "completion_rate_per_s"),
            "start_lag_p99_ms": median(s, "start_lag_ms_p99"),
            "burst_all_started_s": median(b, "all_started_s"),
            "burst_cpu_per_run_ms": median(b, "cpu_per_run_ms"),
            "files_modified": {n: (RESULTS / f"{n}.json").stat().st_mtime
                               for n in ("throughput", "start_lag", "burst")
                               if (RESULTS / f"{n}.json").exists()}}


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


async def main(args: Any) -> dict[str, Any]:
    if args.quick:
        # the sizes of the Ostinato scenarios' --quick, so that the ratios compare like with like
        args.jobs, args.seconds = min(args.jobs, 10_000), min(args.seconds, 15)
        args.burst, args.timeout = min(args.burst, 20_000), min(args.timeout, 120)
    results = {}
    for name in [p for p in args.peers.split(",") if p]:
        try:
            results[name] = await measure(load_peer(name), args)
        except Exception as exc:  # one peer failing must not lose the others' figures
            log(SCENARIO, f"{name} failed: {exc!r}")
            results[name] = {"error": repr(exc)}
    ost = ostinato_figures()
    ratios = {}
    for name, r in results.items():
        if "error" in r:
            continue
        ratios[name] = {
            "throughput": ratio(ost["throughput"], r["throughput"]["completion_rate_per_s"]),
            # lower is better for these two: a ratio below 1 means Ostinato is faster
            "start_lag_p99": ratio(ost["start_lag_p99_ms"], r["start_lag"]["start_lag_ms_p99"]),
            "burst_all_started": ratio(ost["burst_all_started_s"], r["burst"]["all_started_s"]),
            "burst_cpu_per_run": ratio(ost["burst_cpu_per_run_ms"], r["burst"]["cpu_per_run_ms"]),
        }
    return {"scenario": SCENARIO, "jobs": args.jobs, "rate_per_s": args.rate,
            "seconds": args.seconds, "burst": args.burst, "timeout_s": args.timeout,
            "peers": results, "ostinato": ost, "ratios": ratios, "machine": await machine()}


def late(figures: dict[str, Any]) -> str:
    """A warning when the enqueue ended after the first job was due (the lag then includes it)."""
    ahead = min((run["enqueued_ahead_s"] for run in figures["runs"]), default=0.0)
    return f"; INVALID: enqueued {-ahead:.0f} s late" if ahead < 0 else ""


def report(r: dict[str, Any]) -> str:
    o = r["ostinato"]
    rows: list[tuple[str, Any, str]] = [
        ("Ostinato runs/s", o["throughput"], ""),
        ("Ostinato start lag p99 ms", o["start_lag_p99_ms"], ""),
        ("Ostinato burst all started s", o["burst_all_started_s"], ""),
        ("Ostinato burst CPU ms a run", o["burst_cpu_per_run_ms"], "every process, until all "
                                                                    "succeeded")]
    for name, p in r["peers"].items():
        if "error" in p:
            rows.append((f"{name}: FAILED", None, p["error"][:60]))
            continue
        q = r["ratios"][name]
        rows += [(f"{name} jobs/s", p["throughput"]["completion_rate_per_s"],
                  f"Ostinato/{name} = {q['throughput']} (> 1: Ostinato better)"),
                 (f"{name} start lag p99 ms", p["start_lag"]["start_lag_ms_p99"],
                  f"Ostinato/{name} = {q['start_lag_p99']} (< 1: Ostinato better)"
                  + late(p["start_lag"])),
                 (f"{name} burst all started s", p["burst"]["all_started_s"],
                  f"Ostinato/{name} = {q['burst_all_started']} "
                  f"({p['burst']['started']}/{r['burst']} started)"),
                 (f"{name} burst CPU ms a job", p["burst"]["cpu_per_run_ms"],
                  f"Ostinato/{name} = {q['burst_cpu_per_run']} (< 1: Ostinato better; its "
                  "workers and PostgreSQL, until the last start)")]
    return table(f"Peers: {r['jobs']} jobs; {r['rate_per_s']:g} due/s for {r['seconds']:g} s; "
                 f"{r['burst']} due at once", rows)


if __name__ == "__main__":
    parser = base_parser(__doc__)
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--burst", type=int, default=100_000)
    parser.add_argument("--timeout", type=float, default=300)
    parsed = parser.parse_args()
    if parsed.repeat is None:
        parsed.repeat = 1
    result = eventloop.run(main(parsed))
    write_result(SCENARIO, result)
    print(report(result))
