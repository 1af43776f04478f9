"""Worker SDK against an in-process fake of the worker-gateway's HTTP protocol
(`ostinato.testing.gateway`).

The fake speaks our own protocol (it decodes requests with the same strict Structs the gateway
uses), so this is not a mock of a database or broker. Synchronisation uses events and polling
with a deadline (`tests.helpers.waiting.eventually`), never timed sleeps.
"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import httpx
import msgspec
import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace

from ostinato.sdk import (
    Cancelled,
    GatewayError,
    LeaseLost,
    OstinatoWorkerError,
    PermanentError,
    Task,
    Worker,
    current,
    task,
)
from ostinato.sdk import reporter as reporter_module
from ostinato.sdk.reporter import Reporter
from ostinato.testing.gateway import T0, FakeGateway, running
from ostinato.wire import worker as p
from tests.helpers.waiting import eventually


async def test_handler_gets_payload_and_completion_carries_fencing_token() -> None:
    gw, seen = FakeGateway(), []

    @task("echo")
    async def echo(payload: dict[str, int]) -> dict[str, int]:
        ctx = current()
        seen.append((payload, ctx.attempt, ctx.retries, ctx.fencing_token, ctx.scheduled_for))
        return {"n": payload["n"] + 1}

    run_id = await gw.add("echo", {"n": 41}, fencing_token=7, attempt=3)
    async with running(gw, [echo], concurrency=8) as worker:
        await eventually(lambda: run_id in gw.completions())
    done = gw.completions()[run_id]
    assert (done.output, done.fencing_token) == ({"n": 42}, 7)
    assert seen == [({"n": 41}, 3, 2, 7, T0)]
    claim = gw.claims[0]
    assert (claim.worker_id, claim.pools, claim.tasks) == (worker.worker_id, ["default"], ["echo"])
    assert claim.max_runs == 8


async def test_claims_declare_slots_and_a_stopping_worker_says_goodbye_last() -> None:
    gw, started = FakeGateway(), asyncio.Event()

    async def hang(payload: Any) -> None:
        started.set()
        await asyncio.Event().wait()

    run_id = await gw.add("hang")
    async with running(gw, {"hang": hang}, concurrency=5, shutdown_grace_seconds=0) as worker:
        await started.wait()
    assert {c.slots for c in gw.claims} == {5}  # the whole concurrency, not the free slots
    assert run_id in gw.releases()
    assert gw.goodbyes == [p.GoodbyeRequest(worker_id=worker.worker_id)]
    assert gw.paths[-1] == p.GOODBYE_PATH  # after the releases were flushed


async def test_many_completions_share_few_batch_requests() -> None:
    gw, release, started = FakeGateway(), asyncio.Event(), []
    run_ids = [await gw.add("noop", i) for i in range(100)]

    async def noop(payload: int) -> int:
        started.append(payload)
        await release.wait()
        return payload

    async with running(gw, {"noop": noop}, concurrency=100):
        await eventually(lambda: len(started) == 100)
        release.set()
        await eventually(lambda: len(gw.completions()) == 100)
    assert sorted(gw.completions()) == sorted(run_ids)
    assert len([b for b in gw.batches if b.completions]) <= 5


async def test_permanent_error_reports_not_retryable_with_its_type() -> None:
    gw = FakeGateway()

    def charge(payload: Any) -> None:
        raise PermanentError("card declined", type="card_declined")

    run_id = await gw.add("charge")
    async with running(gw, {"charge": charge}):
        await eventually(lambda: run_id in gw.failures())
    assert gw.failures()[run_id].error == p.ErrorInfo(
        type="card_declined", message="card declined", retryable=False, classified=True
    )


async def test_unclassified_exception_is_retryable_with_class_name_and_capped_message() -> None:
    gw = FakeGateway()

    async def boom(payload: str) -> None:
        raise ValueError(payload)

    short, long = await gw.add("boom", "kaputt"), await gw.add("boom", "é" * 5000)
    async with running(gw, {"boom": boom}):
        await eventually(lambda: {short, long} <= gw.failures().keys())
    assert gw.failures()[short].error == p.ErrorInfo(type="ValueError", message="kaputt",
                                                     retryable=True)
    assert 0 < len(gw.failures()[long].error.message.encode()) <= 4096


async def test_sync_handler_runs_in_a_thread_with_its_context() -> None:
    gw = FakeGateway()

    def report(payload: Any) -> dict[str, Any]:
        return {"run_id": current().run_id, "main": threading.current_thread() is
                threading.main_thread()}

    run_id = await gw.add("report")
    async with running(gw, {"report": report}):
        await eventually(lambda: run_id in gw.completions())
    assert gw.completions()[run_id].output == {"run_id": run_id, "main": False}


@pytest.mark.parametrize("overdeliver", [False, True])
async def test_concurrency_is_never_exceeded(overdeliver: bool) -> None:
    gw, saturated = FakeGateway(), asyncio.Event()
    gw.overdeliver = overdeliver
    in_flight, peak = 0, 0
    for i in range(40):
        await gw.add("work", i)

    async def work(payload: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 4:
            saturated.set()
        await saturated.wait()
        await asyncio.sleep(0)
        in_flight -= 1
        return payload

    async with running(gw, {"work": work}, concurrency=4):
        await eventually(lambda: len(gw.completions()) == 40)
    assert peak == 4
    assert all(c.max_runs <= 4 for c in gw.claims)


async def test_heartbeat_409_raises_lease_lost_and_no_outcome_is_sent() -> None:
    gw, raised = FakeGateway(), []

    async def fragile(payload: str) -> str:
        try:
            try:
                await current().heartbeat()
            except Exception:  # a user's broad except must not swallow LeaseLost
                raised.append("swallowed")
        except LeaseLost:
            raised.append(payload)
            if payload == "reraise":
                raise
        return "should not be reported"

    lost = [await gw.add("fragile", kind, fencing_token=5) for kind in ("reraise", "ignore")]
    ok = await gw.add("fragile", "fine")
    gw.heartbeat_status.update(dict.fromkeys(lost, 409))
    async with running(gw, {"fragile": fragile}):
        await eventually(lambda: sorted(raised) == ["ignore", "reraise"])
        await eventually(lambda: ok in gw.completions())
    reported = gw.completions().keys() | gw.failures().keys()
    assert reported == {ok}  # stop() flushed everything: nothing for the fenced runs
    assert {(h.run_id, h.fencing_token) for h in gw.heartbeats()} >= {(r, 5) for r in lost}


async def test_sync_handler_heartbeat_sync_raises_lease_lost_in_its_thread() -> None:
    gw, raised = FakeGateway(), threading.Event()

    def fragile(payload: Any) -> str:
        try:
            current().heartbeat_sync()
        except LeaseLost:
            raised.set()
            raise
        return "should not be reported"

    run_id = await gw.add("fragile")
    gw.heartbeat_status[run_id] = 409
    async with running(gw, {"fragile": fragile}):
        await eventually(raised.is_set)
    assert run_id not in gw.completions().keys() | gw.failures().keys()


async def test_periodic_heartbeats_renew_and_relay_409_and_cancel() -> None:
    gw = FakeGateway()

    async def watch(payload: str) -> str:
        ctx = current()
        await eventually(lambda: ctx.is_lease_lost() or ctx.is_cancelled())
        if ctx.is_cancelled():
            await ctx.heartbeat()  # raises Cancelled
        return "lost"

    fenced = await gw.add("watch", "fenced", ttl=0.06)
    cancelled = await gw.add("watch", "cancel", ttl=0.06)
    gw.heartbeat_status[fenced] = 409
    gw.cancel.add(cancelled)
    async with running(gw, {"watch": watch}):
        await eventually(lambda: cancelled in gw.failures())
    assert fenced not in gw.completions()
    assert gw.failures()[cancelled].error.type == "cancelled"
    assert gw.failures()[cancelled].error.retryable is False
    assert any(len(b.heartbeats) == 2 for b in gw.batches)  # both runs in one request


async def test_stop_waits_for_in_flight_handlers_and_flushes() -> None:
    gw, started, release = FakeGateway(), asyncio.Event(), asyncio.Event()

    async def slow(payload: Any) -> str:
        started.set()
        await release.wait()
        return "finished"

    run_id = await gw.add("slow")
    client = httpx.AsyncClient(transport=httpx.MockTransport(gw.handle))
    worker = Worker("http://gateway.test", "test-key", {"slow": slow}, http_client=client)
    runner = asyncio.create_task(worker.run())
    await started.wait()
    stopping = asyncio.create_task(worker.stop())
    for _ in range(50):
        await asyncio.sleep(0)
    assert not stopping.done() and not gw.completions()
    release.set()
    await stopping
    assert gw.completions()[run_id].output == "finished"  # flushed before stop() returned
    await runner
    await client.aclose()


async def test_grace_expiry_releases_the_lease_instead_of_failing() -> None:
    gw = FakeGateway()

    async def stuck(payload: Any) -> None:
        await asyncio.Event().wait()

    run_id = await gw.add("stuck", fencing_token=4)
    async with running(gw, {"stuck": stuck}, shutdown_grace_seconds=0.01):
        await eventually(lambda: len(gw.claims) >= 2)  # run claimed, next poll waiting
    assert gw.releases()[run_id].fencing_token == 4
    assert run_id not in gw.failures() and run_id not in gw.completions()


async def test_outcomes_survive_transport_errors_and_5xx() -> None:
    gw = FakeGateway()
    gw.fail_batches = [httpx.ConnectError("gateway down"), 503]
    run_id = await gw.add("echo", "x")
    async with running(gw, {"echo": lambda payload: payload}):
        await eventually(lambda: run_id in gw.completions())
    assert gw.batch_attempts >= 3
    assert [c.run_id for b in gw.batches for c in b.completions] == [run_id]


async def test_unknown_task_and_invalid_output_fail_permanently() -> None:
    gw = FakeGateway()
    unknown, bad = await gw.add("nobody-handles-this"), await gw.add("bad")
    async with running(gw, {"bad": lambda payload: object()}):
        await eventually(lambda: {unknown, bad} <= gw.failures().keys())
    assert gw.failures()[unknown].error.type == "unknown_task"
    assert gw.failures()[bad].error.type == "invalid_output"
    assert not gw.failures()[unknown].error.retryable and not gw.failures()[bad].error.retryable


async def test_refused_claim_stops_the_worker_with_the_problem() -> None:
    gw = FakeGateway()
    gw.claim_status = 401
    client = httpx.AsyncClient(transport=httpx.MockTransport(gw.handle))
    worker = Worker("http://gateway.test", "test-key", {"x": print}, http_client=client)
    with pytest.raises(GatewayError) as raised:
        await worker.run()
    assert raised.value.status == 401
    await client.aclose()


async def test_trace_context_is_injected_into_requests() -> None:
    gw = FakeGateway()
    span_context = trace.SpanContext(
        trace_id=0xABC, span_id=0xDEF, is_remote=False, trace_flags=trace.TraceFlags(1)
    )
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(span_context)))
    try:
        async with running(gw, {"x": print}):
            await eventually(lambda: bool(gw.claim_headers))
    finally:
        otel_context.detach(token)
    assert gw.claim_headers[0]["traceparent"].split("-")[1] == f"{0xABC:032x}"


RUN_TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def test_without_a_tracer_provider_a_handler_still_continues_the_runs_trace() -> None:
    """No span is made per attempt when nothing records it, yet the handler runs in the run's
    trace context, so its own instrumented calls still carry the run's trace."""
    gw = FakeGateway()

    @task("traced")
    async def traced(payload: Any) -> dict[str, Any]:
        span = trace.get_current_span()
        return {"trace_id": format(span.get_span_context().trace_id, "032x"),
                "recording": span.is_recording()}

    untraced = await gw.add("traced")
    run_id = await gw.add("traced", traceparent=RUN_TRACE)
    async with running(gw, [traced]):
        await eventually(lambda: {run_id, untraced} <= set(gw.completions()))
    assert gw.completions()[run_id].output == {"trace_id": RUN_TRACE.split("-")[1],
                                               "recording": False}
    assert gw.completions()[untraced].output == {"trace_id": f"{0:032x}", "recording": False}


async def test_with_a_recording_provider_each_attempt_is_a_consumer_span_in_the_runs_trace(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ostinato.sdk import execution

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # The provider is installed for the SDK only (a global one cannot be unset afterwards).
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    monkeypatch.setattr(execution, "tracer", provider.get_tracer("ostinato.sdk"))
    gw, seen = FakeGateway(), []

    @task("traced")
    async def traced(payload: Any) -> None:
        seen.append(trace.get_current_span().is_recording())
        if payload == "fail":
            raise PermanentError("no")

    done = await gw.add("traced", traceparent=RUN_TRACE)
    failed = await gw.add("traced", "fail", traceparent=RUN_TRACE)
    async with running(gw, [traced]):
        await eventually(lambda: done in gw.completions() and failed in gw.failures())
    provider.shutdown()
    spans = {s.attributes["ostinato.run_id"]: s for s in exporter.get_finished_spans()}
    assert seen == [True, True]
    assert set(spans) == {done, failed}
    for span in spans.values():
        assert (span.name, span.kind) == ("run traced", trace.SpanKind.CONSUMER)
        assert format(span.context.trace_id, "032x") == RUN_TRACE.split("-")[1]
        assert format(span.parent.span_id, "016x") == RUN_TRACE.split("-")[2]
    assert spans[done].status.status_code is trace.StatusCode.UNSET
    assert spans[failed].status.status_code is trace.StatusCode.ERROR


async def test_waiting_for_a_handler_ends_with_it_or_its_time_and_never_cancels_it() -> None:
    from ostinato.sdk.execution import _ended_within

    release = asyncio.Event()
    handler = asyncio.create_task(release.wait())
    assert await _ended_within(handler, 0.01) is False  # its time elapsed first
    assert not handler.done()
    waiter = asyncio.create_task(_ended_within(handler, None))
    await asyncio.sleep(0)
    waiter.cancel()  # the runner cancelled (a shutdown): the handler goes on
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not handler.done()
    waiting = asyncio.create_task(_ended_within(handler, None))
    release.set()
    assert await waiting is True
    assert handler.done() and await _ended_within(handler, 0) is True


async def test_reporter_keeps_one_request_in_flight_and_accumulates_the_next_batch() -> None:
    gate, requests = asyncio.Event(), []

    async def transport(request: p.BatchRequest) -> p.BatchResponse:
        requests.append(request)
        await gate.wait()
        results = [p.BatchItemResult(run_id=c.run_id, kind="complete", status=200)
                   for c in request.completions]
        return p.BatchResponse(results=results)

    reporter = Reporter(transport, worker_id="w")
    reporter.start()
    reporter.complete("r0", 1, None)
    await eventually(lambda: len(requests) == 1)
    for i in range(1, 451):
        reporter.complete(f"r{i}", 1, {"i": i})
    assert len(requests) == 1 and reporter.pending == 451  # still one request in flight
    gate.set()
    await eventually(lambda: reporter.pending == 0)
    assert [len(r.completions) for r in requests] == [1, 200, 200, 50]
    assert await reporter.close(1.0) == []


async def test_reporter_sends_items_whose_linger_timer_fired_early(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """uvloop keeps millisecond time, so the linger timer can fire just before the deadline by
    `time.monotonic()`; the items must still go out at the deadline, not wait for a full
    batch. The reporter reads a hand-moved monotonic clock here, so "not due yet" holds however
    slowly this machine runs."""
    now = [1000.0]
    monkeypatch.setattr(reporter_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    requests: list[p.BatchRequest] = []

    async def transport(request: p.BatchRequest) -> p.BatchResponse:
        requests.append(request)
        return p.BatchResponse(results=[p.BatchItemResult(run_id=c.run_id, kind="complete",
                                                          status=200)
                                        for c in request.completions])

    reporter = Reporter(transport, worker_id="w", linger_seconds=0.05)
    reporter.start()
    reporter.complete("r0", 1, None)
    early = reporter._timer
    assert early is not None
    early.cancel()  # the timer "fires" now, 50 ms before the deadline
    reporter._wake.set()
    await eventually(lambda: reporter._timer is not early)  # woken: re-armed for the deadline
    assert requests == []  # not due yet
    now[0] += 0.05  # the deadline
    await eventually(lambda: len(requests) == 1)
    assert [c.run_id for c in requests[0].completions] == ["r0"]
    assert await reporter.close(1.0) == []


def frozen_reporter(monkeypatch: pytest.MonkeyPatch) -> tuple[Reporter, list[p.BatchRequest]]:
    """A started reporter whose monotonic clock never moves (no linger can expire) and the
    requests it sent, every item answered 200."""
    monkeypatch.setattr(reporter_module, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    requests: list[p.BatchRequest] = []

    async def transport(request: p.BatchRequest) -> p.BatchResponse:
        requests.append(request)
        return p.BatchResponse(results=[
            *(p.BatchItemResult(run_id=c.run_id, kind="complete", status=200)
              for c in request.completions),
            *(p.BatchItemResult(run_id=f.run_id, kind="fail", status=200)
              for f in request.failures),
            *(p.BatchItemResult(run_id=s.run_id, kind="step", status=200)
              for s in request.steps)])

    reporter = Reporter(transport, worker_id="w", linger_seconds=3600.0)
    reporter.start()
    return reporter, requests


async def test_reporter_sends_a_workflow_step_without_lingering(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A workflow awaits each step's answer, so a step makes the batch due at once and takes the
    outcomes pending with it; the monotonic clock never moves here, so no linger can expire."""
    reporter, requests = frozen_reporter(monkeypatch)
    reporter.complete("r0", 1, None)
    await asyncio.sleep(0)
    assert requests == []  # an outcome lingers
    answer = await reporter.step(p.StepItem(run_id="r1", fencing_token=1, seq=0, name="s"))
    assert answer.status == 200
    assert [(len(r.completions), len(r.steps)) for r in requests] == [(1, 1)]
    assert await reporter.close(1.0) == []


async def test_reporter_sends_an_awaited_runs_outcome_without_lingering(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fan-out chunk's end admits the next chunk, so its outcome (urgent: ClaimedRun.awaited)
    goes at once and takes the outcomes pending with it; an ordinary one lingers. The monotonic
    clock never moves here, so no linger can expire."""
    reporter, requests = frozen_reporter(monkeypatch)
    reporter.complete("r0", 1, None)
    await asyncio.sleep(0.01)
    assert requests == []  # an outcome lingers
    reporter.fail("r1", 1, p.ErrorInfo(type="boom", message="x", retryable=False), urgent=True)
    await eventually(lambda: len(requests) == 1)
    assert [c.run_id for c in requests[0].completions] == ["r0"]
    assert [f.run_id for f in requests[0].failures] == ["r1"]
    reporter.complete("r2", 1, None)
    await asyncio.sleep(0.01)
    assert len(requests) == 1  # the urgency went with its request
    reporter.complete("r3", 1, None, urgent=True)
    await eventually(lambda: len(requests) == 2)
    assert [c.run_id for c in requests[1].completions] == ["r2", "r3"]
    assert await reporter.close(1.0) == []


async def test_a_worker_reports_an_awaited_run_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker hands a run the claim calls `awaited` (a fan-out chunk) to its reporter as
    urgent. The reporter's clock never moves here, so an outcome that lingers is never due (until
    the worker stops): only the awaited run's outcome is sent while the worker runs."""
    monkeypatch.setattr(reporter_module, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    gw = FakeGateway()

    @task("echo")
    async def echo(payload: int) -> int:
        return payload

    plain = await gw.add("echo", 1)
    async with running(gw, [echo]) as worker:
        await eventually(lambda: worker._reporter.pending == 1)  # the plain run is over
        assert gw.batches == []  # its outcome lingers
        chunk = await gw.add("echo", 2, awaited=True)
        await eventually(lambda: chunk in gw.completions())
        assert set(gw.completions()) == {plain, chunk}  # the lingering one rode along
        assert len(gw.batches) == 1


def test_protocol_requests_are_strict_and_compact() -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        msgspec.json.decode(b'{"worker_id": "w", "max_runs": 1, "extra": 1}', type=p.ClaimRequest)
    for bad in (b'{"worker_id": "w", "max_runs": 0}', b'{"worker_id": "w", "wait_seconds": 31}'):
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(bad, type=p.ClaimRequest)
    assert msgspec.json.encode(p.BatchRequest(worker_id="w")) == b'{"worker_id":"w"}'
    run = msgspec.json.decode(
        b'{"run_id": "r", "job_id": "j", "tenant_id": "t", "task": "a", "attempt": 1,'
        b' "fencing_token": 3, "lease_expires_at": "2026-12-01T09:00:30Z",'
        b' "lease_ttl_seconds": 30.0, "scheduled_for": "2026-12-01T09:00:00+00:00",'
        b' "idempotency_key": "r/1", "payload": {"a": [1]}, "future_field": true}',
        type=p.ClaimedRun,
    )
    assert (run.scheduled_for, run.payload) == (T0, {"a": [1]})
    result = msgspec.json.decode(b'{"run_id": "r", "kind": "fail", "status": 409}',
                                 type=p.BatchItemResult)
    assert (result.lease_expires_at, result.cancel_requested, result.detail) == (None, False, None)


def test_registration_is_explicit_and_checked() -> None:
    @task("double")
    def double(payload: int) -> int:
        return 2 * payload

    assert (double.name, double(2)) == ("double", 4)  # a Task stays callable like the function
    with pytest.raises(TypeError):
        Worker("http://g", "k", [print])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="twice"):
        Worker("http://g", "k", [Task("a", print), Task("a", print)])
    with pytest.raises(OstinatoWorkerError):
        current()
    assert issubclass(LeaseLost, BaseException) and not issubclass(LeaseLost, Exception)
    assert issubclass(Cancelled, BaseException) and not issubclass(Cancelled, Exception)


def test_a_worker_owning_its_process_settles_the_heap_before_its_loop_starts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ostinato import eventloop
    from ostinato.sdk import worker as worker_module

    calls: list[str] = []

    def run(main: Any) -> None:
        calls.append("loop")
        main.close()  # the worker's coroutine, never started here

    monkeypatch.setattr(eventloop, "settle_heap", lambda: calls.append("settle"))
    monkeypatch.setattr(worker_module.eventloop, "run", run)
    Worker("http://gateway.test", "test-key", {"x": print}).run_forever()
    assert calls == ["settle", "loop"]


def test_settling_the_heap_freezes_what_exists_and_collects_less_often() -> None:
    import subprocess
    import sys

    probe = ("import gc; from ostinato import eventloop; before = gc.get_freeze_count(); "
             "eventloop.settle_heap(); "
             "print(before, gc.get_freeze_count() > 1000, gc.get_threshold())")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split(maxsplit=1)
    assert out == ["0", "True (50000, 20, 20)\n"]
