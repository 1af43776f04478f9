"""How fast the web UI's list pages answer with a large tenant (issue 41 item 6: "list pages
answer fast with 1,000,000 runs in the tenant"): the api in-process (over httpx's ASGI
transport, as bench/ui_sessions.py), one tenant with --jobs jobs made through the API and
--runs runs cloned from their first runs in the database (set-based, as the owner: a mix of
states, one in twenty failed with an error, times spread over the last --days days), VACUUM
ANALYZE, then each page loaded --pages times, interleaved. Prints each page's p50/p99 (the
server's time: nothing but the ASGI call is timed). Figures only: nothing asserted.

    .venv/bin/python -m bench.ui_pages [--quick] [--runs 1000000] [--pages 50]

--quick: 100,000 runs, 20 loads a page. A page the tree does not have (404) is left out.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx

from bench.common import BASE_URL, NOISE, distribution, log, machine, table, write_result
from bench.ui_sessions import ADMIN, APP_URL, OWNER_URL, _login, _on
from ostinato.db.migrate import migrate
from ostinato.db.pool import create_pool
from ostinato.eventlog.store import EventStore
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from services.api.app import create_app

SCENARIO = "ui_pages"

# One row a job to copy from: the job and its first run (made through the API).
TEMPLATES = """
CREATE TEMP TABLE run_templates AS
SELECT row_number() OVER (ORDER BY j.id) - 1 AS n, j.tenant_id, j.id AS job_id, j.task, j.pool,
       j.priority, r.payload_ref
FROM jobs j JOIN runs r ON r.job_id = j.id
"""

# Every generated run copies its job's template and changes what a list shows. States by
# share: nineteen in twenty succeeded, one in twenty dead-lettered with an error; a few
# waiting or running, as a busy tenant's are.
CLONE_RUNS = """
INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for,
                  state, attempt, fencing_token, worker_id, last_error, scheduled_at, queued_at,
                  started_at, finished_at, updated_at, version, trigger, failures)
SELECT gen_random_uuid(), t.tenant_id, t.job_id, t.task, t.pool, t.priority, t.payload_ref,
       a.at, s.state, 1, 1, CASE WHEN s.state = 'queued' THEN NULL ELSE 'w-1' END,
       CASE WHEN s.state = 'dead_lettered' THEN jsonb_build_object(
           'type', 'ValueError', 'message', 'bad input in row ' || g) END,
       a.at, a.at, CASE WHEN s.state = 'queued' THEN NULL ELSE a.at END,
       CASE WHEN s.state IN ('succeeded', 'dead_lettered') THEN a.at + interval '1 second' END,
       a.at, 3, 'manual', CASE WHEN s.state = 'dead_lettered' THEN 1 ELSE 0 END
FROM generate_series(1, $1::int) AS g
CROSS JOIN LATERAL (SELECT $2::timestamptz - (g * $3::float8) * interval '1 second' AS at) a
CROSS JOIN LATERAL (SELECT CASE WHEN g % 20 = 0 THEN 'dead_lettered'
                                WHEN g % 97 = 0 THEN 'running'
                                WHEN g % 89 = 0 THEN 'queued'
                                ELSE 'succeeded' END AS state) s
JOIN run_templates t ON t.n = g % $4::int
"""


async def _load(http: httpx.AsyncClient, path: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    r = await http.get(path)
    return (time.perf_counter() - t0) * 1000, r.status_code


async def seed(http: httpx.AsyncClient, owner: asyncpg.Connection, key: str, *, jobs: int,
               runs: int, days: float) -> dict[str, str]:
    h = {"Authorization": f"Bearer {key}"}
    at = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    first_job = ""
    for i in range(jobs):
        job = {"name": f"nightly-report-{i}", "task": f"task.{i % 7}", "schedule": {"at": at}}
        r = await http.post("/v1/jobs", json=job, headers=h)
        assert r.status_code == 201, r.text
        first_job = first_job or r.json()["id"]
        r = await http.post(f"/v1/jobs/{r.json()['id']}/trigger", headers=h)
        assert r.status_code in (200, 201, 202), r.text
    await owner.execute(TEMPLATES)
    step = days * 86400 / runs
    t0 = time.perf_counter()
    done = 0
    while done < runs:  # in slices: one statement per 100,000 runs, progress between
        n = min(100_000, runs - done)
        now = datetime.now(UTC) - timedelta(seconds=done * step)
        await owner.execute(CLONE_RUNS, n, now, step, jobs)
        done += n
        log(SCENARIO, f"seeded {done:,} of {runs:,} runs ({time.perf_counter() - t0:.0f} s)")
    await owner.execute("VACUUM ANALYZE runs")
    await owner.execute("VACUUM ANALYZE jobs")
    return {"job": first_job}


def pages(seeded: dict[str, str]) -> dict[str, str]:
    return {"runs": "/ui/runs",
            "runs_failed": "/ui/runs?state=dead_lettered",
            "runs_failed_oldest": "/ui/runs?state=dead_lettered&order=oldest",
            "runs_running": "/ui/runs?state=running",
            "runs_cancelled": "/ui/runs?state=cancelled",  # a state no run is in
            "runs_of_a_job": f"/ui/runs?job_id={seeded['job']}",
            "runs_by_error_type": "/ui/runs?error_type=ValueError",
            "jobs": "/ui/jobs",
            "dead_letters": "/ui/dead-letters",
            "overview": "/ui/overview"}


async def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 runs, 20 loads a page")
    parser.add_argument("--runs", type=int, default=None, help="runs in the tenant (1,000,000)")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--days", type=float, default=30.0, help="the runs' span")
    parser.add_argument("--pages", type=int, default=None, help="loads of each page (50)")
    args = parser.parse_args()
    runs = args.runs or (100_000 if args.quick else 1_000_000)
    loads = args.pages or (20 if args.quick else 50)
    name = f"bench_ui_pages_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}" OWNER "{urlsplit(OWNER_URL).username}"')
    figures: dict[str, Any] = {}
    errors: dict[str, int] = {}  # page -> answers other than 200 (a bug to report, not to time)
    try:
        await migrate(_on(OWNER_URL, name))
        owner = await asyncpg.connect(_on(OWNER_URL, name))
        pool = await create_pool(_on(APP_URL, name), max_size=4)
        service = Service("api", Settings(database_url=_on(APP_URL, name), admin_key=ADMIN,
                                          api_rate_per_second=0))
        service.pool = pool
        app = create_app(service, EventStore(service.clock, service.settings.topics))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://api.bench", timeout=120) as http:
            r = await http.post("/v1/tenants", json={"name": "bench"},
                                headers={"Authorization": f"Bearer {ADMIN}"})
            key = r.json()["api_key"]
            seeded = await seed(http, owner, key, jobs=args.jobs, runs=runs, days=args.days)
            await _login(http, key)
            timings: dict[str, list[float]] = {}
            for _ in range(loads + 2):  # interleaved; the first two rounds warm up
                for page, path in pages(seeded).items():
                    ms, status = await _load(http, path)
                    if status == 404:
                        continue  # a page this tree does not have
                    if status != 200:
                        errors[page] = errors.get(page, 0) + 1
                    timings.setdefault(page, []).append(ms)
            figures = {page: distribution(ms[2:], 1) for page, ms in timings.items()}
        await owner.close()
        await pool.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    return {"scenario": SCENARIO, "machine": await machine(), "noise": NOISE, "runs": runs,
            "jobs": args.jobs, "loads": loads, "pages_ms": figures, "errors": errors}


def report(result: dict[str, Any]) -> str:
    rows = [(page, f"p50 {d['p50']} p99 {d['p99']}", f"max {d['max']}, n {d['n']}"
             + (f", {result['errors'][page]} not 200" if page in result["errors"] else ""))
            for page, d in result["pages_ms"].items()]
    return table(f"web UI pages, server time in ms, {result['runs']:,} runs in the tenant", rows)


if __name__ == "__main__":
    outcome = asyncio.run(main())
    write_result(SCENARIO, outcome)
    print(report(outcome))
