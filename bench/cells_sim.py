"""Cells on paper: a seeded discrete-event simulation of 100x today's load spread over cells
(docs/SCALING.md). No servers: every cost a run puts on a resource is a figure measured on this
machine by the benchmarks (`SOURCES` names each), every size of a cell an assumption named here.

    .venv/bin/python -m bench.cells_sim [--quick] [--load 100] [--tenants 10000] [--skew 0.9]
        [--pg-cores 16] [--wal-mb-s 400] [--lanes 1] [--target 0.7] [--seconds 2] [--seed 39]

Today's load is what one installation sustains here at a start-lag p99 <= 250 ms: 2,000 runs/s
(`python -m bench.capacity`, bench/README.md). Tenants' rates follow a Zipf law (`--skew`); they
are placed in cells first-fit decreasing under a budget (`--target` of the binding resource's
capacity); each cell is then simulated event by event for `--seconds` of simulated time:

- the PostgreSQL primary's CPU, `--pg-cores` servers, FIFO, exponential service of mean
  `pg_cpu_ms` (an M/M/c queue, checked against Erlang C in the table);
- the primary's WAL, one stream of `wal_kb` a run against `--wal-mb-s`;
- the dispatcher's decision: rounds under one advisory lock per lane (`--lanes`; today one per
  cell, services/dispatcher/dispatcher.py), each taking the runs waiting (up to a batch) and
  holding the lock for a round's overhead plus, per run, the dispatcher's CPU and the SQL it
  runs under the lock;
- Kafka: wake-ups (`wakeups_per_run`, keyed by tenant) on each cell's partitions, each partition
  read by one consumer at `wakeup_client_ms` a message; the busiest partition is reported.

Printed: per cell its rate, tenants, the hottest tenant's share, each resource's utilisation,
queueing delay (PostgreSQL, dispatcher) and what breaks first (the highest utilisation, and the
load multiple at which it reaches 1). Start lag in the product also holds poll intervals and
round trips the model leaves out: read the delays as the resources' own queueing, not lag.
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.common import percentile, write_result

TODAY_RUNS_PER_S = 2_000.0  # capacity at p99 <= 250 ms on this machine (bench/README.md)


@dataclass(frozen=True, slots=True)
class Costs:
    """What one run costs each resource, measured on this machine (2 cores, PostgreSQL 15)."""

    pg_cpu_ms: float = 0.289  # PostgreSQL CPU a run at 2,000 due/s
    wal_kb: float = 14.0  # WAL a run, all writes
    dispatch_cpu_ms: float = 0.071  # the dispatcher process's CPU a run at 2,000 due/s
    dispatch_sql_ms: float = 0.054  # under the lock: RunQueued 35 + run_slots 14 + snapshot 5 µs
    dispatch_round_ms: float = 1.0  # a round's fixed part (snapshot statements, commit)
    dispatch_batch: int = 400  # runs a round takes at most
    wakeups_per_run: float = 0.03  # Kafka messages a run (one per append with a topic)
    wakeup_client_ms: float = 0.71  # producer + consumer CPU a wake-up (aiokafka)
    wakeup_broker_ms: float = 0.46  # broker CPU a wake-up
    scheduler_cpu_ms: float = 0.103
    gateway_cpu_ms: float = 0.105
    statements_per_run: float = 0.59
    rows_per_run: int = 17  # 14 a run and 3 for its submission


SOURCES = {
    "pg_cpu_ms": "bench/README.md ninth pass: `python -m bench.capacity --quick --rates 2000`",
    "wal_kb": "bench/README.md sixth pass: a burst's statements, 'about 14 KB of WAL a run'",
    "dispatch_cpu_ms": "bench/README.md ninth pass, CPU a run by process (dispatcher 0.071)",
    "dispatch_sql_ms": "bench/README.md sixth pass, PostgreSQL time a run by statement",
    "dispatch_round_ms": "assumption, checked with `python -m bench.fairness` (round p50)",
    "dispatch_batch": "services/dispatcher (the scheduler's batch of 400 feeds it)",
    "wakeups_per_run": "bench/README.md ninth pass: outbox rows a run at 2,000 due/s",
    "wakeup_client_ms": "`python -m bench.kafka_hop --quick`, medians of 3",
    "wakeup_broker_ms": "`python -m bench.kafka_hop --quick`, medians of 3",
    "scheduler_cpu_ms": "bench/README.md ninth pass, CPU a run by process",
    "gateway_cpu_ms": "bench/README.md ninth pass, CPU a run by process",
    "statements_per_run": "bench/README.md ninth pass (pg_stat_statements)",
    "rows_per_run": "bench/README.md ninth pass (pg_stat_database), submission included",
}


@dataclass(frozen=True, slots=True)
class CellShape:
    """What one cell is made of: assumptions about a production primary, not measurements."""

    pg_cores: int = 16  # PostgreSQL primary's cores
    wal_mb_s: float = 400.0  # WAL the primary and its synchronous standby sustain, MB/s
    lanes: int = 1  # dispatch decisions that may run at once (today: one advisory lock)
    partitions: int = 12  # Kafka partitions a topic (ostinato.bus.topics.Topics.partitions)
    shards: int = 16  # scheduler shards (ostinato.leases.shard.SHARDS)


# ---------------------------------------------------------------- pure parts (tests/unit)

def zipf_rates(tenants: int, total: float, skew: float) -> list[float]:
    """Rates of `tenants` tenants, hottest first, the k-th proportional to 1 / k**skew, summing
    to `total` (no tenant-rate data exists yet: the skew is the assumption to vary)."""
    weights = [1.0 / (k ** skew) for k in range(1, tenants + 1)]
    norm = total / sum(weights)
    return [w * norm for w in weights]


def capacities(costs: Costs, shape: CellShape) -> dict[str, float]:
    """Runs/s each resource of one cell serves at utilisation 1."""
    per_partition = 1000.0 / (costs.wakeups_per_run * costs.wakeup_client_ms)
    return {
        "pg_cpu": shape.pg_cores * 1000.0 / costs.pg_cpu_ms,
        "wal": shape.wal_mb_s * 1024.0 / costs.wal_kb,
        "dispatcher": shape.lanes * 1000.0 / (costs.dispatch_cpu_ms + costs.dispatch_sql_ms),
        "partition": per_partition,  # one tenant's wake-ups all go to one partition
        "scheduler": shape.shards * 1000.0 / costs.scheduler_cpu_ms,  # one instance per shard
    }


def utilisation(rate: float, hottest_partition_rate: float,
                caps: Mapping[str, float]) -> dict[str, float]:
    """Offered load over capacity for each resource; a partition sees its own tenants' runs."""
    return {name: (hottest_partition_rate if name == "partition" else rate) / cap
            for name, cap in caps.items()}


def first_to_break(util: Mapping[str, float]) -> tuple[str, float]:
    """The most utilised resource and the load multiple that brings it to 1."""
    name = max(util, key=lambda k: util[k])
    return name, (math.inf if util[name] == 0 else 1.0 / util[name])


def cell_budget(caps: Mapping[str, float], target: float) -> float:
    """Runs/s a cell is filled to: `target` of its binding resource, partitions aside (a
    partition limits one tenant, not the cell)."""
    return target * min(v for k, v in caps.items() if k != "partition")


@dataclass(slots=True)
class Placement:
    cells: list[list[int]] = field(default_factory=list)  # tenant indexes per cell
    load: list[float] = field(default_factory=list)
    oversize: list[int] = field(default_factory=list)  # tenants larger than a cell's budget


def place(rates: Sequence[float], budget: float) -> Placement:
    """First-fit decreasing: each tenant, largest first, into the first cell it fits, a new
    cell when none has room. A tenant above the budget alone gets a cell of its own and is
    listed as oversize (a tenant lives in one cell; docs/SCALING.md)."""
    out = Placement()
    for t in sorted(range(len(rates)), key=lambda i: (-rates[i], i)):
        r = rates[t]
        if r > budget:
            out.oversize.append(t)
        for c, load in enumerate(out.load):
            if r <= budget and load + r <= budget:
                out.cells[c].append(t)
                out.load[c] += r
                break
        else:
            out.cells.append([t])
            out.load.append(r)
    return out


def erlang_c_wait_ms(rate: float, service_ms: float, servers: int) -> float:
    """Mean wait in queue of an M/M/c queue (Erlang C), ms; inf when overloaded."""
    a = rate * service_ms / 1000.0  # offered load in servers
    if a >= servers:
        return math.inf
    term, total = 1.0, 1.0
    for k in range(1, servers):
        term *= a / k
        total += term
    top = term * a / servers / (1 - a / servers)  # a**c / c! * 1/(1-rho)
    p_wait = top / (total + top)
    return p_wait * service_ms / (servers - a)


def partition_of(tenant: int, partitions: int) -> int:
    """Stable tenant -> partition (Kafka keys by tenant; any stable hash spreads the same)."""
    return zlib.crc32(str(tenant).encode()) % partitions


# ---------------------------------------------------------------- the simulation

@dataclass(slots=True)
class CellRun:
    busy: dict[str, float]
    pg_waits: list[float]
    dispatch_waits: list[float]
    backlog: int  # runs still waiting for the dispatcher at the end
    partition_busy: float


def simulate_cell(rates: Mapping[int, float], costs: Costs, shape: CellShape,
                  seconds: float, rng: random.Random) -> CellRun:
    """Event by event: Poisson arrivals of each tenant's runs; the primary's cores as FIFO
    servers; the dispatcher's rounds under its lanes' locks; wake-ups on each partition."""
    total = sum(rates.values())
    tenants = list(rates)
    weights = [rates[t] for t in tenants]
    arrivals: list[float] = []
    t = 0.0
    while total > 0:
        t += rng.expovariate(total)
        if t >= seconds:
            break
        arrivals.append(t)
    who = rng.choices(tenants, weights=weights, k=len(arrivals))
    # PostgreSQL: c servers, FIFO (Kiefer-Wolfowitz: the earliest free core takes the next run).
    free = [0.0] * shape.pg_cores
    pg_busy, pg_waits = 0.0, []
    for a in arrivals:
        s = rng.expovariate(1000.0 / costs.pg_cpu_ms)
        start = max(a, heapq.heappop(free))
        heapq.heappush(free, start + s)
        pg_waits.append((start - a) * 1000.0)
        pg_busy += max(0.0, min(start + s, seconds) - start)  # inside the window only
    # Dispatcher: lanes take rounds in turn; a round takes what waits (up to a batch) and holds
    # its lane's lock for the round's overhead plus each run's CPU and SQL.
    per_run = (costs.dispatch_cpu_ms + costs.dispatch_sql_ms) / 1000.0
    lanes = [0.0] * shape.lanes
    d_busy, d_waits, i = 0.0, [], 0
    while i < len(arrivals):
        lane_free = heapq.heappop(lanes)
        start = max(lane_free, arrivals[i])
        if start >= seconds:
            heapq.heappush(lanes, lane_free)
            break
        j = i
        while j < len(arrivals) and arrivals[j] <= start and j - i < costs.dispatch_batch:
            j += 1
        took = costs.dispatch_round_ms / 1000.0 + per_run * (j - i)
        d_waits.extend((start - a) * 1000.0 for a in arrivals[i:j])
        d_busy += min(took, seconds - start)
        heapq.heappush(lanes, start + took)
        i = j
    # Kafka: each run makes a wake-up with probability wakeups_per_run on its tenant's partition.
    per_part: dict[int, float] = {}
    for tenant in who:
        if rng.random() < costs.wakeups_per_run:
            p = partition_of(tenant, shape.partitions)
            per_part[p] = per_part.get(p, 0.0) + costs.wakeup_client_ms / 1000.0
    return CellRun(busy={"pg_cpu": pg_busy / shape.pg_cores / seconds,
                         "dispatcher": d_busy / shape.lanes / seconds},
                   pg_waits=pg_waits, dispatch_waits=d_waits, backlog=len(arrivals) - i,
                   partition_busy=max(per_part.values(), default=0.0) / seconds)


def hottest_partition_rate(rates: Mapping[int, float], partitions: int) -> float:
    """Runs/s of the cell's busiest partition (its tenants' runs summed)."""
    per: dict[int, float] = {}
    for tenant, r in rates.items():
        p = partition_of(tenant, partitions)
        per[p] = per.get(p, 0.0) + r
    return max(per.values(), default=0.0)


def run(args: argparse.Namespace) -> dict[str, Any]:
    costs = Costs(dispatch_round_ms=args.round_ms)
    shape = CellShape(pg_cores=args.pg_cores, wal_mb_s=args.wal_mb_s, lanes=args.lanes)
    caps = capacities(costs, shape)
    budget = cell_budget(caps, args.target)
    total = TODAY_RUNS_PER_S * args.load
    rates = zipf_rates(args.tenants, total, args.skew)
    placement = place(rates, budget)
    rng = random.Random(args.seed)
    cells = []
    for c, members in enumerate(placement.cells):
        cell_rates = {t: rates[t] for t in members}
        rate = sum(cell_rates.values())
        hot_part = hottest_partition_rate(cell_rates, shape.partitions)
        model = utilisation(rate, hot_part, caps)
        model["wal"] = rate * costs.wal_kb / 1024.0 / shape.wal_mb_s
        sim = simulate_cell(cell_rates, costs, shape, args.seconds, rng)
        pg = sorted(sim.pg_waits) or [0.0]
        dw = sorted(sim.dispatch_waits) or [0.0]
        measured = {**model, "pg_cpu": sim.busy["pg_cpu"], "dispatcher": sim.busy["dispatcher"],
                    "partition": sim.partition_busy}
        breaks, multiple = first_to_break(model)
        cells.append({
            "cell": c, "tenants": len(members), "runs_per_s": round(rate),
            "hottest_tenant_share": round(rates[members[0]] / rate, 3),
            "utilisation_model": {k: round(v, 3) for k, v in model.items()},
            "utilisation_sim": {k: round(v, 3) for k, v in measured.items()},
            "pg_wait_us": {"mean": round(sum(pg) / len(pg) * 1000, 2),
                           "p99": round(percentile(pg, 99) * 1000, 2),
                           "erlang_c_mean": round(erlang_c_wait_ms(rate, costs.pg_cpu_ms,
                                                                   shape.pg_cores) * 1000, 2)},
            "dispatch_wait_ms": {"p50": round(percentile(dw, 50), 2),
                                 "p99": round(percentile(dw, 99), 2)},
            "dispatch_backlog_at_end": sim.backlog,
            # more left than one full round takes: rounds ran full, the queue grew
            "dispatch_overloaded": sim.backlog > costs.dispatch_batch,
            "kafka_broker_cores": round(rate * costs.wakeups_per_run
                                        * costs.wakeup_broker_ms / 1000.0, 3),
            "services_cores": {"scheduler": round(rate * costs.scheduler_cpu_ms / 1000, 2),
                               "gateway": round(rate * costs.gateway_cpu_ms / 1000, 2),
                               "dispatcher": round(rate * costs.dispatch_cpu_ms / 1000, 2)},
            "breaks_first": breaks, "at_load_multiple": round(multiple, 2),
        })
    return {
        "load": {"multiple": args.load, "runs_per_s": total, "tenants": args.tenants,
                 "skew": args.skew, "hottest_tenant_share": round(rates[0] / total, 4)},
        "costs": asdict(costs), "sources": SOURCES, "shape": asdict(shape),
        "single_primary_ceiling_runs_per_s": {k: round(v) for k, v in caps.items()},
        "cell_budget_runs_per_s": round(budget), "target": args.target,
        "oversize_tenants": [{"tenant": t, "runs_per_s": round(rates[t])}
                             for t in placement.oversize],
        "cells": cells, "seconds": args.seconds, "seed": args.seed,
        "global": {"kafka_broker_cores_one_cluster": round(
            total * costs.wakeups_per_run * costs.wakeup_broker_ms / 1000.0, 2),
            "wal_mb_s_all_cells": round(total * costs.wal_kb / 1024.0)},
    }


def render(result: Mapping[str, Any], limit: int = 12) -> str:
    load, caps = result["load"], result["single_primary_ceiling_runs_per_s"]
    lines = [
        f"load {load['multiple']:g}x today = {load['runs_per_s']:,.0f} runs/s over "
        f"{load['tenants']:,} tenants (Zipf {load['skew']}), hottest tenant "
        f"{load['hottest_tenant_share']:.1%} of all",
        "one cell at utilisation 1, runs/s: " + ", ".join(f"{k} {v:,}" for k, v in caps.items()),
        f"cell budget ({result['target']:.0%} of its binding resource): "
        f"{result['cell_budget_runs_per_s']:,} runs/s; {len(result['cells'])} cells; "
        f"oversize tenants: {len(result['oversize_tenants'])}",
        "",
    ]
    head = ("cell", "tenants", "runs/s", "hot tenant", "pg cpu", "wal", "dispatch (lock)",
            "partition", "pg wait p99 µs", "dispatch wait p99 ms", "breaks first", "at x")
    rows = []
    cells = sorted(result["cells"], key=lambda c: -max(c["utilisation_model"].values()))
    for c in cells[:limit]:
        u, s = c["utilisation_model"], c["utilisation_sim"]
        rows.append((str(c["cell"]), str(c["tenants"]), f"{c['runs_per_s']:,}",
                     f"{c['hottest_tenant_share']:.0%}",
                     f"{u['pg_cpu']:.2f} ({s['pg_cpu']:.2f})", f"{u['wal']:.2f}",
                     f"{u['dispatcher']:.2f} ({s['dispatcher']:.2f})",
                     f"{u['partition']:.2f} ({s['partition']:.2f})",
                     f"{c['pg_wait_us']['p99']:.1f}",
                     f"{c['dispatch_wait_ms']['p99']:,.1f}"
                     + (f" +{c['dispatch_backlog_at_end']:,} queued"
                        if c["dispatch_overloaded"] else ""),
                     c["breaks_first"], f"{c['at_load_multiple']:.2f}"))
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines.append("  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)))
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    if len(cells) > limit:
        lines.append(f"... {len(cells) - limit} cells more, all below the ones shown "
                     "(bench/results/cells_sim.json has every one)")
    g = result["global"]
    lines += ["", "utilisation: model (simulated); dispatch: the runs' share of one lane (the "
              "share of time a lane's lock was held, rounds' overhead included); +N queued: "
              "runs left waiting for the dispatcher, growing",
              "busiest cells first; 'at x': the multiple of that cell's rate at which its "
              "first resource reaches 1",
              f"one shared Kafka cluster: {g['kafka_broker_cores_one_cluster']} broker cores; "
              f"WAL of all cells: {g['wal_mb_s_all_cells']:,} MB/s"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="0.2 s simulated a cell")
    parser.add_argument("--load", type=float, default=100.0, help="multiple of today's load")
    parser.add_argument("--tenants", type=int, default=10_000)
    parser.add_argument("--skew", type=float, default=0.9, help="Zipf exponent of tenant rates")
    parser.add_argument("--pg-cores", type=int, default=16)
    parser.add_argument("--wal-mb-s", type=float, default=400.0)
    parser.add_argument("--lanes", type=int, default=1,
                        help="dispatch decisions at once a cell (today 1)")
    parser.add_argument("--round-ms", type=float, default=1.0,
                        help="a dispatch round's fixed part, ms")
    parser.add_argument("--target", type=float, default=0.7,
                        help="fill a cell to this share of its binding resource")
    parser.add_argument("--seconds", type=float, default=2.0, help="simulated seconds a cell")
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args()
    if args.quick:
        args.seconds = 0.2
    started = time.perf_counter()
    result = run(args)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    print(render(result))
    path = write_result("cells_sim", result)
    print(f"\n{result['wall_s']} s; written to {path}")


if __name__ == "__main__":
    main()
