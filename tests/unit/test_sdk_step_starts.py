"""A workflow step's start rides the worker's next request and never makes one of its own
(`ostinato.sdk.reporter`, docs/WORKFLOW_STEPS.md "while a step runs"); the step's report
supersedes a start not sent yet; a start lost with a lone ping goes with the next request; a
failed batch is retried without its starts. The SDK says a step started only to a gateway whose
claim said it takes them; the test harness shows the running step as the gateway would."""

from __future__ import annotations

import asyncio
from typing import Any

from ostinato.sdk import WorkflowContext, workflow
from ostinato.sdk.reporter import Reporter
from ostinato.testing.handlers import HandlerEnvironment
from ostinato.wire import worker as p


class Transport:
    """Records each request; fails the first `fail` of them."""

    def __init__(self, fail: int = 0) -> None:
        self.requests: list[p.BatchRequest] = []
        self.fail = fail
        self.sent = asyncio.Event()

    async def until_sent(self, n: int) -> None:
        """Wait for the n-th request (the reporter's own pace; no clock)."""
        while len(self.requests) < n:
            self.sent.clear()
            await self.sent.wait()

    async def __call__(self, request: p.BatchRequest) -> p.BatchResponse:
        self.requests.append(request)
        self.sent.set()
        if self.fail:
            self.fail -= 1
            raise ConnectionError("down")
        return p.BatchResponse(results=[
            p.BatchItemResult(run_id=s.run_id, kind="step", status=200) for s in request.steps])


def step(run_id: str, seq: int) -> p.StepItem:
    return p.StepItem(run_id=run_id, fencing_token=1, seq=seq, name=f"s{seq}")


async def settle() -> None:
    for _ in range(20):  # let the flusher run what it has (no wall clock involved)
        await asyncio.sleep(0)


async def test_a_start_rides_the_next_request_and_makes_none_of_its_own() -> None:
    transport = Transport()
    reporter = Reporter(transport, worker_id="w", linger_seconds=3600)
    reporter.start()
    reporter.started("r1", 1, 4, "charge")
    await settle()
    assert transport.requests == []  # nothing due: a start alone sends nothing
    await reporter.step(step("r2", 0))  # another run's step goes at once, and the start with it
    [request] = transport.requests
    assert [(s.run_id, s.seq, s.name) for s in request.started] == [("r1", 4, "charge")]
    assert request.started[0].age_ms >= 0 and [s.run_id for s in request.steps] == ["r2"]
    await reporter.step(step("r2", 1))
    assert transport.requests[1].started == []  # said once
    await reporter.close(1)


async def test_the_steps_report_supersedes_its_start_not_sent_yet() -> None:
    transport = Transport()
    reporter = Reporter(transport, worker_id="w", linger_seconds=3600)
    reporter.start()
    reporter.started("r1", 1, 2, "charge")
    await reporter.step(step("r1", 2))
    [request] = transport.requests
    assert request.started == [] and [s.seq for s in request.steps] == [2]
    await reporter.close(1)


async def test_a_start_lost_with_a_lone_ping_goes_with_the_next_request() -> None:
    transport = Transport(fail=1)
    reporter = Reporter(transport, worker_id="w", linger_seconds=0)
    reporter.start()
    reporter.started("r1", 1, 0, "a")
    reporter.ping()
    await transport.until_sent(1)
    await settle()
    reporter.ping()
    await transport.until_sent(2)
    first, second = transport.requests
    assert [s.name for s in first.started] == ["a"] and [s.name for s in second.started] == ["a"]
    await reporter.close(1)


async def test_a_failed_batch_is_retried_without_its_starts() -> None:
    transport = Transport(fail=1)
    reporter = Reporter(transport, worker_id="w", linger_seconds=0, backoff_initial=0.001)
    reporter.start()
    reporter.started("r1", 1, 0, "a")
    await reporter.step(step("r2", 0))
    first, retry = transport.requests
    assert [s.name for s in first.started] == ["a"] and retry.started == []
    assert [s.run_id for s in retry.steps] == ["r2"]  # the step itself is kept
    await reporter.close(1)


async def test_the_harness_shows_the_step_running_as_the_gateway_would() -> None:
    seen: list[Any] = []
    env = HandlerEnvironment()

    async def charge() -> str:
        seen.append(env.journal.running)  # while it executes
        return "ok"

    @workflow("shop.pay")
    async def pay(ctx: WorkflowContext, payload: None) -> str:
        await ctx.step("reserve", lambda: "r")
        return str(await ctx.step("charge", charge))

    assert await env.run(pay, None) == "ok"
    assert seen == [(1, "charge")] and env.journal.running is None  # recorded: over
