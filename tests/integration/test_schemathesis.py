"""No 5xx on any input, and the API answers only what its OpenAPI document says (issue
"Security and hardening"): schemathesis generates requests from schemas/openapi.json's live
copy and sends them over HTTP to a running api with a tenant's key, in all its phases
(examples, coverage, fuzzing: valid and invalid data; stateful: chains of calls following the
links it infers). Bounded per operation so the run takes minutes on two cores; the counts are
printed for the issue's closing note. Each nonconformance it found has a regression case in
test_api_contract.py."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import ADMIN, auth

pytestmark = pytest.mark.integration

schemathesis = pytest.importorskip("schemathesis")

CHECKS = tuple(os.environ.get("OSTINATO_SCHEMATHESIS_CHECKS", ",".join((
    "not_a_server_error", "status_code_conformance", "content_type_conformance",
    "response_schema_conformance", "unsupported_method", "allow_header_conformance"))).split(","))
PHASES = ("examples", "coverage", "fuzzing", "stateful")
MAX_EXAMPLES = int(os.environ.get("OSTINATO_SCHEMATHESIS_EXAMPLES", "25"))  # per operation
SEED = 20261202  # the same cases on every run: a red build is reproducible
# One worker: hypothesis parses lambda sources with `ast`, whose recursion guard CPython 3.11
# keeps per interpreter, not per thread ("AST constructor recursion depth mismatch" with two).


async def run_schemathesis(api_url: str, key: str, config: Path, report: Path,
                           *only: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
        f"{api_url}/schema/openapi.json", "--url", api_url, "-H", f"Authorization: Bearer {key}",
        "--phases", ",".join(PHASES), "--mode", "all", "--checks", ",".join(CHECKS),
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
