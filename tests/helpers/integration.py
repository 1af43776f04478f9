"""Building blocks for integration tests: a tenant, jobs, a dispatcher decision, one run driven
through the code each service runs (`drive_one_run`), an alert webhook receiver (`Receiver`).
The other helpers are beside it in tests/helpers/ (e.g. `outbox.drain_outbox`, the fault lab in
`lab/`); `ostinato.testing`, the harness users get, may not import `services`.

The tests still read and set up rows with inline SQL in many places (asserting what a table
holds, or arranging a state no public call makes); the stores are the way to move them to."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import asyncpg
import httpx
import msgspec

from ostinato.bus.topics import Topics
from ostinato.clock import Clock, SystemClock
from ostinato.db.pool import create_pool
from ostinato.eventlog.store import EventStore
from ostinato.jobs import submit_job, submit_jobs
from ostinato.jobs.request import JobRequest
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.schedules import ScheduleSpec
from ostinato.stores import runs
from ostinato.stores.jobs import JobRow
from ostinato.tenancy import create_tenant
from ostinato.wire import worker as p
from services.api.app import create_app
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome
from tests.helpers.api import ADMIN, auth
from tests.helpers.env import KAFKA_BOOTSTRAP, TENANT_BOOTSTRAP

TOPICS = Topics()


def store(clock: Clock | None = None) -> EventStore:
    return EventStore(clock or SystemClock(), TOPICS)


@asynccontextmanager
async def served_api(pool: asyncpg.Pool, db_url: str, admin_key: str) -> AsyncIterator[str]:
    """The public API over `pool`, served on a free port of 127.0.0.1 in this event loop: for
    real HTTP clients and for commands running as other processes. Yields its base URL."""
    service = Service("api", Settings(database_url=db_url, admin_key=admin_key))
    service.pool = pool
    server = HttpServer(create_app(service, store()), "127.0.0.1", 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.stop()


async def pool_logging_statements(db_url: str) -> tuple[asyncpg.Pool, list[str]]:
    """A one-connection pool (the services' settings) and the list its statements go to, for
    tests of how many round trips a poll makes. Query loggers are called soon after a
    statement, not during it: `await asyncio.sleep(0)` before reading the list."""
    statements: list[str] = []
    pool = await create_pool(db_url, max_size=1)
    async with pool.acquire() as conn:
        conn.add_query_logger(lambda record: statements.append(record.query))
    return pool, statements


async def new_tenant(pool: asyncpg.Pool, name: str | None = None) -> tuple[uuid.UUID, str]:
    async with pool.acquire() as conn:
        return await create_tenant(conn, store(), name or f"t-{uuid.uuid4().hex[:8]}",
                                   actor="test")


async def new_job(pool: asyncpg.Pool, tenant_id: uuid.UUID, *, at: datetime | None = None,
                  name: str = "job", payload: object = None, clock: Clock | None = None,
                  ) -> JobRow:
    request = JobRequest(name=name, schedule=ScheduleSpec(at=at) if at else None,
                         payload=payload)
    async with pool.acquire() as conn:
        row, _ = await submit_job(conn, store(clock), clock or SystemClock(),
                                  tenant_id=tenant_id, request=request, pools=("default",),
                                  max_payload_bytes=1 << 20, actor="test")
    return row


async def dispatch(pool: asyncpg.Pool, clock: Clock | None = None, *, slots: int = 10_000,
                   pools: tuple[str, ...] = ("default", "long", "etl")) -> int:
    """One dispatcher decision with ample shared capacity in `pools` (the decision itself is
    tested in test_dispatch.py); returns how many runs were queued."""
    from ostinato.policy.fairness import DEFAULT_CLASSES
    from services.dispatcher.dispatcher import Dispatcher, fixed_capacity

    clock = clock or SystemClock()
    return await Dispatcher(pool, store(clock), clock, classes=DEFAULT_CLASSES,
                            capacity=fixed_capacity(slots, pools)).run_round()


async def drive_one_run(pool: asyncpg.Pool, *, succeed: bool, stale_write: bool = False,
                        tenant_id: uuid.UUID | None = None) -> tuple[uuid.UUID, uuid.UUID]:
    """Tenant (a new one unless given) → job → run → queued → claimed → outcome through the
    scheduler's, dispatcher's and gateway's code; with `stale_write`, a completion under an
    older fencing token first. Returns (tenant id, run id)."""
    if tenant_id is None:
        tenant_id, _ = await new_tenant(pool)
    await new_job(pool, tenant_id, payload={"hello": "world"})
    created = await fire_due(pool, store(), SystemClock())
    assert len(created) == 1
    assert await dispatch(pool) == 1
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    [claimed] = await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w1", max_runs=5))
    assert claimed.payload == {"hello": "world"} and claimed.attempt == 1
    run_id = uuid.UUID(claimed.run_id)
    if stale_write:
        [result] = await attempts.record(tenant_id, "w0", [Outcome(
            run_id, claimed.run_id, claimed.fencing_token - 1, "complete", output=1)])
        assert result.status == 409
    kind = "complete" if succeed else "fail"
    error = None if succeed else p.ErrorInfo(type="Boom", message="boom", retryable=True)
    [result] = await attempts.record(tenant_id, "w1", [Outcome(
        run_id, claimed.run_id, claimed.fencing_token, kind, output={"ok": True}, error=error)])
    assert result.status == 200
    return tenant_id, run_id


class Receiver:
    """An HTTP webhook receiver: records each POST's headers and JSON body, answers `status`;
    `stop()` and `start()` take it off and back on the same port."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.status = 200
        self.refused = 0  # requests answered with something else than 2xx
        self.port = 0
        self.server: HttpServer | None = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if self.status == 200:
            self.bodies.append(msgspec.json.decode(body))
            self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        else:
            self.refused += 1
        await send({"type": "http.response.start", "status": self.status, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def start(self) -> None:
        self.server = HttpServer(self, "127.0.0.1", self.port)  # type: ignore[arg-type]
        await self.server.start()
        self.port = self.server.port

    async def stop(self) -> None:
        assert self.server is not None
        await self.server.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def alerts(self) -> list[tuple[str, str, str | None]]:
        return [(a["status"], a["labels"]["alertname"], a["labels"].get("owner"))
                for b in self.bodies for a in b["alerts"]]


async def queued_workflow_run(pool: asyncpg.Pool, tenant_id: uuid.UUID, task: str,
                              payload: Any = None) -> uuid.UUID:
    """A job of `task` due now, its run created by the scheduler's code and queued by the
    dispatcher's."""
    await new_job(pool, tenant_id, name=task, payload=payload)
    [created] = await fire_due(pool, store(), SystemClock())
    assert await dispatch(pool) == 1
    async with pool.acquire() as conn:
        [run] = await runs.page(conn, tenant_id, job_id=created.job_id, state=None,
                                after=(None, None), limit=1)
    return run.id


async def run_row(pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: uuid.UUID) -> runs.RunRow:
    async with pool.acquire() as conn:
        row = await runs.by_id(conn, tenant_id, run_id)
    assert row is not None
    return row


CSRF = re.compile(r'name="_csrf" value="([^"]+)"')


async def login(client: httpx.AsyncClient, key: str) -> str:
    """A session opened with `key` (the client keeps its cookie); the session's CSRF token."""
    form = await client.get("/ui/login")
    token = re.search(r'name="_login" value="([^"]+)"', form.text)
    assert token, form.text
    r = await client.post("/ui/login", data={"_login": token.group(1), "api_key": key,
                                             "next": "/ui/runs"})
    assert r.status_code == 303, r.text
    page = await client.get("/ui/runs")
    assert page.status_code == 200, page.text
    found = CSRF.search(page.text)
    assert found, page.text
    return found.group(1)


async def dead_letters(client: httpx.AsyncClient, pool: asyncpg.Pool, key: str,
                       errors: list[str]) -> list[str]:
    """Jobs whose single attempt fails permanently with each error type; their run ids."""
    for i, _ in enumerate(errors):
        r = await client.post("/v1/jobs", json={"name": f"j{i}", "payload": {"n": i}},
                              headers=auth(key))
        assert r.status_code == 201
    await fire_due(pool, store(), SystemClock())
    await dispatch(pool)
    attempts = Attempts(pool, store(), SystemClock(), lease_ttl_seconds=30)
    me = (await client.get("/v1/runs", headers=auth(key))).json()["items"]
    assert len(me) == len(errors)
    async with pool.acquire() as conn:
        tenant_id = await conn.fetchval("SELECT tenant_id FROM runs WHERE id = $1",
                                        uuid.UUID(me[0]["id"]))
    claimed = await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w", max_runs=100))
    by_payload = sorted(claimed, key=lambda c: c.payload["n"])
    await attempts.record(tenant_id, "w", [
        Outcome(uuid.UUID(c.run_id), c.run_id, c.fencing_token, "fail", error=p.ErrorInfo(
            type=kind, message=f"{kind} happened", retryable=False, classified=True))
        for c, kind in zip(by_payload, errors, strict=True)])
    return [c.run_id for c in by_payload]


async def runs_of(pool: asyncpg.Pool, tenant_id: uuid.UUID, task: str, n: int) -> None:
    """`n` scheduled runs of `task` (one-off jobs due now, fired by the scheduler's code)."""
    async with pool.acquire() as conn:
        for start in range(0, n, 500):
            await submit_jobs(conn, store(), SystemClock(), tenant_id=tenant_id, requests=[
                JobRequest(name=f"{task}-{i}", task=task)
                for i in range(start, min(n, start + 500))],
                pools=("default",), max_payload_bytes=1 << 20, actor="test")
    while await fire_due(pool, store(), SystemClock(), batch_size=500):
        pass


def kafka_settings(db_url: str, prefix: str) -> Settings:
    return Settings(database_url=db_url, admin_key=ADMIN, kafka_bootstrap=KAFKA_BOOTSTRAP,
                    kafka_tenant_bootstrap=TENANT_BOOTSTRAP, topic_prefix=prefix,
                    kafka_submit_partitions=1)


async def tenant_id_of(pool: asyncpg.Pool, name: str) -> uuid.UUID:
    """The id of the tenant named `name`."""
    async with pool.acquire() as conn:
        return await conn.fetchval("SELECT id FROM tenants WHERE name = $1", name)


async def event_count(db: asyncpg.Pool | asyncpg.Connection) -> int:
    """How many events the log holds (every tenant's): to show that something appended none."""
    return await db.fetchval("SELECT count(*) FROM events")
