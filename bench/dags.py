"""DAG fan-out latency through all five services (docs/DAGS.md): in a wide DAG (one root, `--width`
children, one join), the time from the root node's end to each child node's start, and from
the last child's end to the join's start, by the database's clock; and the DAG run's total.

    .venv/bin/python -m bench.dags [--quick] [--width 200] [--repeat 3]

Needs PostgreSQL and Kafka (`infra/up.sh`). Each repetition: a fresh cluster and database, an
SDK worker in this process serving the no-op task (concurrency 256), a warm-up of 2,000 no-op
jobs (bench.start_lag.warm_up), then the DAG defined and run through the API. The hop includes
the scheduler's `advance_dags` poll (every `OSTINATO_SCHEDULER_POLL_SECONDS`), the
dispatcher's round and the worker's claim. Prints
p50/p99/max of both hops; writes bench/results/dags.json.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

from bench.common import (
    base_parser,
    bench_cluster,
    distribution,
    log,
    machine,
    repeat_count,
    sdk_worker,
    table,
    write_result,
)
from bench.start_lag import warm_up
from ostinato import eventloop

SCENARIO = "dags"


async def one(width: int) -> dict[str, Any]:
    async with bench_cluster(SCENARIO) as bench, sdk_worker(bench), bench.client() as http:
        await warm_up(bench, SCENARIO)
        nodes = [{"key": "root", "task": "noop"}, {"key": "join", "task": "noop"}]
        nodes += [{"key": f"c{i:04d}", "task": "noop"} for i in range(width)]
        edges = [{"from": "root", "to": f"c{i:04d}"} for i in range(width)]
        edges += [{"from": f"c{i:04d}", "to": "join"} for i in range(width)]
        r = await http.post("/v1/dags", json={"name": "wide", "nodes": nodes, "edges": edges})
        r.raise_for_status()
        started = time.monotonic()
        r = await http.post(f"/v1/dags/{r.json()['id']}/runs")
        r.raise_for_status()
        dag_run = r.json()["id"]
        while True:
            view = (await http.get(f"/v1/dag-runs/{dag_run}")).json()
            if view["state"] in ("succeeded", "failed", "cancelled"):
                break
            if time.monotonic() - started > 600:
                raise RuntimeError(f"DAG run not finished: {view['progress']}")
            await asyncio.sleep(0.2)
        assert view["state"] == "succeeded", view["progress"]
        conn = await asyncpg.connect(bench.url)
        try:
            rows = await conn.fetch(
                "SELECT n.key, r.started_at, r.finished_at FROM dag_run_nodes n "
                "JOIN runs r ON r.id = n.run_id WHERE n.dag_run_id = $1", view["id"])
            total = await conn.fetchval(
                "SELECT extract(epoch FROM finished_at - created_at) FROM dag_runs WHERE id = $1",
                view["id"])
        finally:
            await conn.close()
    at = {r["key"]: r for r in rows}
    root_end = at["root"]["finished_at"]
    children = [r for k, r in at.items() if k.startswith("c")]
    to_children = [(c["started_at"] - root_end).total_seconds() * 1000 for c in children]
    last_child = max(c["finished_at"] for c in children)
    to_join = (at["join"]["started_at"] - last_child).total_seconds() * 1000
    return {"width": width, "parent_end_to_child_start_ms": distribution(to_children),
            "last_child_end_to_join_start_ms": round(to_join, 1),
            "dag_run_seconds": round(float(total), 2)}


async def amain() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--width", type=int, default=None)
    args = parser.parse_args()
    width = args.width or (50 if args.quick else 200)
    runs = []
    for i in range(repeat_count(args)):
        log(SCENARIO, f"repetition {i + 1}: width {width}")
        runs.append(await one(width))
    last = runs[-1]
    hop = last["parent_end_to_child_start_ms"]
    print(table(f"DAG hops, width {width} (last of {len(runs)} repetitions)", [
        ("parent end → child start p50", hop["p50"], "ms"),
        ("parent end → child start p99", hop["p99"], "ms"),
        ("parent end → child start max", hop["max"], "ms"),
        ("last child end → join start", last["last_child_end_to_join_start_ms"], "ms"),
        ("DAG run, created → finished", last["dag_run_seconds"], "s"),
    ]))
    write_result(SCENARIO, {"machine": await machine(), "runs": runs})


if __name__ == "__main__":
    eventloop.run(amain())
