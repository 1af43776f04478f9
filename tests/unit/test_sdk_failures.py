"""Failure handling in the worker SDK: classification, throttling, timeouts, cancellation,
graceful release and per-run logs, against the in-process fake gateway
(``ostinato.testing.gateway``).

Synchronisation polls with a deadline (``eventually``), never timed sleeps: that something does
*not* happen is shown once the worker has visibly decided (e.g. its claim loop went back to
waiting for a free slot).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import msgspec
import pytest
import structlog

from ostinato.sdk import (
    Cancelled,
    PermanentError,
    RetryableError,
    Throttled,
    current,
)
from ostinato.sdk.errors import error_info
from ostinato.sdk.logs import LogBuffer, capture_into, capture_processor
from ostinato.sdk.reporter import Reporter
from ostinato.testing.gateway import FakeGateway, running
from ostinato.wire import worker as p
from tests.helpers.waiting import eventually


def _messages(logs: list[p.LogLine] | None) -> list[str]:
    return [line.message for line in logs or []]


# ------------------------------------------------------------------ classification, throttling


async def test_throttled_is_reported_with_retry_after_and_classified() -> None:
    gw = FakeGateway()

    async def call_api(payload: Any) -> None:
        if payload == "timedelta":
            raise Throttled("429 from the API", retry_after=timedelta(minutes=1, seconds=30))
        raise Throttled("slow down", retry_after=2.5)

    as_delta, as_float = await gw.add("api", "timedelta"), await gw.add("api", "float")
    async with running(gw, {"api": call_api}):
        await eventually(lambda: {as_delta, as_float} <= gw.failures().keys())
    assert gw.failures()[as_delta].error == p.ErrorInfo(
        type="throttled", message="429 from the API", retryable=True, classified=True,
        retry_after_seconds=90.0,
    )
    assert gw.failures()[as_float].error.retry_after_seconds == 2.5
    wire = msgspec.json.encode(gw.failures()[as_float].error)
    assert b'"classified":true' in wire and b'"retry_after_seconds":2.5' in wire


def test_throttled_validates_retry_after() -> None:
    assert Throttled("x", retry_after=-3).retry_after_seconds == 0.0
    assert Throttled("x", timedelta(milliseconds=250)).retry_after_seconds == 0.25
    with pytest.raises(ValueError):
        Throttled("x", retry_after=float("nan"))


async def test_classified_flags_distinguish_our_errors_from_arbitrary_exceptions() -> None:
    gw = FakeGateway()

    async def fail(payload: str) -> Any:
        if payload == "retryable":
            raise RetryableError("db busy", type="db_busy")
        if payload == "permanent":
            raise PermanentError("bad input")
        if payload == "bad_output":
            return object()  # not JSON
        raise KeyError(payload)

    ids = {kind: await gw.add("fail", kind)
           for kind in ("retryable", "permanent", "bad_output", "other")}
    unknown = await gw.add("no-such-task")
    async with running(gw, {"fail": fail}):
        await eventually(lambda: {*ids.values(), unknown} <= gw.failures().keys())
    errors = {kind: gw.failures()[run_id].error for kind, run_id in ids.items()}
    summary = {k: (e.type, e.retryable, e.classified) for k, e in errors.items()}
    assert summary == {
        "retryable": ("db_busy", True, True),
        "permanent": ("permanent", False, True),
        "bad_output": ("invalid_output", False, True),
        "other": ("KeyError", True, False),
    }
    assert (gw.failures()[unknown].error.type, gw.failures()[unknown].error.classified) == (
        "unknown_task", True)
    assert b"classified" not in msgspec.json.encode(errors["other"])  # default stays off the wire
    assert all(e.retry_after_seconds is None for e in errors.values())
    assert error_info(Cancelled("r")).classified is True


# ------------------------------------------------------------------------------------ timeouts


async def test_timeout_interrupts_an_async_handler_and_reports_attempt_timed_out() -> None:
    gw, unwound = FakeGateway(), asyncio.Event()

    async def hang(payload: Any) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            unwound.set()
            raise

    async def heartbeating(payload: Any) -> None:
        try:
            while True:  # mostly inside heartbeat() when the deadline strikes
                await current().heartbeat()
        finally:  # an endless loop ends only when interrupted (how depends on where it was)
            hb_unwound.set()

    async def stubborn(payload: Any) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await let_go.wait()  # swallows it and keeps waiting

    hb_unwound, let_go = asyncio.Event(), asyncio.Event()
    run_id = await gw.add("hang", timeout_seconds=0.05)
    hb = await gw.add("heartbeating", timeout_seconds=0.05)
    ignoring = await gw.add("stubborn", timeout_seconds=0.05)
    handlers = {"hang": hang, "heartbeating": heartbeating, "stubborn": stubborn}
    async with running(gw, handlers) as worker:
        worker._attempts.unwind_seconds = 0.05
        await eventually(lambda: {run_id, hb, ignoring} <= gw.failures().keys())
    let_go.set()  # the abandoned handler may end now
    errors = [gw.failures()[r].error for r in (run_id, hb, ignoring)]
    assert {(e.type, e.retryable, e.classified) for e in errors} == {
        ("attempt_timed_out", True, True)}
    assert "0.05 s" in errors[0].message
    # Interrupted, though under load the report may come first (after unwind_seconds).
    await eventually(lambda: unwound.is_set() and hb_unwound.is_set())


async def test_timeout_of_a_sync_handler_is_reported_at_the_deadline_and_keeps_its_slot() -> None:
    gw, release, finished = FakeGateway(), threading.Event(), threading.Event()

    def block(payload: Any) -> str:
        release.wait(10)
        finished.set()
        return "too late"

    run_id = await gw.add("block", timeout_seconds=0.05)
    async with running(gw, {"block": block}, concurrency=1) as worker:
        await eventually(lambda: run_id in gw.failures())
        assert gw.failures()[run_id].error.type == "attempt_timed_out"
        assert not finished.is_set()  # reported while the thread still runs
        claims = len(gw.claims)
        # The attempt's end woke the claim loop (the slot-freed event, set before the report
        # went out); it counts the abandoned thread's slot as taken and waits again, or (the
        # bug) claims at once.
        await eventually(lambda: len(gw.claims) > claims or not worker._slot_freed.is_set())
        assert worker._attempts.orphaned_threads == 1
        assert len(gw.claims) == claims  # its thread still holds the only slot: no claim
        release.set()
        await eventually(lambda: len(gw.claims) > claims)  # slot back once the thread ended
        assert worker._attempts.orphaned_threads == 0
    assert run_id not in gw.completions()  # the late result is discarded


async def test_a_fast_handler_is_unaffected_by_its_timeout() -> None:
    gw = FakeGateway()

    async def quick(payload: int) -> int:
        await asyncio.sleep(0)
        return payload * 2

    run_id = await gw.add("quick", 21, timeout_seconds=5.0)
    async with running(gw, {"quick": quick}):
        await eventually(lambda: run_id in gw.completions())
    assert gw.completions()[run_id].output == 42


# -------------------------------------------------------------------------------- cancellation


async def test_cancel_requested_stops_an_async_handler_that_never_heartbeats() -> None:
    gw, seen = FakeGateway(), []

    async def busy(payload: Any) -> str:
        try:
            for _ in range(1_000_000):
                await asyncio.sleep(0.001)  # working, never calls heartbeat()
        except asyncio.CancelledError as exc:
            seen.append(str(exc))
            raise

    run_id = await gw.add("busy", ttl=0.06)  # periodic heartbeats every 20 ms
    gw.cancel.add(run_id)
    async with running(gw, {"busy": busy}):
        await eventually(lambda: run_id in gw.failures())
    error = gw.failures()[run_id].error
    assert (error.type, error.retryable, error.classified) == ("cancelled", False, True)
    assert seen and "cancel" in seen[0]
    assert run_id not in gw.completions()


async def test_heartbeat_raises_cancelled_at_the_safe_point() -> None:
    gw, raised = FakeGateway(), []

    async def polite(payload: Any) -> None:
        try:
            while True:
                await current().heartbeat()
        except Cancelled:
            raised.append("Cancelled")
            raise

    run_id = await gw.add("polite", ttl=0.06)
    gw.cancel.add(run_id)
    async with running(gw, {"polite": polite}):
        await eventually(lambda: run_id in gw.failures())
    assert raised == ["Cancelled"]  # heartbeat() delivers Cancelled, not CancelledError
    assert gw.failures()[run_id].error.type == "cancelled"


async def test_completion_is_still_reported_when_the_handler_ignores_cancel() -> None:
    gw = FakeGateway()

    async def stubborn(payload: Any) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # refuses to stop: finishes its work
        return "finished anyway"

    def oblivious(payload: Any) -> str:
        ctx = current()
        while not ctx.is_cancelled():  # a sync handler cannot be interrupted
            threading.Event().wait(0.001)
        return "sync finished anyway"

    a, s = await gw.add("stubborn", ttl=0.06), await gw.add("oblivious", ttl=0.06)
    gw.cancel.update({a, s})
    async with running(gw, {"stubborn": stubborn, "oblivious": oblivious}):
        await eventually(lambda: {a, s} <= gw.completions().keys())
    assert gw.completions()[a].output == "finished anyway"
    assert gw.completions()[s].output == "sync finished anyway"
    assert not gw.failures()


async def test_lease_lost_interrupts_an_async_handler_and_reports_nothing() -> None:
    gw, unwound = FakeGateway(), asyncio.Event()

    async def oblivious(payload: Any) -> str:
        try:
            await asyncio.Event().wait()
        finally:
            unwound.set()
        return "never"

    run_id = await gw.add("oblivious", ttl=0.06)
    gw.heartbeat_status[run_id] = 409
    async with running(gw, {"oblivious": oblivious}):
        await asyncio.wait_for(unwound.wait(), 5)
    assert run_id not in gw.completions().keys() | gw.failures().keys()


# ---------------------------------------------------------------------------- graceful shutdown


async def test_stop_finishes_within_the_grace_then_releases_the_rest() -> None:
    gw, started, unwound, thread_go = FakeGateway(), [], asyncio.Event(), threading.Event()

    async def work(payload: str) -> str:
        started.append(payload)
        if payload == "quick":
            await eventually(lambda: len(started) == 3)
            return "done"
        try:
            await asyncio.Event().wait()
        finally:
            unwound.set()
        return "never"

    def sync_work(payload: str) -> str:
        started.append(payload)
        thread_go.wait(10)
        return "late"

    quick = await gw.add("work", "quick", fencing_token=2)
    stuck = await gw.add("work", "stuck", fencing_token=3)
    stuck_sync = await gw.add("sync", "stuck-sync", fencing_token=4)
    try:
        async with running(gw, {"work": work, "sync": sync_work}, shutdown_grace_seconds=0.1):
            await eventually(lambda: len(started) == 3)
    finally:
        thread_go.set()
    assert set(gw.completions()) == {quick}
    assert {r: i.fencing_token for r, i in gw.releases().items()} == {stuck: 3, stuck_sync: 4}
    assert not gw.failures()  # no attempt used up, nothing recorded as failed
    assert unwound.is_set()


# ------------------------------------------------------------------------------ log capture


@pytest.fixture(autouse=True)
def default_structlog() -> Iterator[None]:
    """Builtin structlog defaults for each test (other tests may configure it globally)."""
    saved = structlog.get_config()
    structlog.reset_defaults()
    yield
    structlog.configure(**saved)



async def test_structlog_and_stdlib_logs_are_captured_per_run() -> None:
    gw = FakeGateway()
    slog, stdlog = structlog.get_logger("user.handler"), logging.getLogger("user.stdlib")

    async def charge(payload: dict[str, int]) -> str:
        slog.info("charging", amount=payload["amount"], card="visa")
        stdlog.warning("slow gateway %s", "eu-1", extra={"latency_ms": 812})
        if payload["amount"] < 0:
            try:
                raise ValueError("negative")
            except ValueError:
                slog.exception("charge.rejected")
            raise PermanentError("negative amount")
        return "ok"

    def report(payload: Any) -> str:
        stdlog.error("from a thread: %d", 7)
        return "ok"

    ok, bad = await gw.add("charge", {"amount": 5}), await gw.add("charge", {"amount": -1})
    threaded = await gw.add("report")
    async with running(gw, {"charge": charge, "report": report}):
        await eventually(lambda: {ok, threaded} <= gw.completions().keys())
        await eventually(lambda: bad in gw.failures())
        slog.info("outside any handler")  # not captured: no run context
    logs = gw.completions()[ok].logs
    assert logs is not None and _messages(logs) == ["charging", "slow gateway eu-1"]
    assert (logs[0].level, logs[0].fields) == ("info", {"amount": 5, "card": "visa"})
    assert logs[1].level == "warning"
    assert logs[1].fields == {"logger": "user.stdlib", "latency_ms": 812}
    assert 0 <= logs[0].t <= logs[1].t < 5
    failed = gw.failures()[bad].logs
    assert _messages(failed) == ["charging", "slow gateway eu-1", "charge.rejected"]
    assert failed is not None and failed[2].level == "error"
    assert "ValueError: negative" in failed[2].fields["exception"]
    assert _messages(gw.completions()[threaded].logs) == ["from a thread: 7"]
    # the SDK's own lines (run.completed, ...) are not the handler's logs
    assert not any(m.startswith("run.") for m in _messages(logs))


async def test_structlog_rendered_through_stdlib_is_captured_once() -> None:
    gw = FakeGateway()
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
    )

    async def handler(payload: Any) -> None:
        structlog.get_logger("user.bridge").warning("once", n=1)
        logging.getLogger("user.bridge").warning("plain record")

    run_id = await gw.add("bridge")
    async with running(gw, {"bridge": handler}):
        await eventually(lambda: run_id in gw.completions())
    logs = gw.completions()[run_id].logs
    assert _messages(logs) == ["once", "plain record"]
    assert logs is not None and logs[0].fields == {"n": 1}


async def test_logs_are_bounded_first_and_last_half_kept() -> None:
    gw = FakeGateway()
    noisy = logging.getLogger("user.noisy")

    async def chatty(payload: Any) -> None:
        for i in range(2000):
            noisy.warning("line %d", i)

    run_id = await gw.add("chatty")
    async with running(gw, {"chatty": chatty}):
        await eventually(lambda: run_id in gw.completions())
    messages = _messages(gw.completions()[run_id].logs)
    assert len(messages) == 501
    assert messages[:250] == [f"line {i}" for i in range(250)]
    assert messages[250].startswith("1500 log lines dropped")
    assert messages[251:] == [f"line {i}" for i in range(1750, 2000)]


def test_log_buffer_bounds_bytes_and_cuts_fields() -> None:
    buffer = LogBuffer(omit={"run_id": "r1"})
    for i in range(100):
        buffer.add("info", f"{i:04d}" + "x" * 20_000, {"run_id": "r1", "obj": object(),
                                                      "big": "y" * 5000, "ok": [1, 2]})
    lines = buffer.lines()
    assert lines is not None
    sizes = sum(len(line.message.encode()) for line in lines)
    assert sizes <= p.MAX_LOG_BYTES + 200 and len(lines) < 100
    assert buffer.dropped == 100 - (len(lines) - 1)
    assert all(len(line.message) <= p.MAX_LOG_MESSAGE_CHARS for line in lines)
    first = lines[0].fields
    assert "run_id" not in first and first["ok"] == [1, 2]
    assert len(first["big"]) == 1024 and first["obj"].startswith("<object object")
    assert lines[-1].message.startswith("0099")  # the newest line is kept
    assert LogBuffer().lines() is None
    msgspec.json.decode(msgspec.json.encode(lines), type=p.Logs)  # within the wire limits


def test_structured_tracebacks_and_odd_values_are_captured_as_json_safe_text() -> None:
    buffer, context = LogBuffer(), contextvars.copy_context()
    capture_into(context, buffer)
    event = {"event": "boom", "level": "error", "n": 2**70, "exception": [
        {"exc_type": "ValueError", "exc_value": "bad", "frames": [
            {"filename": "h.py", "lineno": 3, "name": "handler"}]}]}
    context.run(capture_processor, None, "error", dict(event))
    capture_processor(None, "info", {"event": "outside"})  # no capture target: ignored
    lines = buffer.lines()
    assert lines is not None and len(lines) == 1
    assert lines[0].fields == {
        "n": str(2**70),
        "exception": '  File "h.py", line 3, in handler\nValueError: bad',
    }


async def test_reporter_splits_batches_by_log_volume() -> None:
    requests: list[p.BatchRequest] = []

    async def transport(request: p.BatchRequest) -> p.BatchResponse:
        requests.append(request)
        results = [p.BatchItemResult(run_id=c.run_id, kind="complete", status=200)
                   for c in request.completions]
        results += [p.BatchItemResult(run_id=r.run_id, kind="release", status=200)
                    for r in request.releases]
        return p.BatchResponse(results=results)

    reporter = Reporter(transport, worker_id="w", max_log_bytes=10_000)
    lines = [p.LogLine(t=0.0, level="info", message="m" * 1000) for _ in range(4)]
    for i in range(6):
        reporter.complete(f"r{i}", 1, None, logs=lines)
    reporter.release("r9", 2)
    reporter.start()
    await eventually(lambda: reporter.pending == 0)
    assert await reporter.close(1.0) == []
    assert [len(r.completions) for r in requests] == [2, 2, 2]
    assert [r.run_id for req in requests for r in req.releases] == ["r9"]


# ------------------------------------------------------------------------------------ protocol


def test_protocol_additions_decode_from_old_peers_and_stay_compact() -> None:
    run = msgspec.json.decode(
        b'{"run_id": "r", "job_id": "j", "tenant_id": "t", "task": "a", "attempt": 1,'
        b' "fencing_token": 3, "lease_expires_at": "2026-12-01T09:00:30Z",'
        b' "lease_ttl_seconds": 30.0, "scheduled_for": "2026-12-01T09:00:00Z",'
        b' "idempotency_key": "r"}',
        type=p.ClaimedRun,
    )
    assert run.timeout_seconds is None
    error = msgspec.json.decode(b'{"type": "X", "message": "m", "retryable": true}',
                                type=p.ErrorInfo)
    assert (error.classified, error.retry_after_seconds) == (False, None)
    assert msgspec.json.decode(b'{"run_id": "r", "kind": "release", "status": 200}',
                               type=p.BatchItemResult).kind == "release"
    batch = p.BatchRequest(worker_id="w", releases=[p.ReleaseItem(run_id="r", fencing_token=2)])
    assert msgspec.json.encode(batch) == (
        b'{"worker_id":"w","releases":[{"run_id":"r","fencing_token":2}]}'
    )
    done = p.CompletionItem(run_id="r", fencing_token=1, logs=[p.LogLine(t=0.5, level="info",
                                                                         message="hi")])
    assert msgspec.json.encode(done) == (
        b'{"run_id":"r","fencing_token":1,"logs":[{"t":0.5,"level":"info","message":"hi"}]}'
    )
    assert p.run_path("r1", "release") == "/v1/worker/runs/r1/release"
    assert msgspec.json.encode(p.ReleaseRequest(fencing_token=5)) == b'{"fencing_token":5}'
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"type": "t", "message": "", "retryable": true,'
                            b' "retry_after_seconds": -1}', type=p.ErrorInfo)
