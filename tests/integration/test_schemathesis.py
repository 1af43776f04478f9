"""No 5xx on any input, and the API answers only what its OpenAPI document says (issue
"Security and hardening"): schemathesis generates requests from schemas/openapi.json's live
copy and sends them over HTTP to a running api with a tenant's key, in all its phases
(examples, coverage, fuzzing: valid and invalid data; stateful: chains of calls following the
links it infers). Bounded per operation so the run takes minutes on two cores; the counts are
printed for the issue's closing note. Each nonconformance it found has a regression case in
test_api_contract.py.

The worker-gateway gets the same treatment against its own document (issue 42: a claim naming
an impossible pool was a 500, `/v1/worker/tasks` was documented as a string), stateless, with a
worker key: its regression cases are in test_worker_protocol_fuzz.py and
tests/unit/test_gateway_openapi.py."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from ostinato.clock import SystemClock
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.tenancy import issue_key
from ostinato.wire import worker as p
from services.scheduler.tick import fire_due
from services.worker_gateway.app import create_app as create_gateway_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.wakeups import ReadySignals
from tests.helpers.api import ADMIN, auth
from tests.helpers.integration import dispatch, new_job, new_tenant, store

pytestmark = pytest.mark.integration

schemathesis = pytest.importorskip("schemathesis")

CHECKS = tuple(os.environ.get("OSTINATO_SCHEMATHESIS_CHECKS", ",".join((
    "not_a_server_error", "status_code_conformance", "content_type_conformance",
    "response_schema_conformance", "unsupported_method", "allow_header_conformance"))).split(","))
PHASES = ("examples", "coverage", "fuzzing", "stateful")
GATEWAY_PHASES = ("examples", "coverage", "fuzzing")  # stateless: it has no links to follow
MAX_EXAMPLES = int(os.environ.get("OSTINATO_SCHEMATHESIS_EXAMPLES", "25"))  # per operation
SEED = 20261202  # the same cases on every run: a red build is reproducible
# One worker: hypothesis parses lambda sources with `ast`, whose recursion guard CPython 3.11
# keeps per interpreter, not per thread ("AST constructor recursion depth mismatch" with two).


async def run_schemathesis(api_url: str, key: str, config: Path, report: Path,
                           *only: str, phases: tuple[str, ...] = PHASES) -> tuple[int, str]:
    """Schemathesis over HTTP against the document the server at `api_url` serves itself."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
        f"{api_url}/schema/openapi.json", "--url", api_url, "-H", f"Authorization: Bearer {key}",
        "--phases", ",".join(phases), "--mode", "all", "--checks", ",".join(CHECKS),
        "--max-examples", str(MAX_EXAMPLES), "--seed", str(SEED), "--workers", "1",
        "--suppress-health-check", "all", "--generation-database", "none",
        "--request-timeout", "60", "--no-color", "--output-truncate", "true",
        "--report", "json", "--report-json-path", str(report), *only,
        cwd=report.parent,  # its own cache directory (.schemathesis) goes there, not into the tree
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await proc.communicate()
    finally:
        if proc.returncode is None:  # the test was cut short: leave no generator running
            proc.kill()
            await proc.wait()
    return proc.returncode or 0, out.decode(errors="replace")


async def seed(api_url: str) -> tuple[str, dict[str, str]]:
    """A tenant with a job and a run, so that the operations on a run reach their logic (not
    only their 404): their ids are given to schemathesis as the `job_id` and `run_id`."""
    async with httpx.AsyncClient(base_url=api_url) as client:
        r = await client.post("/v1/tenants", json={"name": "schemathesis"}, headers=auth(ADMIN))
        assert r.status_code == 201, r.text
        key = r.json()["api_key"]
        job = await client.post("/v1/jobs", headers=auth(key), json={
            "name": "fuzzed", "schedule": {"cron": "0 9 * * *", "timezone": "Europe/Berlin"}})
        assert job.status_code == 201, job.text
        run = await client.post(f"/v1/jobs/{job.json()['id']}/trigger", headers=auth(key))
        assert run.status_code in (200, 201), run.text
    return key, {"job_id": job.json()["id"], "run_id": run.json()["run_id"]}


def summary(report: dict[str, Any]) -> dict[str, Any]:
    cases = report.get("test_cases", {})
    return {"operations": report.get("operations", {}).get("tested"),
            "cases": cases.get("generated"), "with_failures": cases.get("with_failures"),
            "failures": len(report.get("failures", [])), "errors": len(report.get("errors", [])),
            "phases": {k: v.get("status") for k, v in report.get("phases", {}).items()},
            "seconds": round(report.get("running_time", 0.0), 1)}


@pytest.mark.timeout(1200)  # two passes of minutes each on a loaded two-core machine
async def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(
        api_url: str, tmp_path: Path) -> None:
    key, ids = await seed(api_url)
    config = tmp_path / "schemathesis.toml"
    config.write_text("[parameters]\n" + "".join(f'{k} = "{v}"\n' for k, v in ids.items()))
    passes = {  # the tenant's key on every operation; the admin key on the admin-only ones
        "tenant": (key, ()),
        "admin": (ADMIN, ("--include-path-regex", "^/v1/tenants")),
    }
    results: dict[str, tuple[int, dict[str, Any]]] = {}
    for name, (bearer, only) in passes.items():
        report_path = tmp_path / f"{name}.json"
        code, out = await run_schemathesis(api_url, bearer, config, report_path, *only)
        print(out[-12_000:])
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        results[name] = (code, report)
        print(f"schemathesis {name} pass:", json.dumps(summary(report)))
    for name, (code, report) in results.items():
        assert summary(report)["failures"] == 0 and summary(report)["errors"] == 0, \
            json.dumps(report.get("failures", [])[:20] + report.get("errors", [])[:5],
                       indent=1)[:8000]
        assert code == 0, name


class NoWaitClock(SystemClock):
    """The system clock, but each monotonic reading is `MAX_CLAIM_WAIT_SECONDS` past the one
    before: a claim's long poll is over at its first check. A fuzzed `wait_seconds` (up to
    30 s, on every generated claim) would otherwise cost the run that long per case."""

    def __init__(self) -> None:
        self._ahead = 0.0

    def monotonic(self) -> float:
        self._ahead += p.MAX_CLAIM_WAIT_SECONDS
        return super().monotonic() + self._ahead


@pytest.fixture
async def gateway_url(pool: asyncpg.Pool, db_url: str) -> AsyncIterator[str]:
    """The worker-gateway served on a free port of 127.0.0.1, over the test's pool."""
    service = Service("worker-gateway", Settings(database_url=db_url, admin_key=ADMIN),
                      clock=NoWaitClock())
    service.pool = pool
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    server = HttpServer(create_gateway_app(service, attempts, ReadySignals()), "127.0.0.1", 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.stop()


async def seed_gateway(pool: asyncpg.Pool, gateway_url: str) -> tuple[str, dict[str, str]]:
    """A tenant's worker key holding the lease of one run, whose id schemathesis is given as
    `run_id`: the single-run routes reach their fencing check (a 409), not only their 404."""
    tenant_id, _ = await new_tenant(pool, "schemathesis-workers")
    async with pool.acquire() as conn:
        key = (await issue_key(conn, store(), tenant_id, name="fuzzed-worker", role="worker",
                               pools=[], actor="test")).key
    await new_job(pool, tenant_id, payload={"n": 1})
    assert len(await fire_due(pool, store(), SystemClock())) == 1
    assert await dispatch(pool) == 1
    async with httpx.AsyncClient(base_url=gateway_url) as client:
        r = await client.post(p.CLAIM_PATH, json={"worker_id": "owner"}, headers=auth(key))
    assert r.status_code == 200, r.text
    [run] = r.json()["runs"]
    return key, {"run_id": run["run_id"]}


@pytest.mark.timeout(900)
async def test_schemathesis_finds_no_server_error_and_no_undocumented_answer_on_the_gateway(
        pool: asyncpg.Pool, gateway_url: str, tmp_path: Path) -> None:
    """Every operation of the gateway's own document, stateless, with a worker key."""
    key, ids = await seed_gateway(pool, gateway_url)
    config = tmp_path / "schemathesis.toml"
    config.write_text("[parameters]\n" + "".join(f'{k} = "{v}"\n' for k, v in ids.items()))
    report_path = tmp_path / "gateway.json"
    code, out = await run_schemathesis(gateway_url, key, config, report_path,
                                       phases=GATEWAY_PHASES)
    print(out[-12_000:])
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    print("schemathesis gateway pass:", json.dumps(summary(report)))
    assert summary(report)["operations"] == 9, summary(report)
    assert summary(report)["failures"] == 0 and summary(report)["errors"] == 0, \
        json.dumps(report.get("failures", [])[:20] + report.get("errors", [])[:5],
                   indent=1)[:8000]
    assert code == 0
