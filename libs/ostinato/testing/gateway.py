"""An in-process fake of the worker-gateway's HTTP protocol, to test SDK workers (ours and
users' own handlers) without the services: `FakeGateway` serves a run queue with long-poll
claims and per-item batch results, decoding every request with the same strict protocol Structs
the real gateway uses (so it is not a mock of a database or broker); `running` runs a `Worker`
against it for the length of a `with` block (docs/TESTING.md).

    gw = FakeGateway()
    run_id = await gw.add("echo", {"n": 41})
    async with running(gw, [echo]):
        while run_id not in gw.completions():  # under a hang guard (asyncio.timeout)
            await asyncio.sleep(0.01)
    assert gw.completions()[run_id].output == {"n": 42}
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import msgspec

from ostinato.sdk import Worker
from ostinato.wire import worker as p

__all__ = ["API_KEY", "T0", "FakeGateway", "running"]

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)  # every fake run's scheduled_for and lease base
API_KEY = "test-key"  # the bearer token the fake expects


class FakeGateway:
    """Just enough of the gateway: a run queue, long-poll claims, per-item batch results."""

    def __init__(self) -> None:
        self.queue: list[p.ClaimedRun] = []
        self.cond = asyncio.Condition()
        self.claims: list[p.ClaimRequest] = []
        self.claim_headers: list[httpx.Headers] = []
        self.batches: list[p.BatchRequest] = []
        self.batch_attempts = 0
        self.fail_batches: list[Exception | int] = []  # next batch calls: raise, or HTTP status
        self.heartbeat_status: dict[str, int] = {}
        self.cancel: set[str] = set()
        self.overdeliver = False
        self.claim_status = 200
        self.goodbyes: list[p.GoodbyeRequest] = []
        self.paths: list[str] = []  # every request's path, in order
        self.registrations: list[p.RegisterTasksRequest] = []  # payload schemas
        self.register_status = 200  # e.g. 409: the schema conflicts with a registered one

    async def add(self, task: str, payload: Any = None, *, ttl: float = 30.0, **kw: Any) -> str:
        run_id = str(uuid.uuid4())
        fields = {"fencing_token": 1, "attempt": 1, **kw}
        run = p.ClaimedRun(
            run_id=run_id, job_id="job-1", tenant_id="t1", task=task, payload=payload,
            lease_expires_at=T0 + timedelta(seconds=ttl), lease_ttl_seconds=ttl,
            scheduled_for=T0, idempotency_key=f"{run_id}/{fields['attempt']}", **fields,
        )
        async with self.cond:
            self.queue.append(run)
            self.cond.notify_all()
        return run_id

    def completions(self) -> dict[str, p.CompletionItem]:
        return {c.run_id: c for b in self.batches for c in b.completions}

    def failures(self) -> dict[str, p.FailureItem]:
        return {f.run_id: f for b in self.batches for f in b.failures}

    def heartbeats(self) -> list[p.HeartbeatItem]:
        return [h for b in self.batches for h in b.heartbeats]

    def releases(self) -> dict[str, p.ReleaseItem]:
        return {r.run_id: r for b in self.batches for r in b.releases}

    async def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {API_KEY}"
        self.paths.append(request.url.path)
        if request.url.path == p.CLAIM_PATH:
            return await self._claim(request)
        if request.url.path == p.GOODBYE_PATH:
            self.goodbyes.append(msgspec.json.decode(request.content, type=p.GoodbyeRequest))
            return httpx.Response(200, content=msgspec.json.encode(
                p.GoodbyeResponse(forgotten=True)))
        if request.url.path == p.TASKS_PATH:
            return self._register(request)
        assert request.url.path == p.BATCH_PATH
        body = msgspec.json.decode(request.content, type=p.BatchRequest)
        self.batch_attempts += 1
        if self.fail_batches:
            failure = self.fail_batches.pop(0)
            if isinstance(failure, Exception):
                raise failure
            problem = p.Problem(title="Unavailable", status=failure, detail="try later")
            return httpx.Response(failure, content=msgspec.json.encode(problem))
        self.batches.append(body)
        results = [
            p.BatchItemResult(
                run_id=h.run_id, kind="heartbeat", status=self.heartbeat_status.get(h.run_id, 200),
                lease_expires_at=T0, cancel_requested=h.run_id in self.cancel,
            )
            for h in body.heartbeats
        ]
        results += [p.BatchItemResult(run_id=c.run_id, kind="complete", status=200)
                    for c in body.completions]
        results += [p.BatchItemResult(run_id=f.run_id, kind="fail", status=200)
                    for f in body.failures]
        results += [p.BatchItemResult(run_id=r.run_id, kind="release", status=200)
                    for r in body.releases]
        return httpx.Response(200, content=msgspec.json.encode(p.BatchResponse(results=results)))

    def _register(self, request: httpx.Request) -> httpx.Response:
        body = msgspec.json.decode(request.content, type=p.RegisterTasksRequest)
        self.registrations.append(body)
        if self.register_status != 200:
            problem = p.Problem(title="Payload schema conflict", status=self.register_status,
                                detail="bump payload_version for an incompatible change")
            return httpx.Response(self.register_status, content=msgspec.json.encode(problem))
        answer = p.RegisterTasksResponse(scope="t1", schemas=[
            p.RegisteredSchema(task=t.task, payload_version=t.payload_version or 1,
                                          created=True) for t in body.tasks])
        return httpx.Response(200, content=msgspec.json.encode(answer))

    async def _claim(self, request: httpx.Request) -> httpx.Response:
        body = msgspec.json.decode(request.content, type=p.ClaimRequest)
        self.claims.append(body)
        self.claim_headers.append(request.headers)
        if self.claim_status != 200:
            problem = p.Problem(title="Unauthorized", status=self.claim_status)
            return httpx.Response(self.claim_status, content=msgspec.json.encode(problem))
        async with self.cond:
            try:
                await asyncio.wait_for(self.cond.wait_for(lambda: self.queue), body.wait_seconds)
            except TimeoutError:
                pass
            n = len(self.queue) if self.overdeliver else body.max_runs
            runs, self.queue[:n] = self.queue[:n], []
        return httpx.Response(200, content=msgspec.json.encode(p.ClaimResponse(runs=runs)))


@asynccontextmanager
async def running(gw: FakeGateway, handlers: Any, **kw: Any) -> AsyncIterator[Worker]:
    """A `Worker` (handlers and options as for its constructor) claiming from `gw` until the
    block ends; then it is stopped gracefully and its runner awaited."""
    client = httpx.AsyncClient(transport=httpx.MockTransport(gw.handle))
    worker = Worker("http://gateway.test/", API_KEY, handlers, http_client=client, **kw)
    runner = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        await worker.stop()
        await runner
        await client.aclose()
