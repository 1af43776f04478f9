"""Run one SDK handler in-process, as a worker would, with no gateway, database or broker: the
handler sees a real `RunContext` through `current()`, its heartbeats are captured, and a test
can request a cancel or take the lease away (as Temporal's `ActivityEnvironment` does).

    env = HandlerEnvironment(attempt=2)
    env.cancel_after_heartbeats(3)
    with pytest.raises(Cancelled):
        await env.run(invoice, {"invoice": 7, "amount_cents": 1200})
    assert env.heartbeats == 3

Sync handlers run in a thread with the context copied, so `current().heartbeat_sync()` works.

Workflows (`ostinato.sdk.workflow`) record their steps in the environment's `journal`, in
memory; `next_attempt()` gives the same run's next attempt over the same journal, so a test can
show that a resumed workflow replays its recorded steps without running them:

    env = HandlerEnvironment(task="billing.invoice")
    with pytest.raises(RuntimeError):
        await env.run(invoice, payload)          # the email step crashed
    again = env.next_attempt()
    await again.run(invoice, payload)            # charge replayed, email ran
    assert [s.name for s in again.journal.steps] == ["charge", "email"]
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from ostinato.domain import workflow as wf
from ostinato.sdk.context import RunContext, use_context
from ostinato.sdk.tasks import Handler, Task, decode_payload, registry
from ostinato.wire.worker import BatchItemResult, ChildSpec, ErrorInfo, StepItem, StepRecord

__all__ = ["HandlerEnvironment", "MemoryJournal"]


class MemoryJournal:
    """A run's workflow steps kept in memory, judged by the gateway's own rules (the step model,
    `ostinato.domain.workflow`): a step from an attempt older than the newest one seen, or sent
    while the run is suspended, is answered 409 and not recorded; a resent position 200; a
    position beyond the next 422.

    Waits behave as on the gateway, with `now` as the database clock: a due timer or a signal
    already sent resumes at once; otherwise the run is `suspended` (the workflow unwinds) until
    the test calls `advance_to` (timers, signal timeouts) or `send_signal`, then runs the next
    attempt. Children are recorded in `children` (the ChildSpec by workflow position, its run
    id `child-<seq>`); a waited-for child suspends the run until `finish_child`. `events` lists
    what the gateway and the scheduler would append to the run's stream, as (event type,
    position, step name). A fan-out is not modelled: its report is kept as a plain step.
    `running` is the step executing now, as `GET /v1/runs/{id}` would show it ((position,
    name), None between steps)."""

    def __init__(self, now: datetime | None = None) -> None:
        self.steps: list[StepItem] = []
        self.newest_token = 0
        self.pages_read = 0
        self.now = now or datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
        self.suspended: tuple[StepItem, datetime | None] | None = None  # the wait, its due time
        self.signals: dict[str, list[Any]] = {}
        self.children: dict[int, ChildSpec] = {}
        self.events: list[tuple[str, int | None, str | None]] = []
        self._started: tuple[int, str] | None = None

    @property
    def running(self) -> tuple[int, str] | None:
        """The step that began and is not recorded yet (the gateway's rule for a running step)."""
        start = self._started
        return start if start is not None and start[0] >= len(self.steps) else None

    def started(self, ctx: Any, seq: int, name: str) -> None:
        self._started = (seq, name)

    def record(self, item: StepItem) -> asyncio.Future[BatchItemResult]:
        fut: asyncio.Future[BatchItemResult] = asyncio.get_running_loop().create_future()
        fut.set_result(self._record(item))
        return fut

    def _record(self, item: StepItem) -> BatchItemResult:
        kind = wf.kind_of(wait=item.wait.kind if item.wait else None,
                          child_awaited=item.child.wait if item.child else None,
                          fan_out=item.fan_out is not None, name=item.name)
        run = wf.RunAt(self.newest_token, self.suspended is None, len(self.steps))
        verdict = wf.judge(run, wf.Report(item.seq, item.fencing_token, kind, item.deadline),
                           self.now)
        answer = BatchItemResult(run_id=item.run_id, kind="step",
                                 status=wf.STATUS.get(verdict, 200))
        if verdict is wf.Verdict.STALE:
            self.events.append(("StaleWriteRejected", None, None))
        elif verdict is wf.Verdict.DEADLINE_PASSED:
            answer = BatchItemResult(run_id=item.run_id, kind="step", status=200,
                                     deadline_passed=True)
        elif verdict is not wf.Verdict.RECORD:
            pass  # a repeat or a gap (no pause, no cancel here): the answer alone
        elif item.child is not None:
            plan = wf.child_plan(awaited=item.child.wait, exists=item.seq in self.children,
                                 final=False)
            self.children[item.seq] = item.child
            if plan.create or plan.start_again:
                self.events.append(("ChildStarted", item.seq, item.name))
            if plan.then == "suspend":
                answer = self._suspend(item, None)
            else:
                answer = self._resolve(item, f"child-{item.seq}", event=None)
        elif item.wait is not None:
            answer = self._wait(item, item.wait)
        else:
            self.steps.append(item)
            if item.fan_out is None:
                self.events.append(("StepFailed" if item.error else "StepCompleted", item.seq,
                                    item.name))
        return answer

    def _wait(self, item: StepItem, wait: Any) -> BatchItemResult:
        if wait.kind == "timer":
            decided = wf.timer_wait(wait.until, wait.seconds, self.now)
        else:
            decided = wf.signal_wait(bool(self.signals.get(wait.signal)),
                                     wait.timeout_seconds, self.now)
        if isinstance(decided, wf.Suspends):
            return self._suspend(item, decided.wake_at)
        if decided.event == "TimerFired":
            assert decided.due is not None
            return self._resolve(item, {"due_at": decided.due.isoformat()}, event="TimerFired")
        if decided.event == "SignalDelivered":
            return self._resolve(item, self.signals[wait.signal].pop(0),
                                 event="SignalDelivered")
        return self._resolve(item, None, timed_out=True, event="SignalTimedOut")

    def _suspend(self, item: StepItem, due: datetime | None) -> BatchItemResult:
        self.suspended = (item, due)
        self.events.append(("RunSuspended", item.seq, item.name))
        return BatchItemResult(run_id=item.run_id, kind="step", status=200, suspended=True)

    def _resolve(self, item: StepItem, output: Any, *, timed_out: bool = False,
                 error: ErrorInfo | None = None, event: str | None) -> BatchItemResult:
        if timed_out:
            error = ErrorInfo(type="signal_timeout", message="no signal", retryable=False)
        recorded = StepItem(run_id=item.run_id, fencing_token=item.fencing_token, seq=item.seq,
                            name=item.name, output=output, error=error, wait=item.wait)
        self.steps.append(recorded)
        self.suspended = None
        if event is not None:
            self.events.append((event, item.seq, item.name))
        return BatchItemResult(run_id=item.run_id, kind="step", status=200, step=StepRecord(
            seq=item.seq, name=item.name, succeeded=error is None, output=output,
            error_type=error.type if error else None, message=error.message if error else None))

    def wake(self) -> None:
        """The run is woken with its wait unfinished and nothing recorded: cancelled while it
        waited, with compensations to run (claim the next attempt with cancel_requested)."""
        self.suspended = None

    def finish_child(self, output: Any = None, *, error_type: str | None = None,
                     message: str = "") -> None:
        """The child the run waits for is final: succeeded with `output`, or (`error_type`)
        dead-lettered with that error (`child_cancelled`: cancelled)."""
        if self.suspended is None or self.suspended[0].child is None:
            raise AssertionError("the run does not wait for a child")
        error = None if error_type is None else ErrorInfo(type=error_type, message=message,
                                                          retryable=False)
        self._resolve(self.suspended[0], None if error else output, error=error,
                      event="ChildFinished")
        self.events.append(("RunWoken", None, None))

    def advance_to(self, instant: datetime) -> None:
        """The database clock moves on, as the scheduler's wake poll sees it: a suspended timer
        or signal wait due by then ends; one whose workflow deadline came first is woken with
        nothing recorded (it then fails)."""
        self.now = instant
        if self.suspended is None:
            return
        item, due = self.suspended
        wait_due = due is not None and due <= instant
        if not wait_due and (item.deadline is None or item.deadline > instant):
            return
        event, _cause = wf.wake(item.wait.kind if item.wait else "child", wait_due)
        if event is None:
            self.suspended = None
        elif event == "TimerFired":
            assert due is not None
            self._resolve(item, {"due_at": due.isoformat()}, event=event)
        else:
            self._resolve(item, None, timed_out=True, event=event)
        self.events.append(("RunWoken", None, None))

    def send_signal(self, name: str, payload: Any = None) -> None:
        """A signal arrives: it ends a wait for it, or is kept for the next one."""
        self.events.append(("SignalReceived", None, name))
        waiting = self.suspended is not None and self.suspended[0].wait is not None \
            and wf.waits_on(state="suspended", wait_reason=self.suspended[0].wait.kind,
                            waited=self.suspended[0].wait.signal, reason="signal", what=name)
        delivered, woken = wf.ended_wait(waiting, paused=False)
        if delivered:
            assert self.suspended is not None
            self._resolve(self.suspended[0], payload, event="SignalDelivered")
            if woken:
                self.events.append(("RunWoken", None, None))
        else:
            self.signals.setdefault(name, []).append(payload)

    async def page(self, ctx: RunContext, after: int, limit: int) -> list[StepRecord]:
        self.pages_read += 1
        return [StepRecord(seq=s.seq, name=s.name, succeeded=s.error is None,
                           output=None if s.output is None else _decode(s.output),
                           error_type=s.error.type if s.error else None,
                           message=s.error.message if s.error else None)
                for s in self.steps[after + 1:after + 1 + limit]]


def _decode(output: Any) -> Any:
    return msgspec.json.decode(output) if isinstance(output, msgspec.Raw) else output


class HandlerEnvironment:
    """One attempt of one run, with the identity a claim would give it."""

    def __init__(self, *, task: str = "test", attempt: int = 1, fencing_token: int | None = None,
                 run_id: str | None = None, tenant_id: str | None = None,
                 job_id: str | None = None, scheduled_for: datetime | None = None,
                 lease_ttl_seconds: float = 30.0, timeout_seconds: float | None = None,
                 journal: MemoryJournal | None = None, final_attempt: bool = False,
                 cancel_requested: bool = False) -> None:
        self.run_id = run_id or str(uuid.uuid4())
        self.journal = journal or MemoryJournal()
        token = attempt if fencing_token is None else fencing_token
        self.journal.newest_token = max(self.journal.newest_token, token)
        self.context = RunContext(
            run_id=self.run_id, job_id=job_id or str(uuid.uuid4()),
            tenant_id=tenant_id or str(uuid.uuid4()), task=task, attempt=attempt,
            fencing_token=token,
            idempotency_key=f"run:{self.run_id}",  # what the gateway gives every attempt
            scheduled_for=scheduled_for or datetime(2026, 12, 1, 9, 0, tzinfo=UTC),
            lease_expires_at=datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
            + timedelta(seconds=lease_ttl_seconds),
            lease_ttl_seconds=lease_ttl_seconds, heartbeat_hook=self._heartbeat,
            timeout_seconds=timeout_seconds, steps_done=len(self.journal.steps),
            journal=self.journal, final_attempt=final_attempt, cancel_requested=cancel_requested,
            step_starts=True,
        )
        self.heartbeats = 0
        self._cancel_after: int | None = None
        self._lose_after: int | None = None

    def next_attempt(self, *, final_attempt: bool = False,
                     cancel_requested: bool = False) -> HandlerEnvironment:
        """The same run's next attempt (a newer fencing token) over the same journal;
        `final_attempt`: its retries are used up; `cancel_requested`: claimed with a cancel
        requested (a workflow woken to compensate)."""
        ctx = self.context
        return HandlerEnvironment(task=ctx.task, attempt=ctx.attempt + 1,
                                  fencing_token=ctx.fencing_token + 1, run_id=self.run_id,
                                  tenant_id=ctx.tenant_id, job_id=ctx.job_id,
                                  scheduled_for=ctx.scheduled_for,
                                  lease_ttl_seconds=ctx.lease_ttl_seconds,
                                  timeout_seconds=ctx.timeout_seconds, journal=self.journal,
                                  final_attempt=final_attempt,
                                  cancel_requested=cancel_requested)

    def cancel(self) -> None:
        """An operator cancelled the run: the next heartbeat raises `Cancelled`."""
        self.context.request_cancel()

    def lose_lease(self) -> None:
        """Another attempt took the run: the next heartbeat raises `LeaseLost`."""
        self.context.mark_lease_lost()

    def cancel_after_heartbeats(self, n: int) -> None:
        self._cancel_after = n

    def lose_lease_after_heartbeats(self, n: int) -> None:
        self._lose_after = n

    async def _heartbeat(self, ctx: RunContext) -> None:
        self.heartbeats += 1
        if self._cancel_after is not None and self.heartbeats >= self._cancel_after:
            ctx.request_cancel()
        if self._lose_after is not None and self.heartbeats >= self._lose_after:
            ctx.mark_lease_lost()

    async def run(self, handler: Task | Handler, payload: Any = None) -> Any:
        """The handler's result; what it raises (PermanentError, Cancelled, ...) is raised."""
        [registered] = registry([handler if isinstance(handler, Task)
                                 else Task(self.context.task, handler)]).values()
        if registered.payload is not None:  # as a worker does: PermanentError invalid_payload
            payload = decode_payload(self.context.task, registered.payload, payload)
        loop = asyncio.get_running_loop()
        self.context.bind_loop(loop)
        with use_context(self.context):
            if registered.is_async:
                return await registered.fn(payload)
            context = contextvars.copy_context()
            return await loop.run_in_executor(None, context.run, registered.fn, payload)
