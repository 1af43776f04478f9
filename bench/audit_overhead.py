"""What the audit trail costs a control action: the api in-process (over httpx's ASGI transport,
its pool connected as the services' role to a fresh migrated database), the same calls timed
with each route's audit spec in place and removed, in alternating rounds so drift in the
machine's load hits both alike. Calls: POST /v1/jobs (one-off jobs a day ahead) and POST
/v1/jobs/{id}/pause + /resume (a before/after read each). Figures only.

    .venv/bin/python -m bench.audit_overhead [--calls 300] [--rounds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
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

OWNER_URL = os.environ.get("OSTINATO_OWNER_DATABASE_URL",
                           "postgresql://ostinato_owner@127.0.0.1:15432/ostinato")
APP_URL = os.environ.get("OSTINATO_DATABASE_URL",
                         "postgresql://ostinato_app@127.0.0.1:15432/ostinato")
ADMIN = "bench-admin-key"


def _on(url: str, database: str) -> str:
    return urlsplit(url)._replace(path=f"/{database}").geturl()


def _switch(app: Any, on: bool, saved: dict[Any, Any]) -> None:
    """Put every route's audit spec back (on) or take it out (off)."""
    for route in app.routes:
        for handler in getattr(route, "route_handlers", ()):
            if on and handler in saved:
                handler.opt["audit"] = saved[handler]
            elif not on and "audit" in handler.opt:
                saved[handler] = handler.opt.pop("audit")


async def _round(http: httpx.AsyncClient, h: dict[str, str], calls: int) -> dict[str, list[float]]:
    at = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    out: dict[str, list[float]] = {"create": [], "pause+resume": []}
    job = None
    for i in range(calls):
        t0 = time.perf_counter()
        r = await http.post("/v1/jobs", json={"name": f"j{i}", "schedule": {"at": at}},
                            headers=h)
        out["create"].append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 201, r.text
        job = job or r.json()["id"]
        t0 = time.perf_counter()
        assert (await http.post(f"/v1/jobs/{job}/pause", headers=h)).status_code == 200
        assert (await http.post(f"/v1/jobs/{job}/resume", headers=h)).status_code == 200
        out["pause+resume"].append((time.perf_counter() - t0) * 1000)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    name = f"bench_audit_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}" OWNER "{urlsplit(OWNER_URL).username}"')
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
            h = {"Authorization": f"Bearer {r.json()['api_key']}"}
            await _round(http, h, 50)  # warm up
            saved: dict[Any, Any] = {}
            ms: dict[str, dict[str, list[float]]] = {"on": {}, "off": {}}
            for n in range(args.rounds * 2):
                mode = "on" if n % 2 == 0 else "off"
                _switch(app, mode == "on", saved)
                log("audit_overhead", f"round {n + 1}: audit {mode}")
                for call, values in (await _round(http, h, args.calls)).items():
                    ms[mode].setdefault(call, []).extend(values)
            _switch(app, True, saved)
        await pool.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    result: dict[str, Any] = {"machine": await machine(), "noise": NOISE, "calls": {}}
    rows = []
    for call in ms["on"]:
        on, off = distribution(ms["on"][call], 2), distribution(ms["off"][call], 2)
        result["calls"][call] = {"audit_on_ms": on, "audit_off_ms": off}
        rows.append((f"{call} p50 ms (audit on / off)", f"{on['p50']} / {off['p50']}",
                     f"x{on['p50'] / off['p50']:.2f}"))
        rows.append((f"{call} mean ms (audit on / off)", f"{on['mean']} / {off['mean']}",
                     f"x{on['mean'] / off['mean']:.2f}"))
    print(table("audit trail overhead per control action", rows))
    write_result("audit_overhead", result)


if __name__ == "__main__":
    asyncio.run(main())
