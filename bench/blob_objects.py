"""What keeping large payloads in object storage costs a submission (issue 38 item 4): jobs
submitted with a payload of --size bytes (8 KiB; over the default 4 KiB inline limit), the
payload inline in PostgreSQL's `blobs` row (as before) or in the real S3 server (the local
SeaweedFS, `infra/up.sh s3`) with only its reference in the row.

No services: a fresh migrated database, the api's submission code (`ostinato.jobs.submit_job`)
called by --submitters concurrent tasks in this process, --jobs jobs a mode (2,000; --quick
500). Each payload is distinct (a counter in it) and incompressible (random base64, as TOAST
would shrink a repeated character to nothing), so every S3 submission puts an object. Prints
jobs/s, submit latency p50/p99 and this process's CPU a job (obstore's threads counted), and
the hot bytes a job leaves in `blobs` (pg_total_relation_size). Figures only: nothing asserted.

    . infra/env.sh && .venv/bin/python -m bench.blob_objects [--quick] [--size 8192]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import time
import uuid
from typing import Any

from bench.common import distribution, log, machine, migrated_database, table, write_result
from ostinato.bus.topics import Topics
from ostinato.clock import SystemClock
from ostinato.db.pool import create_pool
from ostinato.eventlog.store import BlobObjects, EventStore, use_blob_objects
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.objects import open_object_store
from ostinato.tenancy import create_tenant
from tests.helpers.objects import s3_url

SCENARIO = "blob_objects"


async def one_mode(url: str, mode: str, jobs: int, size: int, submitters: int
                   ) -> dict[str, Any]:
    pool = await create_pool(url, max_size=submitters + 2)
    store = EventStore(SystemClock(), Topics())
    objects = open_object_store(s3_url(f"bench/{uuid.uuid4().hex}")) if mode == "s3" else None
    before = use_blob_objects(BlobObjects(objects, 4096) if objects else None)
    try:
        async with pool.acquire() as conn:
            tenant_id, _ = await create_tenant(conn, store, f"bench-{mode}-{uuid.uuid4().hex[:6]}",
                                              actor="bench")
            blobs_before = await conn.fetchval("SELECT pg_total_relation_size('blobs')")
        # incompressible (random base64): TOAST would shrink a repeated character to nothing
        filler = base64.b64encode(os.urandom(size * 3 // 4)).decode()
        latencies: list[float] = []
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(jobs):
            queue.put_nowait(i)

        async def submitter() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                request = JobRequest(name=f"job-{i}", payload={"i": i, "fill": filler})
                began = time.perf_counter()
                async with pool.acquire() as conn:
                    await submit_job(conn, store, SystemClock(), tenant_id=tenant_id,
                                     request=request, pools=("default",),
                                     max_payload_bytes=1 << 20, actor="bench")
                latencies.append((time.perf_counter() - began) * 1000)

        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(submitter() for _ in range(submitters)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        async with pool.acquire() as conn:
            await conn.execute("VACUUM ANALYZE blobs")
            blobs_after = await conn.fetchval("SELECT pg_total_relation_size('blobs')")
            in_objects = await conn.fetchval("SELECT count(*) FROM blobs WHERE sha256 IS NOT NULL"
                                             " AND tenant_id = $1", tenant_id)
        return {"mode": mode, "jobs": jobs, "jobs_per_s": round(jobs / wall, 1),
                "latency_ms": distribution(latencies),
                "cpu_ms_per_job": round(cpu / jobs * 1000, 3),
                "blobs_bytes_per_job": round((blobs_after - blobs_before) / jobs, 1),
                "payloads_in_objects": in_objects}
    finally:
        use_blob_objects(before)
        if objects is not None:
            await objects.close()
        await pool.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--size", type=int, default=8192, help="payload bytes (about)")
    parser.add_argument("--submitters", type=int, default=8)
    args = parser.parse_args()
    jobs = args.jobs or (500 if args.quick else 2000)
    results = []
    async with migrated_database() as url:
        for mode in ("inline", "s3", "inline", "s3"):  # interleaved: drift hits both alike
            log(SCENARIO, f"{mode}: {jobs} jobs of {args.size} B, {args.submitters} at a time")
            results.append(await one_mode(url, mode, jobs, args.size, args.submitters))
    rows = []
    for r in results:
        lat = r["latency_ms"]
        rows += [(f"{r['mode']}: jobs/s", r["jobs_per_s"], ""),
                 (f"{r['mode']}: submit p50 / p99 ms", f"{lat['p50']} / {lat['p99']}", ""),
                 (f"{r['mode']}: CPU ms a job (this process)", r["cpu_ms_per_job"], ""),
                 (f"{r['mode']}: blobs bytes a job (hot)", r["blobs_bytes_per_job"], ""),
                 (f"{r['mode']}: payloads in S3", r["payloads_in_objects"], "")]
    print(table(f"Submission with an {args.size} B payload: inline vs S3", rows))
    write_result(SCENARIO, {"machine": await machine(), "size": args.size,
                            "submitters": args.submitters, "results": results})


if __name__ == "__main__":
    asyncio.run(main())
