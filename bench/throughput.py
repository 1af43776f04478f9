"""Throughput end to end through all five services: N no-op jobs submitted over the public API,
run by an SDK worker; prints submit rate, completion rate and database work per run.

    .venv/bin/python bench/throughput.py [--jobs 20000] [--batch 500] [--concurrency 256]

Needs PostgreSQL and Kafka (`infra/up.sh`). Starts its own services on free ports with a fresh
database and topic prefix, and stops them at the end. Writes bench/results/throughput.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
import uuid
from pathlib import Path

import asyncpg
import httpx

from ostinato.db.migrate import migrate
from ostinato.sdk import Worker, task
from ostinato.telemetry.logging import configure_logging
from ostinato.testing.cluster import Cluster

ROOT = Path(__file__).resolve().parents[1]
BASE_URL = os.environ.get("OSTINATO_DATABASE_URL", "postgresql://ostinato@127.0.0.1:55432/ostinato")
KAFKA = os.environ.get("OSTINATO_KAFKA_BOOTSTRAP", "127.0.0.1:9092")


@task("noop")
async def noop(payload: object) -> None:
    return None


async def db_stats(url: str) -> dict[str, int]:
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow("SELECT xact_commit, tup_inserted, tup_updated, tup_deleted "
                                  "FROM pg_stat_database WHERE datname = current_database()")
        return dict(row)
    finally:
        await conn.close()


async def count_succeeded(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval("SELECT count(*) FROM runs WHERE state = 'succeeded'")
    finally:
        await conn.close()


async def submit_all(api: str, key: str, n: int, submitters: int, batch: int) -> float:
    """Bulk submission as users would do it: POST /v1/jobs/batch, `batch` jobs a request."""
    queue: asyncio.Queue[range] = asyncio.Queue()
    for lo in range(0, n, batch):
        queue.put_nowait(range(lo, min(n, lo + batch)))
    limits = httpx.Limits(max_connections=submitters)
    async with httpx.AsyncClient(base_url=api, timeout=60, limits=limits) as client:
        headers = {"Authorization": f"Bearer {key}"}

        async def submitter() -> None:
            while not queue.empty():
                part = queue.get_nowait()
                jobs = [{"name": f"noop-{i}", "task": "noop"} for i in part]
                r = await client.post("/v1/jobs/batch", json={"jobs": jobs}, headers=headers)
                r.raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(submitter() for _ in range(submitters)))
        return time.perf_counter() - start


async def main(args: argparse.Namespace) -> dict[str, object]:
    name = f"ostinato_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = BASE_URL.rpartition("/")[0] + "/" + name
    await migrate(url)
    cluster = Cluster(database_url=url, kafka_bootstrap=KAFKA,
                      topic_prefix=f"b{uuid.uuid4().hex[:8]}.", log_dir=ROOT / ".cache" / "bench",
                      extra_env={"OSTINATO_LOG_LEVEL": "warning",
                                 "OSTINATO_DB_POOL_SIZE": "20"})
    try:
        await asyncio.to_thread(cluster.start)
        async with httpx.AsyncClient(base_url=cluster.api_url) as c:
            r = await c.post("/v1/tenants", json={"name": "bench"},
                             headers={"Authorization": f"Bearer {cluster.admin_key}"})
            key = r.json()["api_key"]
        worker = Worker(cluster.gateway_url, key, [noop], concurrency=args.concurrency,
                        claim_wait_seconds=1)
        running = asyncio.create_task(worker.run())
        before = await db_stats(url)
        start = time.perf_counter()
        submit_seconds = await submit_all(cluster.api_url, key, args.jobs, args.submitters,
                                          args.batch)
        while (done := await count_succeeded(url)) < args.jobs:
            if time.perf_counter() - start > args.timeout:
                raise TimeoutError(f"only {done}/{args.jobs} runs succeeded")
            await asyncio.sleep(0.2)
        total = time.perf_counter() - start
        after = await db_stats(url)
        await worker.stop()
        await running
    finally:
        await asyncio.to_thread(cluster.stop)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    per_run = {k: round((after[k] - before[k]) / args.jobs, 2) for k in before}
    return {
        "scenario": "throughput", "jobs": args.jobs, "submitters": args.submitters,
        "batch": args.batch,
        "worker_concurrency": args.concurrency,
        "submit_rate_per_s": round(args.jobs / submit_seconds, 1),
        "completion_rate_per_s": round(args.jobs / total, 1),
        "end_to_end_seconds": round(total, 2),
        "db_per_run": per_run,
        "target_runs_per_s": 2000,
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--submitters", type=int, default=4)
    parser.add_argument("--batch", type=int, default=500, help="jobs per submission request")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--timeout", type=float, default=900)
    configure_logging("bench", "warning")
    result = asyncio.run(main(parser.parse_args()))
    print(f"{'jobs':<28}{result['jobs']}")
    print(f"{'submit rate (jobs/s)':<28}{result['submit_rate_per_s']}")
    print(f"{'completion rate (runs/s)':<28}{result['completion_rate_per_s']}"
          f"   target ≥ {result['target_runs_per_s']}")
    print(f"{'end to end (s)':<28}{result['end_to_end_seconds']}")
    print(f"{'per run: commits, inserts':<28}{result['db_per_run']['xact_commit']}, "
          f"{result['db_per_run']['tup_inserted']}")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "throughput.json").write_text(json.dumps(result, indent=2) + "\n")
