"""What a web UI page costs with its session read from PostgreSQL (issue 39: `ui_sessions`,
migration 0049) against the process's memory before: the api in-process (over httpx's ASGI
transport, its pool connected as the services' role to a fresh migrated database), one tenant
with 20 jobs and a run each, a browser's session; timed: GET /ui/runs (a list page), GET
/ui/keys (a light page), the login (POST /ui/login), and on a tree that has the table the
session read alone (`ostinato.stores.ui_sessions.touch`, one statement). Figures only.

    .venv/bin/python -m bench.ui_sessions [--pages 300] [--repeat 3]

Before against after, alternating on one machine (the earlier commit's own services and
SDK, this bench; bench/ab.py):

    .venv/bin/python -m bench.ab --before <commit> --scenario ui_sessions --rounds 3 \\
        --keys runs_page_ms.p50,keys_page_ms.p50,login_ms.p50 -- --repeat 1
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx

from bench.common import BASE_URL, NOISE, distribution, log, machine, table, write_result
from ostinato.db.migrate import migrate
from ostinato.db.pool import create_pool
from ostinato.eventlog.store import EventStore
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from services.api.app import create_app

SCENARIO = "ui_sessions"
OWNER_URL = os.environ.get("OSTINATO_OWNER_DATABASE_URL",
                           "postgresql://ostinato_owner@127.0.0.1:15432/ostinato")
APP_URL = os.environ.get("OSTINATO_DATABASE_URL",
                         "postgresql://ostinato_app@127.0.0.1:15432/ostinato")
ADMIN = "bench-admin-key"
LOGIN = re.compile(r'name="_login" value="([^"]+)"')


def _on(url: str, database: str) -> str:
    return urlsplit(url)._replace(path=f"/{database}").geturl()


async def _timed(call: Any) -> float:
    t0 = time.perf_counter()
    await call
    return (time.perf_counter() - t0) * 1000


async def _login(http: httpx.AsyncClient, key: str) -> float:
    """One login (the form, then its POST); the POST's milliseconds."""
    http.cookies.clear()
    form = await http.get("/ui/login")
    token = LOGIN.search(form.text)
    assert token, form.text
    t0 = time.perf_counter()
    r = await http.post("/ui/login", data={"_login": token.group(1), "api_key": key})
    ms = (time.perf_counter() - t0) * 1000
    assert r.status_code == 303, r.text
    return ms


async def _page(http: httpx.AsyncClient, path: str) -> float:
    t0 = time.perf_counter()
    r = await http.get(path)
    ms = (time.perf_counter() - t0) * 1000
    assert r.status_code == 200, (path, r.status_code, r.text[:300])
    return ms


async def _session_reads(pool: asyncpg.Pool, session_id: str, count: int) -> list[float] | None:
    """The session read alone, `count` times (None on a tree without the table)."""
    try:
        from ostinato.stores import ui_sessions  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return None
    digest = hashlib.sha256(session_id.encode()).digest()
    hour, day = timedelta(hours=1), timedelta(hours=12)
    out = []
    async with pool.acquire() as conn:
        for _ in range(count):
            t0 = time.perf_counter()
            row = await ui_sessions.touch(conn, digest, None, idle=hour, max_age=day,
                                          every=timedelta(minutes=1))
            out.append((time.perf_counter() - t0) * 1000)
            assert row is not None
    return out


async def one_run(http: httpx.AsyncClient, pool: asyncpg.Pool, key: str,
                  pages: int) -> dict[str, Any]:
    logins = [await _login(http, key) for _ in range(max(10, pages // 10))]
    runs: list[float] = []
    keys: list[float] = []
    for _ in range(pages):  # interleaved, so drift hits both pages alike
        runs.append(await _page(http, "/ui/runs"))
        keys.append(await _page(http, "/ui/keys"))
    session_id = http.cookies.get("ostinato_session", path="/ui")
    reads = await _session_reads(pool, session_id or "", pages) if session_id else None
    return {"runs_page_ms": distribution(runs, 2), "keys_page_ms": distribution(keys, 2),
            "login_ms": distribution(logins, 2),
            "session_read_ms": distribution(reads, 3) if reads is not None else None}


async def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pages", type=int, default=300, help="page loads of each page a run")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    name = f"bench_ui_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}" OWNER "{urlsplit(OWNER_URL).username}"')
    runs = []
    try:
        await migrate(_on(OWNER_URL, name))
        pool = await create_pool(_on(APP_URL, name), max_size=4)
        service = Service("api", Settings(database_url=_on(APP_URL, name), admin_key=ADMIN,
                                          api_rate_per_second=0))
        service.pool = pool
        app = create_app(service, EventStore(service.clock, service.settings.topics))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://api.bench") as http:
            r = await http.post("/v1/tenants", json={"name": "bench"},
                                headers={"Authorization": f"Bearer {ADMIN}"})
            key = r.json()["api_key"]
            h = {"Authorization": f"Bearer {key}"}
            at = (datetime.now(UTC) + timedelta(days=1)).isoformat()
            for i in range(20):  # a list page with rows on it
                r = await http.post("/v1/jobs", json={"name": f"j{i}", "schedule": {"at": at}},
                                    headers=h)
                assert r.status_code == 201, r.text
                r = await http.post(f"/v1/jobs/{r.json()['id']}/trigger", headers=h)
                assert r.status_code in (200, 201, 202), r.text
            await one_run(http, pool, key, 30)  # warm up
            for n in range(args.repeat):
                log(SCENARIO, f"repetition {n + 1}/{args.repeat}: {args.pages} page loads each")
                runs.append(await one_run(http, pool, key, args.pages))
        await pool.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    return {"scenario": SCENARIO, "machine": await machine(), "noise": NOISE,
            "pages": args.pages, "runs": runs}


def report(result: dict[str, Any]) -> str:
    rows = []
    for i, run in enumerate(result["runs"], 1):
        for figure in ("runs_page_ms", "keys_page_ms", "login_ms", "session_read_ms"):
            d = run[figure]
            if d is not None:
                rows.append((f"#{i} {figure}", f"p50 {d['p50']} p99 {d['p99']}",
                             f"mean {d['mean']}, n {d['n']}"))
    return table("web UI pages with their session (in-process api, ASGI)", rows)


if __name__ == "__main__":
    outcome = asyncio.run(main())
    write_result(SCENARIO, outcome)
    print(report(outcome))
