"""How long a restart of one service instance takes: SIGTERM → exit, and start → /readyz 200,
for each of the five services, with the tracing collector absent (OSTINATO_OTLP_ENDPOINT on a
closed port) and present (a running OTLP/HTTP collector, e.g. `make infra-up`'s Jaeger).

    .venv/bin/python -m bench.restart [--quick] [--rounds 2] [--collector http://127.0.0.1:4318]
        [--env K=V]

Needs PostgreSQL and Kafka. Starts the services on a fresh database (as bench_cluster does),
makes each of them export a few spans (a tenant created, a job submitted and run by an SDK
worker, so every service has something in its exporter's buffer), then restarts each service
one at a time, `--rounds` times, as an orchestrator would (SIGTERM, wait for the exit, start on
the same port, wait for /readyz). A collector that does not answer must not hold a stop: the
figures with it absent should match those with it present. Writes bench/results/restart.json.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from bench.common import (
    ROOT,
    base_parser,
    bench_cluster,
    distribution,
    log,
    machine,
    service_env,
    table,
    write_result,
)
from tests.helpers.lab.cluster import SERVICES
from tests.helpers.lab.load import fx_job, submit
from tests.helpers.lab.processes import WorkerProc

SCENARIO = "restart"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def restart(cluster: Any, name: str) -> tuple[float, float]:
    """SIGTERM `name`, wait for its exit, start it again on its port, wait for /readyz:
    (seconds to exit, seconds to ready)."""
    proc = cluster.procs[name]
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    stopped = time.monotonic() - began
    port_var = {"api": "API", "worker_gateway": "GATEWAY"}.get(name, name.upper())
    env = {**cluster.env(name), f"OSTINATO_{port_var}_PORT": str(cluster.ports[name])}
    began = time.monotonic()
    with (cluster.log_dir / f"{name}.log").open("ab") as out:
        cluster.procs[name] = subprocess.Popen([sys.executable, "-m", f"services.{name}"],
                                               cwd=ROOT, env=env, stdout=out,
                                               stderr=subprocess.STDOUT)
    cluster.wait_ready(name, seconds=180)
    return stopped, time.monotonic() - began


async def traffic(bench: Any, worker: WorkerProc, n: int) -> None:
    """A few jobs run end to end: spans in every service's exporter."""
    async with bench.client() as client:
        job_ids = await submit(client, [fx_job(f"t{time.monotonic_ns()}-{i}") for i in range(n)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = (await client.get("/v1/runs", params={"limit": 200})).json()["items"]
            done = {r["job_id"] for r in rows if r["state"] == "succeeded"}
            if set(job_ids) <= done:
                return
            await asyncio.sleep(0.2)


async def measure(endpoint: str, rounds: int, env: dict[str, str]) -> dict[str, Any]:
    figures: dict[str, dict[str, list[float]]] = {s: {"stop": [], "ready": []} for s in SERVICES}
    async with bench_cluster(SCENARIO, env={"OSTINATO_OTLP_ENDPOINT": endpoint, **env}) as bench:
        worker = WorkerProc("w", bench.cluster.gateway_url, bench.key, bench.url,
                            bench.cluster.log_dir, concurrency=8, claim_wait_seconds=1)
        await asyncio.to_thread(lambda: worker.start().wait_ready())
        try:
            for r in range(rounds):
                for name in SERVICES:
                    await traffic(bench, worker, 5)
                    stopped, ready = await asyncio.to_thread(restart, bench.cluster, name)
                    figures[name]["stop"].append(stopped)
                    figures[name]["ready"].append(ready)
                    log(SCENARIO, f"{endpoint} round {r}: {name} exit {stopped:.2f} s, "
                                  f"ready {ready:.2f} s")
        finally:
            await asyncio.to_thread(worker.stop)
    return {s: {k: distribution(v, 2) for k, v in f.items()} for s, f in figures.items()}


async def amain() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=None, help="restarts per service (3)")
    parser.add_argument("--collector", default="http://127.0.0.1:4318",
                        help="a running OTLP/HTTP collector")
    args = parser.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)
    env = service_env(args)
    absent = f"http://127.0.0.1:{closed_port()}"
    result = {"machine": await machine(), "env": env, "rounds": rounds,
              "absent": await measure(absent, rounds, env),
              "present": await measure(args.collector, rounds, env)}
    path = write_result(SCENARIO, result)
    rows = []
    for name in SERVICES:
        for key, label in (("stop", "SIGTERM → exit"), ("ready", "start → ready")):
            a, p = result["absent"][name][key], result["present"][name][key]
            rows.append((f"{name} {label}, max (s)", f"{a['max']} / {p['max']}",
                         "collector absent / present"))
    print(table(f"restart of one instance ({rounds} per service)", rows))
    print(f"(written to {path})")


if __name__ == "__main__":
    asyncio.run(amain())
