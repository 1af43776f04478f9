"""Every ```python block of README.md and docs/*.md runs as written; every ```json block parses.

Extraction: the fenced blocks of each file, found line by line (an opening fence of three or
more backticks and an info string, its closing fence), each with the line of its opening fence:
the test id is `file:line`.

Running: the block's text, unchanged, is written to a file and executed in a fresh process of
the project's interpreter, as `__main__`, compiled with `ast.PyCF_ALLOW_TOP_LEVEL_AWAIT` (a
block with a top-level `await` is run by `asyncio.run`; one that calls `asyncio.run` or
`run_forever()` itself just runs). A process per block, because examples create event loops,
install signal handlers and register tasks, which must touch neither this test's event loop
nor one another. The process's working directory holds the file's *named* blocks (a block
whose first line is `# name.py`, saved under that name) so that a block may import an earlier
one (`from billing import invoice`), as the user's own modules would.

What the block finds around it is a running system: the five services as processes (one
`Cluster` for the module, on its own database and topic prefix) and, per block,
`OSTINATO_API_URL`, `OSTINATO_GATEWAY_URL`, `OSTINATO_API_KEY` (a fresh tenant's key),
`OSTINATO_DATABASE_URL` (the services' database) and `DATABASE_URL` (a fresh empty database:
the user's own, for the examples that keep effects there).

Three kinds of block:

- a pytest module (it defines `test_*` functions at top level): run with pytest
  (pytest-asyncio in auto mode); its tests must pass.
- a worker program (it starts a `Worker`: `run_forever()` or `run_until_signal()`): started,
  awaited until its worker is live at the gateway, driven as a user would drive it (the jobs
  of `SCENARIOS` for the tasks it registers, submitted over the API, their runs checked there),
  then stopped with SIGTERM as an operator stops a worker: it must exit with 0.
- anything else: runs to its end and exits with 0.

Timeouts below only catch a hang (generous on purpose); no test asserts a duration.
"""

from __future__ import annotations

import ast
import asyncio
import itertools
import json
import os
import re
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.helpers.e2e import running_cluster
from tests.helpers.env import DATABASE_URL, TENANT_BOOTSTRAP, new_topic_prefix, url_for
from tests.helpers.lab.cluster import Cluster
from tests.helpers.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON = {"python", "py", "python3"}
HANG = 120.0  # seconds: a hang guard, never the assertion

RUNNER = """\
import ast, asyncio, inspect, sys, types
path = sys.argv[1]
with open(path, encoding="utf-8") as f:
    code = compile(f.read(), path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
module = types.ModuleType("__main__")
module.__file__ = path
sys.modules["__main__"] = module
sys.argv = [path]
if code.co_flags & inspect.CO_COROUTINE:
    asyncio.run(eval(code, vars(module)))
else:
    exec(code, vars(module))
"""


# -- extraction ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Block:
    doc: str  # the file, relative to the repository
    line: int  # of the opening fence
    lang: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def name(self) -> str | None:
        """`name.py` when the block's first line is `# name.py` (the module it shows)."""
        first = self.text.split("\n", 1)[0]
        found = re.fullmatch(r"#\s*([A-Za-z_]\w*\.py)\b.*", first)
        return found.group(1) if found else None

    @property
    def tasks(self) -> list[str]:
        return re.findall(r"@(?:task|workflow)\(\s*\"([^\"]+)\"", self.text)

    @property
    def kind(self) -> str:
        tree = ast.parse(self.text)
        if any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
               and node.name.startswith("test_") for node in tree.body):
            return "pytest"
        if re.search(r"\.(run_forever|run_until_signal)\(", self.text):
            return "worker"
        return "script"


_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<info>[^`]*)$")


def blocks_of(path: Path) -> list[Block]:
    doc = path.relative_to(ROOT).as_posix()
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, ticks = len(opening["indent"]), opening["ticks"]
        lang = (opening["info"].split() or [""])[0].lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.fullmatch(rf"[ \t]*{ticks}`*[ \t]*", lines[j]):
            body.append(lines[j][indent:] if lines[j][:indent].isspace() else lines[j])
            j += 1
        assert j < len(lines), f"{doc}:{i + 1}: a fence that is never closed"
        found.append(Block(doc, i + 1, lang, "\n".join(body) + "\n"))
        i = j + 1
    return found


ALL_BLOCKS = [b for path in DOCS for b in blocks_of(path)]
PYTHON_BLOCKS = [b for b in ALL_BLOCKS if b.lang in PYTHON]
JSON_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "json"]


def named_blocks(doc: str) -> dict[str, Block]:
    named: dict[str, Block] = {}
    for block in PYTHON_BLOCKS:
        if block.doc == doc and block.name:
            assert block.name not in named, f"{block.id}: a second block named {block.name}"
            named[block.name] = block
    return named


def test_the_docs_have_python_examples() -> None:
    """The extraction finds the examples (an empty parametrisation would pass silently)."""
    assert {b.doc for b in PYTHON_BLOCKS} >= {"README.md", "docs/WORKFLOWS.md",
                                               "docs/FAILURES.md", "docs/TESTING.md"}
    assert len({b.id for b in ALL_BLOCKS}) == len(ALL_BLOCKS)
    for block in PYTHON_BLOCKS:
        named_blocks(block.doc)


# -- the system the examples find ------------------------------------------------------------

@pytest.fixture(scope="module")
async def cluster(template_db: str, tmp_path_factory: pytest.TempPathFactory,
                  ) -> AsyncIterator[Cluster]:
    prefix = new_topic_prefix()
    async with running_cluster(template_db, prefix, tmp_path_factory.mktemp("doc-logs"),
                               env={"OSTINATO_KAFKA_TENANT_BOOTSTRAP": TENANT_BOOTSTRAP}) as c:
        yield c


_app_dbs = itertools.count()


@pytest.fixture
async def app_db() -> AsyncIterator[str]:
    """An empty database of the user's own (not migrated: the examples make their tables)."""
    name = f"ostinato_doc_app_{os.getpid()}_{next(_app_dbs)}"
    admin = await asyncpg.connect(DATABASE_URL)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield url_for(name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def new_tenant(cluster: Cluster) -> str:
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as http:
        r = await http.post("/v1/tenants", json={"name": f"docs-{uuid.uuid4().hex[:12]}"},
                            headers={"Authorization": f"Bearer {cluster.admin_key}"})
    assert r.status_code == 201, r.text
    return r.json()["api_key"]


def environment(cluster: Cluster, api_key: str, app_db: str) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
        "OSTINATO_API_URL": cluster.api_url,
        "OSTINATO_GATEWAY_URL": cluster.gateway_url,
        "OSTINATO_API_KEY": api_key,
        "OSTINATO_DATABASE_URL": cluster.database_url,
        "DATABASE_URL": app_db,
        "PYTHONUNBUFFERED": "1",
    }


def lay_out(block: Block, where: Path) -> Path:
    """The doc's named blocks as files in `where`, and the block itself; returns its file."""
    where.mkdir(parents=True, exist_ok=True)
    for name, named in named_blocks(block.doc).items():
        (where / name).write_text(named.text, encoding="utf-8")
    path = where / (block.name or f"example_{block.line}.py")
    path.write_text(block.text, encoding="utf-8")
    return path


def output(log: Path) -> str:
    return log.read_text(errors="replace")[-20_000:] if log.exists() else "(no output)"


# -- what a user does with each worker example ------------------------------------------------

@dataclass
class User:
    """A user of one tenant: the public API with its key, and its own database."""

    http: httpx.AsyncClient
    app_db: str

    async def submit(self, task: str, payload: Any, **fields: Any) -> str:
        r = await self.http.post("/v1/jobs", json={
            "name": f"{task}-{uuid.uuid4().hex[:8]}", "task": task, "payload": payload,
            **fields})
        assert r.status_code == 201, r.text
        return r.json()["id"]

    async def run(self, job_id: str, done: Callable[[dict[str, Any]], bool],
                  what: str) -> dict[str, Any]:
        """The job's run (not a child of it) once `done(run)`; GET /v1/runs/{id}'s view."""
        async def probe() -> dict[str, Any] | None:
            r = await self.http.get("/v1/runs", params={"job_id": job_id})
            assert r.status_code == 200, r.text
            own = [i for i in r.json()["items"] if i.get("parent_run_id") is None]
            if not own:
                return None
            detail = (await self.http.get(f"/v1/runs/{own[0]['id']}")).json()
            return detail if done(detail) else None
        return await until(probe, HANG, what)

    async def final(self, job_id: str, state: str) -> dict[str, Any]:
        run = await self.run(job_id, lambda r: r["state"] in FINAL, f"job {job_id} ends")
        assert run["state"] == state, run
        return run

    async def steps(self, run_id: str) -> list[str]:
        r = await self.http.get(f"/v1/runs/{run_id}/steps")
        assert r.status_code == 200, r.text
        return [s["name"] for s in r.json()["items"]]

    async def query(self, sql: str, *args: Any) -> Any:
        conn = await asyncpg.connect(self.app_db)
        try:
            return await conn.fetchval(sql, *args)
        finally:
            await conn.close()


FINAL = {"succeeded", "dead_lettered", "cancelled"}
Scenario = Callable[[User], Awaitable[None]]


async def readme_invoice(user: User) -> None:
    job = await user.submit("invoice", {"invoice": 7, "amount_cents": 1200})
    run = await user.final(job, "succeeded")
    assert run["output"] == {"sent": 7}
    assert await user.query("SELECT run_id FROM sent_invoices WHERE invoice = 7") == run["id"]
    job = await user.submit("invoice", {"invoice": 8, "amount_cents": 0})
    run = await user.final(job, "dead_lettered")
    assert run["last_error"]["type"] == "invalid_amount"


async def payment_asleep(user: User, payload: dict[str, Any]) -> None:
    """The workflow's first step ran, and it sleeps on its hour-long timer, holding no worker."""
    job = await user.submit("billing.payment", payload)
    run = await user.run(job, lambda r: r["state"] == "suspended" or r["state"] in FINAL,
                         "the payment workflow asleep")
    assert run["state"] == "suspended" and run["wait_reason"] == "timer", run
    assert await user.steps(run["id"]) == ["authorise"]


async def readme_payment(user: User) -> None:
    await payment_asleep(user, {"id": 7, "amount": 1200})


async def classified_failures(user: User) -> None:
    ok = await user.submit("cards.charge", {"amount": 1200, "currency": "EUR"})
    invalid = await user.submit("cards.charge", {"amount": 0})
    unknown = await user.submit("cards.charge", {"amount": 1200, "currency": "XYZ"},
                                retry={"max_attempts": 1})
    throttled = await user.submit("cards.charge", {"amount": 1200, "rate_limited": True})
    assert (await user.final(ok, "succeeded"))["output"] == {"charged": 1225}
    run = await user.final(invalid, "dead_lettered")
    assert run["last_error"]["type"] == "invalid_amount" and run["attempt"] == 1
    run = await user.final(unknown, "dead_lettered")
    assert run["last_error"]["type"] == "KeyError"
    run = await user.run(throttled, lambda r: r["state"] == "retry_scheduled",
                         "the throttled run waits for its retry_after")
    assert run["failures"] == 0, run  # no attempt used
    assert run["last_error"]["type"] == "throttled", run
    assert run["retry_at"] is not None, run


async def effects_once(user: User) -> None:
    job = await user.submit("billing.charge", {"amount": 1200})
    run = await user.final(job, "succeeded")
    assert run["output"] == {"charged": 1200}
    assert await user.query("SELECT count(*) FROM charges WHERE run_id = $1", run["id"]) == 1
    assert await user.query("SELECT key FROM ostinato_effects") == f"run:{run['id']}/charge"
    assert await user.query("SELECT fencing_token FROM ostinato_fences WHERE run_id = $1",
                            run["id"]) == run["fencing_token"]


async def invoice_workflow(user: User) -> None:
    paid = await user.submit("billing.invoice", {"amount": 1200})
    declined = await user.submit("billing.invoice", {"amount": 60_000})
    run = await user.final(paid, "succeeded")
    assert run["output"] == {"charge_id": "ch_123", "amount": 1200}
    assert await user.steps(run["id"]) == ["charge", "receipt"]
    run = await user.final(declined, "succeeded")
    assert run["output"] == {"declined": "card_declined"}


async def workflows_payment(user: User) -> None:
    await payment_asleep(user, {"card": "tok_visa", "amount": 1200})


async def checkout(user: User) -> None:
    done = await user.submit("orders.checkout", {"id": 1, "email": "ana@example.com",
                                                 "amount": 120})
    declined = await user.submit("orders.checkout", {"id": 2, "email": "bo@example.com",
                                                     "amount": 900})
    run = await user.final(done, "succeeded")
    assert run["output"] == {"status": "done", "captured": {"captured": 120},
                             "shipment": {"parcel": "parcel-1"}}
    run = await user.final(declined, "succeeded")
    assert run["output"] == {"status": "declined", "reason": "declined"}


async def saga(user: User) -> None:
    job = await user.submit("travel.trip", {"id": 3})
    run = await user.final(job, "dead_lettered")
    assert run["last_error"]["type"] == "card_declined"
    assert await user.steps(run["id"]) == ["hotel", "car", "pay", "compensate:car",
                                           "compensate:hotel"]


async def patched(user: User) -> None:
    job = await user.submit("orders.invoice", {"items": ["a", "b"]})
    run = await user.final(job, "succeeded")
    assert run["output"] == {"items": ["a", "b"], "fee": 50}
    assert await user.steps(run["id"]) == ["items", "patch:fee-v2", "fee"]


async def payload_schemas(user: User) -> None:
    r = await user.http.post("/v1/jobs", json={"name": "bad-charge", "task": "billing.charge",
                                               "payload": {"amount": "12"}})
    assert r.status_code == 422, r.text
    assert "payload.amount" in [e["field"] for e in r.json()["errors"]], r.json()
    charge = await user.submit("billing.charge", {"amount": 12})
    order = await user.submit("billing.order", {"lines": [{"sku": "a", "qty": 2}]})
    assert (await user.final(charge, "succeeded"))["output"] == {"charged": 12,
                                                                  "currency": "EUR"}
    run = await user.final(order, "succeeded")
    assert run["output"] == {"items": 2} and run["payload_version"] == 2


async def cart_updates(user: User) -> None:
    """docs/WORKFLOWS.md, state and updates: the requests shown there, answered by the
    example's workflow while it runs."""
    job = await user.submit("shop.cart", {"size": 2})
    run = await user.run(job, lambda r: r["state"] == "suspended", f"job {job} waits")
    url = f"/v1/runs/{run['id']}"
    r = await user.http.get(f"{url}/state")
    assert r.json()["values"]["progress"]["value"] == {"items": 0, "open": True}, r.text

    async def update(name: str, payload: Any, key: str) -> dict[str, Any]:
        r = await user.http.post(f"{url}/updates", json={
            "name": name, "payload": payload, "idempotency_key": key})
        assert r.status_code == 202, r.text
        r = await user.http.get(f"{url}/updates/{r.json()['update_id']}",
                                params={"wait": "60s"}, timeout=HANG)
        assert r.status_code == 200, r.text
        return r.json()

    first = await update("add_item", {"sku": "a-1"}, "cart-a-1")
    assert (first["state"], first["output"]) == ("completed", {"items": ["a-1"]}), first
    r = await user.http.get(f"{url}/state", params={"name": "progress"})
    assert r.json()["values"]["progress"]["value"] == {"items": 1, "open": True}, r.text
    refused = await update("remove_item", {"sku": "a-1"}, "cart-rm")
    assert refused["error"]["type"] == "unknown_update", refused
    bad = await update("add_item", {}, "cart-empty")
    assert bad["error"]["type"] == "invalid_item", bad
    second = await update("add_item", {"sku": "b-2"}, "cart-b-2")
    assert second["output"] == {"items": ["a-1", "b-2"]}, second
    done = await user.final(job, "succeeded")
    assert done["output"] == {"items": ["a-1", "b-2"]}
    r = await user.http.get(f"{url}/state")
    assert r.json()["values"]["progress"]["value"] == {"items": 2, "open": False}, r.text


async def batch_by_workflow_id(user: User) -> None:
    """docs/WORKFLOWS.md, workflow ids: signal-with-start starts the batch then signals the
    same run, a start of the running id is a 409, the reuse policies once it ended."""
    url = "/v1/workflows/shop.batch/cust-42"
    order = {"customer": "cust-42", "size": 2}
    r = await user.http.post(f"{url}/signal-with-start", json={
        "signal": "line", "signal_payload": {"sku": "a-1"}, "payload": order})
    assert r.status_code == 201 and r.json()["started"] is True, r.text
    run_id = r.json()["run_id"]
    r = await user.http.post(f"{url}/signal-with-start", json={
        "signal": "line", "signal_payload": {"sku": "b-2"}})
    assert r.status_code == 200 and r.json()["run_id"] == run_id, r.text
    assert (await user.http.post(f"{url}/start", json={})).status_code == 409
    await until(lambda: _succeeded(user, run_id), HANG, f"run {run_id} succeeds")
    r = await user.http.get(f"/v1/runs/{run_id}")
    assert r.json()["output"] == {"customer": "cust-42",
                                  "lines": [{"sku": "a-1"}, {"sku": "b-2"}]}, r.text
    r = await user.http.post(f"{url}/start", json={"id_reuse_policy": "reject_duplicate"})
    assert r.status_code == 409, r.text
    r = await user.http.post(f"{url}/start", json={"payload": {**order, "size": 0}})
    assert r.status_code == 201 and r.json()["run_id"] != run_id, r.text


async def _succeeded(user: User, run_id: str) -> bool:
    r = await user.http.get(f"/v1/runs/{run_id}")
    return r.status_code == 200 and r.json()["state"] == "succeeded"


# (file, task) -> what a user does with the worker example that serves the task. A worker
# example with none of its tasks here is still started, seen live and stopped.
SCENARIOS: dict[tuple[str, str], Scenario] = {
    ("README.md", "invoice"): readme_invoice,
    ("README.md", "billing.payment"): readme_payment,
    ("docs/FAILURES.md", "cards.charge"): classified_failures,
    ("docs/FAILURES.md", "billing.charge"): effects_once,
    ("docs/WORKFLOWS.md", "billing.invoice"): invoice_workflow,
    ("docs/WORKFLOWS.md", "billing.payment"): workflows_payment,
    ("docs/WORKFLOWS.md", "orders.checkout"): checkout,
    ("docs/WORKFLOWS.md", "travel.trip"): saga,
    ("docs/WORKFLOWS.md", "orders.invoice"): patched,
    ("docs/WORKFLOWS.md", "billing.charge"): payload_schemas,
    ("docs/WORKFLOWS.md", "shop.cart"): cart_updates,
    ("docs/WORKFLOWS.md", "shop.batch"): batch_by_workflow_id,
}


def test_every_scenario_names_a_worker_example() -> None:
    """A scenario whose example was renamed or removed would otherwise never run again."""
    served = {(b.doc, t) for b in PYTHON_BLOCKS if b.kind == "worker" for t in b.tasks}
    assert set(SCENARIOS) <= served, set(SCENARIOS) - served


# -- the tests ---------------------------------------------------------------------------------

async def start(argv: list[str], cwd: Path, env: dict[str, str],
                log: Path) -> asyncio.subprocess.Process:
    with log.open("wb") as out:  # the child keeps its own descriptor
        return await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=out,
            stderr=asyncio.subprocess.STDOUT)


async def ended(proc: asyncio.subprocess.Process, log: Path, what: str) -> int:
    """The exit code, once the process has ended (killed if it hangs)."""
    try:
        return await asyncio.wait_for(proc.wait(), HANG)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"{what}: still running after {HANG}s:\n{output(log)}") from None


async def run_to_end(argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
    code = await ended(await start(argv, cwd, env, log), log, "the example")
    assert code == 0, f"exit code {code}:\n{output(log)}"


async def serve(block: Block, path: Path, env: dict[str, str], log: Path, cluster: Cluster,
                api_key: str, app_db: str) -> None:
    """Start the worker example, drive it with its scenarios, stop it as an operator does."""
    headers = {"Authorization": f"Bearer {api_key}"}
    proc = await start([sys.executable, "-c", RUNNER, str(path)], path.parent, env, log)
    try:
        async with httpx.AsyncClient(base_url=cluster.api_url, headers=headers,
                                     timeout=30) as http:
            async def live() -> bool:
                assert proc.returncode is None, f"exited with {proc.returncode}:\n{output(log)}"
                return bool((await http.get("/v1/workers")).json()["items"])

            await until(live, HANG, f"the worker of {block.id} to claim")
            for task in block.tasks:
                scenario = SCENARIOS.get((block.doc, task))
                if scenario is not None:
                    try:
                        await scenario(User(http, app_db))
                    except AssertionError as exc:
                        raise AssertionError(f"{exc}\n--- the worker's output:\n"
                                             f"{output(log)}") from exc
        assert proc.returncode is None, f"exited with {proc.returncode}:\n{output(log)}"
        proc.send_signal(signal.SIGTERM)  # as an operator stops a worker
        code = await ended(proc, log, "the worker after SIGTERM")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 0, f"exit code {code} after SIGTERM:\n{output(log)}"


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in PYTHON_BLOCKS])
async def test_python_example_runs_as_written(block: Block, cluster: Cluster, app_db: str,
                                              tmp_path: Path) -> None:
    api_key = await new_tenant(cluster)
    env = environment(cluster, api_key, app_db)
    path = lay_out(block, tmp_path / "example")
    log = tmp_path / "output.log"
    if block.kind == "pytest":
        await run_to_end([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:randomly", "-o", "asyncio_mode=auto",
                          "-o", "asyncio_default_fixture_loop_scope=function", str(path)],
                         path.parent, env, log)
        assert re.search(r"\b\d+ passed\b", output(log)), output(log)
    elif block.kind == "worker":
        await serve(block, path, env, log, cluster, api_key, app_db)
    else:
        await run_to_end([sys.executable, "-c", RUNNER, str(path)], path.parent, env, log)


def json_documents(block: Block) -> list[Any]:
    """The block as one JSON document, else as one document per line (JSON lines)."""
    try:
        return [json.loads(block.text)]
    except json.JSONDecodeError:
        pass
    documents = []
    for n, line in enumerate(block.text.splitlines()):
        if line.strip():
            try:
                documents.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise AssertionError(f"{block.id}: line {n + 1} of the block is not JSON "
                                     f"({exc}): {line}") from None
    return documents


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in JSON_BLOCKS])
async def test_json_example_is_valid(block: Block, cluster: Cluster) -> None:
    """Valid JSON; a job's body (an object with a `name`) is one the API accepts, and so is a
    DAG's (a `name` and `nodes`: POST /v1/dags)."""
    documents = json_documents(block)
    jobs = [d for d in documents if isinstance(d, dict) and "name" in d]
    if jobs:
        headers = {"Authorization": f"Bearer {await new_tenant(cluster)}"}
        async with httpx.AsyncClient(base_url=cluster.api_url, headers=headers,
                                     timeout=30) as http:
            for body in jobs:
                r = await http.post("/v1/dags" if "nodes" in body else "/v1/jobs", json=body)
                assert r.status_code == 201, f"{block.id}: {r.text}"
