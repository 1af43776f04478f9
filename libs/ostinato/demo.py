"""The demo tenant, its jobs, and a worker that runs them: what `make up` shows a newcomer.

    python -m ostinato.demo worker     # run the demo handlers (key from OSTINATO_DEMO_API_KEY
                                       # or the file written by `ostinato demo --out`; the
                                       # gateway from OSTINATO_GATEWAY_URL, else _PORT)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from ostinato.clock import SystemClock
from ostinato.sdk import PermanentError, Worker, current, task
from ostinato.telemetry.logging import configure_logging, get_logger

DEMO_TENANT = "demo"
log = get_logger("ostinato.demo")


def demo_jobs(now: datetime) -> list[dict[str, Any]]:
    soon = (now + timedelta(minutes=1)).isoformat()
    later = (now + timedelta(minutes=5)).isoformat()
    return [
        {"name": "hello", "payload": {"greeting": "hello from Ostinato"}},
        {"name": "nightly-report", "task": "report", "schedule": {"at": soon},
         "payload": {"report": "usage", "format": "csv"}},
        {"name": "send-invoice", "task": "invoice", "schedule": {"at": later},
         "payload": {"invoice": 1001, "amount_cents": 4200}},
        {"name": "minutely-report", "task": "report",
         "schedule": {"cron": "* * * * *", "timezone": "Europe/Berlin"},
         "payload": {"report": "queue depth", "format": "json"}},
    ]


async def bootstrap_demo(api_url: str, admin_key: str) -> dict[str, Any]:
    """Create the demo tenant and its jobs through the public API; returns what to print."""
    async with httpx.AsyncClient(base_url=api_url, timeout=10) as client:
        r = await client.post("/v1/tenants", json={"name": DEMO_TENANT},
                              headers={"Authorization": f"Bearer {admin_key}"})
        if r.status_code == 409:
            raise SystemExit("the demo tenant already exists: its key was printed when it was "
                             "created (see .cache/demo.json), or reset with `make clean`")
        r.raise_for_status()
        tenant = r.json()
        headers = {"Authorization": f"Bearer {tenant['api_key']}"}
        jobs = []
        for body in demo_jobs(SystemClock().now()):
            created = await client.post("/v1/jobs", json=body, headers=headers)
            created.raise_for_status()
            jobs.append({"id": created.json()["id"], "name": body["name"],
                         "next_run_at": created.json()["next_run_at"]})
    return {"tenant_id": tenant["id"], "tenant": DEMO_TENANT, "api_key": tenant["api_key"],
            "api": api_url, "openapi": f"{api_url}/schema", "jobs": jobs,
            "kafka": tenant.get("kafka")}


@task("hello")
async def hello(payload: dict[str, Any]) -> dict[str, Any]:
    ctx = current()
    log.info("hello", greeting=payload.get("greeting"), attempt=ctx.attempt)
    return {"echo": payload.get("greeting"), "run_id": ctx.run_id}


@task("report")
async def report(payload: dict[str, Any]) -> dict[str, Any]:
    await current().heartbeat()
    await asyncio.sleep(0.2)  # pretend to work
    return {"rows": 42, "format": payload.get("format", "csv")}


@task("invoice")
async def invoice(payload: dict[str, Any]) -> dict[str, Any]:
    if payload.get("amount_cents", 0) <= 0:
        raise PermanentError("an invoice needs a positive amount", type="invalid_amount")
    return {"sent": payload["invoice"], "idempotency_key": current().idempotency_key}


DEMO_TASKS = [hello, report, invoice]


def _demo_key() -> str:
    key = os.environ.get("OSTINATO_DEMO_API_KEY")
    if key:
        return key
    path = Path(os.environ.get("OSTINATO_DEMO_FILE", ".cache/demo.json"))
    if path.exists():
        return json.loads(path.read_text())["api_key"]
    raise SystemExit("no demo API key: set OSTINATO_DEMO_API_KEY or run `ostinato demo --out "
                     f"{path}` first")


def gateway_url(environ: dict[str, str] | None = None) -> str:
    """OSTINATO_GATEWAY_URL, else the gateway the services were configured with
    (OSTINATO_GATEWAY_PORT on 127.0.0.1): a demo worker that talked to 8081 whatever the
    port said claimed nothing, or from another clone's gateway."""
    env = os.environ if environ is None else environ
    return env.get("OSTINATO_GATEWAY_URL") or \
        f"http://127.0.0.1:{env.get('OSTINATO_GATEWAY_PORT') or 8081}"


def main() -> None:
    if sys.argv[1:] != ["worker"]:
        raise SystemExit("usage: python -m ostinato.demo worker")
    configure_logging("demo-worker")
    Worker(gateway_url(), _demo_key(), DEMO_TASKS, concurrency=8).run_forever()


if __name__ == "__main__":
    main()
