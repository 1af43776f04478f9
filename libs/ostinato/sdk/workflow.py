"""Durable workflows: ``@workflow`` functions whose steps are checkpointed in the run's history.

A workflow is an ``async`` function registered like a task and run by an ordinary Worker as a
run of its task, so schedules, retries, dead letters, fairness and limits apply unchanged::

    from ostinato.sdk import WorkflowContext, workflow

    @workflow("billing.invoice")
    async def invoice(ctx: WorkflowContext, payload: dict) -> dict:
        charge = await ctx.step("charge", charge_card, payload["amount"], retries=3)
        await ctx.step("email", send_receipt, charge["id"])
        return charge

Each ``ctx.step(name, fn, *args)`` runs ``fn`` (async or plain; plain ones in a thread) and
records its outcome through the worker-gateway under the attempt's fencing token *before* the
workflow goes on. When the run executes again (a crash, a lease expiry, a retry of the run),
recorded steps return their recorded output without running and the first unrecorded step
runs: a retry resumes instead of restarting. The rules (``docs/WORKFLOWS.md``):

- Steps must come in the same order with the same names on every execution (what happens
  between steps may change). A different sequence stops the run with ``NonDeterminismError``
  (type ``non_determinism``, not retried: the run goes to the dead letters, where an operator
  sees the position, the recorded step and the step met).
- Outputs are JSON values; a replayed step returns the decoded JSON (a tuple comes back as a
  list). An output that cannot be encoded fails the step for good (``invalid_output``).
- A step's own retries (``retries=``, exponential ``backoff=`` seconds) rerun only that step,
  in the same attempt. A retryable error left when they are used up fails the *run* (retryable,
  per the job's policy), and the run's next attempt resumes at that step. A permanent error
  (``PermanentError``, or any error the step's retries do not cover) is recorded: the workflow
  gets ``StepFailedError`` at once, and again at that step on every later execution.
- ``timeout_seconds=`` bounds one try of the step (type ``step_timed_out``, retryable).
- A cancel request stops the workflow at the next step boundary (``Cancelled``); a running
  async step gets the usual cooperative cancel.
- ``await ctx.child(task, payload)`` runs another task (a plain job or a workflow) as a child
  run of this one and returns its output; the workflow is suspended (it holds no worker) until
  the child is final. A dead-lettered or cancelled child raises ``ChildFailedError`` with the
  child's error. ``ctx.start_child(...)`` starts one and returns its run id without waiting.
  Cancelling the workflow cancels its children. A child is a step: started once, whatever
  happens to the parent.
- ``await ctx.fan_out(task, chunks, max_concurrency=50, on_complete=task, on_failure=...)``
  runs one child run of ``task`` per chunk, never more than ``max_concurrency`` at once, and
  returns ``{"total", "succeeded", "failed", "failures", "completion_run_id"}`` when all are
  final; ``on_complete`` runs once after them. Failed chunks with ``on_failure="fail"``
  raise ``FanOutFailedError`` (no completion run); with ``"complete"`` the completion runs and
  the failures are listed. The workflow is suspended meanwhile (``docs/WORKFLOWS.md``).
- ``compensate=fn`` registers the step's compensation (a saga): when the workflow fails for
  good (a permanent error, or a retryable one on its last attempt) or is cancelled, the
  compensations of its completed steps run in reverse order, each a recorded step
  (``compensate:<step>``, called with the step's output, ``compensate_retries`` tries) that
  runs once across crashes like any step. Then the original error ends the run. A compensation
  that fails for good ends it with ``CompensationFailed`` (type ``compensation_failed``, into
  the dead letters, naming the step and its compensation).
- ``await ctx.patched("id")`` branches for a code change without breaking runs in flight: a
  recorded marker decides it once per run (``docs/WORKFLOWS.md``, versioning).
- The recorded history is read lazily, one page of at most 1,000 steps at a time, so resuming
  a long workflow holds one page in memory, never the whole history.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec

from ostinato.domain.workflow import (
    ATTRIBUTES_STEP,
    UPDATE_SIGNAL,
    Diverged,
    Execute,
    RecordedStep,
    StepCounter,
    bad_state_name,
    decide,
    decide_patch,
    patch_step,
    reply_step,
    state_step,
    too_large,
)
from ostinato.sdk.context import RunContext, current
from ostinato.sdk.errors import (
    Cancelled,
    GatewayError,
    LeaseLost,
    OstinatoWorkerError,
    PermanentError,
    Suspended,
    Throttled,
    error_info,
)
from ostinato.sdk.tasks import Task, checked_version, payload_spec
from ostinato.wire.worker import (
    MAX_STEPS_PAGE,
    ChildSpec,
    ErrorInfo,
    FanOutSpec,
    StepItem,
    StepRecord,
    WaitSpec,
)

__all__ = ["ChildFailedError", "CompensationFailed", "FanOutFailedError", "NonDeterminismError",
           "SignalTimeout", "StateTooLarge",
           "StepFailedError", "Update", "UpdateTimeout", "WorkflowContext", "WorkflowTimedOut",
           "workflow"]

_encoder = msgspec.json.Encoder()
WorkflowFn = Callable[["WorkflowContext", Any], Awaitable[Any]]


class NonDeterminismError(PermanentError):
    """The workflow met a step other than the one its history recorded at that position
    (`diverged`: the decision, with the position, the recorded step and the step met)."""

    def __init__(self, diverged: Diverged) -> None:
        super().__init__(diverged.message(), type="non_determinism")
        self.diverged = diverged


class StepFailedError(PermanentError):
    """A step failed for good; ``type`` and ``message`` are the step's recorded error."""

    def __init__(self, step: str, type: str, message: str) -> None:
        super().__init__(message, type=type)
        self.step = step


class ChildFailedError(StepFailedError):
    """The child run awaited by ``ctx.child`` was dead-lettered (``type`` and ``message`` are
    its last error) or cancelled (type ``child_cancelled``)."""

    def __init__(self, step: str, type: str, message: str) -> None:
        super().__init__(step, type, message)


class FanOutFailedError(StepFailedError):
    """Chunks of the fan-out awaited by ``ctx.fan_out`` failed and its policy is ``fail``
    (type ``fan_out_failed``; the message counts them)."""


class CompensationFailed(PermanentError):
    """The compensation of step ``step`` failed for good while the workflow compensated: the
    run ends in the dead letters with type ``compensation_failed``, the compensations after it
    (earlier steps) not run; ``cause_type`` is the compensation's own error type."""

    def __init__(self, step: str, compensation: str, cause_type: str, message: str) -> None:
        super().__init__(f"compensation {compensation!r} of step {step!r} failed "
                         f"({cause_type}): {message}", type="compensation_failed")
        self.step = step
        self.compensation = compensation
        self.cause_type = cause_type


class WorkflowTimedOut(PermanentError):
    """The workflow's overall deadline (``@workflow(..., timeout=)``, counted from the run's
    scheduled time, by the database clock) passed: the run fails for good, nothing more runs."""

    def __init__(self, deadline: datetime) -> None:
        super().__init__(f"the workflow's deadline {deadline.isoformat()} has passed",
                         type="workflow_timed_out")
        self.deadline = deadline


class SignalTimeout(OstinatoWorkerError):
    """``wait_for_signal`` ended by its timeout: no signal of that name came in time."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no signal {name!r} arrived before the timeout")
        self.name = name


class UpdateTimeout(SignalTimeout):
    """``next_update`` ended by its timeout: no update came in time."""

    def __init__(self) -> None:
        super().__init__(UPDATE_SIGNAL)
        self.args = ("no update arrived before the timeout",)


class StateTooLarge(ValueError):
    """A value for ``ctx.set`` or an update's answer larger than ``MAX_STATE_BYTES`` encoded
    (the API and the gateway answer 413 to the same)."""


@dataclass(frozen=True, slots=True)
class Update:
    """A request delivered to the running workflow (``POST /v1/runs/{id}/updates``): its id
    (derived from the caller's idempotency key), its name and its payload (decoded JSON)."""

    id: str
    name: str
    payload: Any


UpdateHandler = Callable[[Any], Any]


class _History:
    """The run's recorded steps, read a page at a time as the workflow reaches them."""

    def __init__(self, run: RunContext) -> None:
        self._run = run
        self._page: dict[int, StepRecord] = {}

    async def at(self, seq: int) -> RecordedStep | None:
        if seq >= self._run.steps_done:
            return None
        record = self._page.get(seq)
        if record is None:
            page = await self._run.steps_page(after=seq - 1, limit=MAX_STEPS_PAGE)
            self._page = {r.seq: r for r in page}  # one page held: memory stays flat
            record = self._page.get(seq)
            if record is None:
                raise GatewayError(0, f"the gateway returned no recorded step {seq}")
        return _recorded(record)


class WorkflowContext:
    """What a workflow function gets: its run's context and ``step``."""

    def __init__(self, run: RunContext, deadline: datetime | None = None) -> None:
        self.run = run
        self.deadline = deadline  # the workflow's overall deadline; None: none
        self._counter = StepCounter()
        self._history = _History(run)
        # (step, compensation, the step's output, its tries, backoff), completed steps in order
        self._compensations: list[tuple[str, Callable[..., Any], Any, int, float]] = []
        self._compensating = False
        self._running: asyncio.Future[Any] | None = None  # the async step running now

    async def step(self, name: str, fn: Callable[..., Any], *args: Any, retries: int = 0,
                   backoff: float = 1.0, timeout_seconds: float | None = None,
                   compensate: Callable[[Any], Any] | None = None,
                   compensate_retries: int = 3, **kwargs: Any) -> Any:
        """Run step ``name`` once across every execution of the workflow; see the module doc.
        ``compensate``: called with the step's output if the workflow later fails for good or
        is cancelled (``compensate_retries`` tries)."""
        seq = self._counter.seq
        decision = decide(self._counter, name, await self._at_boundary(seq))
        if isinstance(decision, Diverged):
            raise NonDeterminismError(decision)
        if not isinstance(decision, Execute):
            recorded = decision.step
            if recorded.succeeded:
                self._register(name, compensate, recorded.output, compensate_retries, backoff)
                return recorded.output
            raise StepFailedError(name, recorded.error_type or "step_failed",
                                  recorded.message or "")
        started = time.monotonic()
        self.run.step_started(seq, name)  # GET /v1/runs/{id} shows it running until recorded
        tries = 0
        while True:
            tries += 1
            try:
                output = await self._call(fn, args, kwargs, timeout_seconds)
            except (LeaseLost, Cancelled, asyncio.CancelledError):
                raise
            except Exception as exc:
                info = _step_error(exc)
                if info.retryable and tries <= retries:
                    await asyncio.sleep(backoff * 2 ** (tries - 1))
                    continue
                if info.retryable and not self._ends_run(exc):
                    raise  # the run fails; its next attempt resumes at this step
                if info.retryable:
                    # the run's last attempt, with compensations to run: the failure is
                    # recorded, so that they take the positions after it
                    await self._record(seq, name, None, info, tries, started)
                    raise
                await self._record(seq, name, None, info, tries, started)
                raise StepFailedError(name, info.type, info.message) from exc
            try:
                encoded = msgspec.Raw(_encoder.encode(output))
            except (TypeError, msgspec.EncodeError) as exc:
                info = ErrorInfo(type="invalid_output", message=f"step output is not JSON: {exc}",
                                 retryable=False, classified=True)
                await self._record(seq, name, None, info, tries, started)
                raise StepFailedError(name, info.type, info.message) from exc
            await self._record(seq, name, encoded, None, tries, started,
                               compensable=compensate is not None)
            self._register(name, compensate, output, compensate_retries, backoff)
            return output

    async def sleep(self, duration: timedelta | float) -> None:
        """Wait ``duration`` (seconds or a timedelta, from the moment the wait is recorded, by
        the database clock) without holding the worker: the run is suspended and woken by the
        scheduler; the steps before are replayed, not rerun."""
        seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
        await self._wait("sleep", WaitSpec(kind="timer", seconds=max(0.0, float(seconds))))

    async def sleep_until(self, instant: datetime) -> None:
        """``sleep`` until a timezone-aware instant (at once if it has passed)."""
        if instant.tzinfo is None:
            raise ValueError("sleep_until needs a timezone-aware datetime")
        await self._wait("sleep", WaitSpec(kind="timer", until=instant))

    async def wait_for_signal(self, name: str, *,
                              timeout: timedelta | float | None = None,  # noqa: ASYNC109
                              ) -> Any:  # (a durable timeout, recorded; not asyncio.timeout)
        """The payload of the first signal ``name`` sent to the run (also one sent before this
        wait) that no earlier wait took; the run is suspended until it comes. With ``timeout``
        (seconds or a timedelta) and no signal by then: ``SignalTimeout``."""
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        record = await self._wait(f"signal:{name}", WaitSpec(
            kind="signal", signal=name,
            timeout_seconds=None if seconds is None else max(0.0, float(seconds))))
        if not record.succeeded:
            raise SignalTimeout(name)
        return record.output

    async def patched(self, patch_id: str) -> bool:
        """A change to the workflow's code, made safe for runs already in flight::

            if await ctx.patched("fee-v2"):
                fee = await ctx.step("fee", new_fee, order)
            else:
                fee = await ctx.step("fee", old_fee, order)

        True for a run that reaches this point under the new code (a marker is recorded here,
        and replayed as True); False for a run whose history went past this point under the old
        code (the position keeps its recorded step). Remove the old branch once no run that
        started before the change is in flight (``GET /v1/runs?state=...``)."""
        if not patch_id or len(patch_id) > 200:
            raise ValueError("a patch id has 1 to 200 characters")
        seq = self._counter.seq
        recorded = await self._at_boundary(seq)
        if not decide_patch(self._counter, patch_id, recorded):
            return False
        if recorded is None:
            await self._record(seq, patch_step(patch_id), msgspec.Raw(b"true"), None, 1,
                               time.monotonic())
        return True

    async def set(self, name: str, value: Any) -> None:
        """Publish ``value`` (JSON, at most ``MAX_STATE_BYTES`` encoded) as the run's state
        ``name``: clients read the latest value of each name while the run goes on and after
        (``GET /v1/runs/{id}/state``, ``client.runs.state``). It takes a position like a step
        (``set:<name>``): a set already recorded is not sent again on replay, so a set must
        come at the same place on every execution, like a step."""
        if (problem := bad_state_name(name)) is not None:
            raise ValueError(f"state name: {problem}")
        await self._put(state_step(name), value, f"state {name!r}")

    async def next_update(self, *, timeout: timedelta | float | None = None,  # noqa: ASYNC109
                          ) -> Update:
        """The oldest update sent to the run that no earlier wait took (one sent before this
        wait too); the run is suspended (no worker held) until one comes. Answer it with
        ``reply`` (the caller awaits the answer). With ``timeout`` (seconds or a timedelta) and
        no update by then: ``UpdateTimeout``. Durable like ``wait_for_signal``: a taken update
        is recorded, so a crash before the answer replays it to the next attempt."""
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        record = await self._wait("update", WaitSpec(
            kind="signal", signal=UPDATE_SIGNAL,
            timeout_seconds=None if seconds is None else max(0.0, float(seconds))))
        if not record.succeeded:
            raise UpdateTimeout
        envelope = record.output or {}
        return Update(id=str(envelope.get("id")), name=str(envelope.get("name")),
                      payload=envelope.get("payload"))

    async def reply(self, update: Update, output: Any = None, *,
                    error: BaseException | None = None) -> None:
        """Answer ``update`` with ``output`` (JSON), or refuse it with ``error`` (the caller
        gets its type and message). Recorded at a position (``reply:<update id>``): answered
        once, whatever happens to the run afterwards."""
        if error is None:
            answer: dict[str, Any] = {"ok": True, "name": update.name, "output": output}
        else:
            info = error_info(error) if isinstance(error, Exception) else None
            answer = {"ok": False, "name": update.name, "error": {
                "type": info.type if info else type(error).__name__,
                "message": info.message if info else str(error)}}
        await self._put(reply_step(update.id), answer, f"the answer to update {update.name!r}")

    async def handle_update(self, handlers: dict[str, UpdateHandler], *,
                            timeout: timedelta | float | None = None,  # noqa: ASYNC109
                            ) -> Update:
        """Take the next update (``next_update``), run the handler registered for its name
        with its payload (async or plain; it may call ``ctx.step``) and answer it with what
        the handler returns; returns the update. A name with no handler is refused
        (``unknown_update``), and so is one whose handler raised (its error)."""
        update = await self.next_update(timeout=timeout)
        handler = handlers.get(update.name)
        if handler is None:
            known = ", ".join(sorted(handlers)) or "none"
            await self.reply(update, error=PermanentError(
                f"this workflow handles no update {update.name!r} (it handles: {known})",
                type="unknown_update"))
            return update
        try:
            output = handler(update.payload)
            if inspect.isawaitable(output):
                output = await output
        except (GatewayError, NonDeterminismError, WorkflowTimedOut, Throttled):
            raise
        except Exception as exc:
            await self.reply(update, error=exc)
            return update
        await self.reply(update, output)
        return update

    async def _put(self, step_name: str, value: Any, what: str) -> None:
        """Record ``value`` at the next position under ``step_name`` (a set, an answer);
        replayed, nothing is sent."""
        try:
            encoded = _encoder.encode(value)
        except (TypeError, msgspec.EncodeError) as exc:
            raise TypeError(f"{what} must be JSON: {exc}") from exc
        if (problem := too_large(len(encoded), what)) is not None:
            raise StateTooLarge(problem)
        seq = self._counter.seq
        decision = decide(self._counter, step_name, await self._at_boundary(seq))
        if isinstance(decision, Diverged):
            raise NonDeterminismError(decision)
        if isinstance(decision, Execute):
            await self._record(seq, step_name, msgspec.Raw(encoded), None, 1, time.monotonic())

    async def upsert_attributes(self, values: Mapping[str, Any]) -> None:
        """Set searchable attributes of this run (each declared by the tenant with
        ``PUT /v1/search-attributes/{name}``), e.g. ``await ctx.upsert_attributes({"stage":
        "shipped", "amount": 120})``: the names given replace the run's values, the others
        stay; ``GET /v1/runs?where=stage=shipped`` finds the run. It takes a position like a
        step (recorded as ``AttributesUpserted``): replayed, nothing is sent again. An
        undeclared name or a value of another type: ``GatewayError`` (422), nothing set."""
        if not values:
            raise ValueError("upsert_attributes needs at least one name")
        seq = self._counter.seq
        decision = decide(self._counter, ATTRIBUTES_STEP, await self._at_boundary(seq))
        if isinstance(decision, Diverged):
            raise NonDeterminismError(decision)
        if isinstance(decision, Execute):
            await self._record(seq, ATTRIBUTES_STEP, msgspec.Raw(_encoder.encode(dict(values))),
                               None, 1, time.monotonic())

    async def child(self, task: str | Task, payload: Any = None, *, name: str | None = None,
                    pool: str | None = None, priority: str | None = None,
                    retry: dict[str, Any] | None = None,
                    timeout: timedelta | float | None = None) -> Any:  # noqa: ASYNC109
        """Run ``task`` as a child run and return its output (decoded JSON); the workflow is
        suspended until the child is final. ``name``: the step's name (default
        ``child:<task>``); ``pool``, ``priority`` (default: this run's), ``retry`` (a job's
        retry document) and ``timeout`` (an attempt's limit, seconds or a timedelta) are the
        child run's. A dead-lettered or cancelled child: ``ChildFailedError``."""
        spec = _child_spec(task, payload, pool, priority, retry, timeout, wait=True)
        record = await self._wait(name or f"child:{spec.task}", child=spec)
        if not record.succeeded:
            raise ChildFailedError(record.name, record.error_type or "child_failed",
                                   record.message or "")
        return record.output

    async def start_child(self, task: str | Task, payload: Any = None, *,
                          name: str | None = None, pool: str | None = None,
                          priority: str | None = None, retry: dict[str, Any] | None = None,
                          timeout: timedelta | float | None = None,  # noqa: ASYNC109
                          ) -> str:
        """Start ``task`` as a child run without waiting for it; returns its run id (the same
        on every execution). Its outcome is not the workflow's concern, but cancelling the
        workflow cancels it."""
        spec = _child_spec(task, payload, pool, priority, retry, timeout, wait=False)
        record = await self._wait(name or f"start_child:{spec.task}", child=spec)
        return str(record.output)

    async def fan_out(self, task: str | Task, chunks: Sequence[Any], *,
                      max_concurrency: int = 50, on_complete: str | Task | None = None,
                      on_failure: str = "fail", name: str | None = None,
                      pool: str | None = None, priority: str | None = None,
                      retry: dict[str, Any] | None = None,
                      timeout: timedelta | float | None = None) -> dict[str, Any]:  # noqa: ASYNC109
        """Run ``task`` once per chunk (each chunk its payload), as child runs of this one with
        ids derived from this run and the chunk's index, at most ``max_concurrency`` not final
        at once; suspended until all are final. ``on_complete``: a task run once afterwards
        (payload: the counts and the failures); ``on_failure``: ``"fail"`` raises
        ``FanOutFailedError`` when a chunk failed (dead-lettered or cancelled), ``"complete"``
        goes on with the failures listed. Returns the counts, the failures listed and the
        completion run's id. ``pool``, ``priority``, ``retry``, ``timeout``: each chunk run's."""
        if on_failure not in ("fail", "complete"):
            raise ValueError('on_failure is "fail" or "complete"')
        if not 1 <= max_concurrency <= 10_000:
            raise ValueError("max_concurrency is between 1 and 10,000")
        base = _child_spec(task, None, pool, priority, retry, timeout, wait=True)
        try:
            encoded = [msgspec.Raw(_encoder.encode(c)) for c in chunks]
        except (TypeError, msgspec.EncodeError) as exc:
            raise TypeError(f"a chunk must be JSON: {exc}") from exc
        if not encoded:
            raise ValueError("a fan-out needs at least one chunk")
        complete = on_complete.name if isinstance(on_complete, Task) else on_complete
        spec = FanOutSpec(task=base.task, chunks=encoded, max_concurrency=max_concurrency,
                          on_complete=complete, on_failure=on_failure,  # type: ignore[arg-type]
                          pool=pool, priority=priority, retry=retry,
                          timeout_seconds=base.timeout_seconds)
        record = await self._wait(name or f"fan_out:{spec.task}", fan_out=spec)
        if not record.succeeded:
            raise FanOutFailedError(record.name, record.error_type or "fan_out_failed",
                                    record.message or "")
        return dict(record.output or {})

    async def _wait(self, name: str, wait: WaitSpec | None = None,
                    child: ChildSpec | None = None,
                    fan_out: FanOutSpec | None = None) -> RecordedStep:
        run = self.run
        seq = self._counter.seq
        decision = decide(self._counter, name, await self._at_boundary(seq))
        if isinstance(decision, Diverged):
            raise NonDeterminismError(decision)
        if not isinstance(decision, Execute):
            return decision.step
        result = await run.record_step(StepItem(run_id=run.run_id,
                                                fencing_token=run.fencing_token, seq=seq,
                                                name=name, wait=wait, child=child,
                                                fan_out=fan_out,
                                                deadline=self._deadline()))
        if result.status in (404, 409):
            run.mark_lease_lost()
            raise LeaseLost(run.run_id)
        if result.status != 200:
            raise GatewayError(result.status, result.detail or "wait not recorded")
        if result.deadline_passed and self.deadline is not None:
            raise WorkflowTimedOut(self.deadline)
        if result.cancel_requested:  # the gateway started no child
            run.request_cancel()
            raise Cancelled(run.run_id)
        if result.suspended:
            raise Suspended(run.run_id, wait.kind if wait is not None
                            else "fan_out" if fan_out is not None else "child")
        if result.step is None:
            raise GatewayError(result.status, "the gateway neither suspended nor resumed")
        run.steps_done = max(run.steps_done, seq + 1)
        return _recorded(result.step)

    async def _record(self, seq: int, name: str, output: msgspec.Raw | None,
                      error: ErrorInfo | None, tries: int, started: float, *,
                      compensable: bool = False) -> None:
        run = self.run
        item = StepItem(run_id=run.run_id, fencing_token=run.fencing_token, seq=seq, name=name,
                        output=output, error=error, tries=tries,
                        duration_ms=round((time.monotonic() - started) * 1000, 3),
                        deadline=self._deadline(), compensable=compensable)
        result = await run.record_step(item)
        if result.status in (404, 409):
            run.mark_lease_lost()
            raise LeaseLost(run.run_id)
        if result.status != 200:
            raise GatewayError(result.status, result.detail or "step not recorded")
        if result.deadline_passed and self.deadline is not None:
            raise WorkflowTimedOut(self.deadline)
        run.steps_done = max(run.steps_done, seq + 1)
        if result.suspended:  # recorded, and the run was paused: it leaves the worker
            raise Suspended(run.run_id, "paused")


    async def _at_boundary(self, seq: int) -> RecordedStep | None:
        """The record at position `seq`; with none (the step would run), a cancel requested
        stops the workflow here, and so does the deadline, by this worker's estimate of the
        database clock (the gateway's own check, when recording, is the one that binds).
        Neither stops a replay or a compensation; both stop before the position is taken, so
        the compensations take it."""
        recorded = await self._history.at(seq)
        if recorded is None and not self._compensating:
            if self.run.is_cancelled():
                raise Cancelled(self.run.run_id)
            if self.deadline is not None and self.run.database_now() >= self.deadline:
                raise WorkflowTimedOut(self.deadline)
        return recorded

    def _ends_run(self, exc: Exception) -> bool:
        """A retryable step error that dead-letters the run (its last attempt) and leaves
        compensations to run."""
        return (bool(self._compensations) and self.run.final_attempt
                and not self._compensating and not isinstance(exc, Throttled))

    def _deadline(self) -> datetime | None:
        return None if self._compensating else self.deadline

    def _register(self, name: str, compensate: Callable[[Any], Any] | None, output: Any,
                  tries: int, backoff: float) -> None:
        if compensate is not None and not self._compensating:
            self._compensations.append((name, compensate, output, tries, backoff))

    async def _call(self, fn: Callable[..., Any], args: tuple[Any, ...],
                    kwargs: dict[str, Any], limit: float | None) -> Any:
        """One try of a step; an async one runs as a future a cancel request can stop."""
        if not inspect.iscoroutinefunction(fn):
            return await asyncio.wait_for(asyncio.to_thread(fn, *args, **kwargs), limit)
        self._running = asyncio.ensure_future(fn(*args, **kwargs))
        try:
            return await asyncio.wait_for(self._running, limit)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self.run.is_cancelled() and task is not None and not task.cancelling():
                raise Cancelled(self.run.run_id) from None  # the step was stopped, not us
            raise
        finally:
            self._running = None

    def _stop_running_step(self) -> None:
        """A cancel request: the running async step is cancelled (cooperatively), and the
        workflow stops at this boundary and compensates; a compensation is never stopped, nor
        a step that asked for the cancel itself (it returns, and is recorded)."""
        running = self._running
        if running is not None and not self._compensating and \
                asyncio.current_task() is not running:
            running.cancel()

    async def _compensate(self, cause: BaseException) -> None:
        """Run the registered compensations, the latest step's first, each a recorded step."""
        self._compensating = True
        try:
            for name, fn, output, tries, backoff in reversed(self._compensations):
                label = f"compensate:{name}"
                try:
                    await self.step(label, fn, output, retries=max(0, tries - 1),
                                    backoff=backoff)
                except StepFailedError as exc:
                    raise CompensationFailed(name, label, exc.type, str(exc)) from cause
                except Exception as exc:  # retryable, its tries used up
                    if not self.run.final_attempt:
                        raise  # the run is retried; its next attempt resumes compensating
                    info = error_info(exc)
                    raise CompensationFailed(name, label, info.type, info.message) from cause
        finally:
            self._compensating = False


def _child_spec(task: str | Task, payload: Any, pool: str | None, priority: str | None,
                retry: dict[str, Any] | None, timeout: timedelta | float | None, *,
                wait: bool) -> ChildSpec:
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if seconds is not None and seconds <= 0:
        raise ValueError("a child's timeout must be positive")
    try:
        payload = msgspec.Raw(_encoder.encode(payload))
    except (TypeError, msgspec.EncodeError) as exc:
        raise TypeError(f"a child's payload must be JSON: {exc}") from exc
    return ChildSpec(task=task.name if isinstance(task, Task) else task, payload=payload,
                     pool=pool, priority=priority, retry=retry, timeout_seconds=seconds,
                     wait=wait)


def _recorded(record: StepRecord) -> RecordedStep:
    return RecordedStep(seq=record.seq, name=record.name, succeeded=record.succeeded,
                        output=record.output, error_type=record.error_type,
                        message=record.message)


def _compensates(exc: BaseException, run: RunContext) -> bool:
    """The workflow ends for good with this error: its compensations run first."""
    if isinstance(exc, Cancelled):
        return True
    if isinstance(exc, NonDeterminismError | Throttled) or not isinstance(exc, Exception):
        return False  # a diverged history is the operator's; a throttle is retried
    return not error_info(exc).retryable or run.final_attempt


def _step_error(exc: Exception) -> ErrorInfo:
    if isinstance(exc, TimeoutError):
        return ErrorInfo(type="step_timed_out", message="the step did not finish within its "
                         "timeout", retryable=True, classified=True)
    return error_info(exc)


def workflow(name: str, *, timeout: timedelta | float | None = None,
             version: str | int | None = None, payload: Any = None,
             payload_version: int | None = None,
             accepts: Sequence[int] | None = None) -> Callable[[WorkflowFn], Task]:
    """Register ``fn(ctx, payload)`` as the workflow of task ``name``: pass the result to
    ``Worker([...])`` like any task. ``timeout`` (seconds or a timedelta): the workflow's
    overall deadline, from the run's scheduled time, across every attempt and suspension.
    ``version``: declared (e.g. ``3``), else derived from ``fn``'s code; a run is pinned to
    the version that first started it and only workers serving that version resume it.
    ``payload``, ``payload_version``, ``accepts``: the payload's declared type, as for
    ``@task`` (``ostinato.sdk.tasks``)."""
    declared = checked_version(version)
    spec = payload_spec(name, payload, payload_version, accepts)
    limit = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if limit is not None and limit <= 0:
        raise ValueError("a workflow timeout must be positive")

    def decorate(fn: WorkflowFn) -> Task:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"workflow {name!r} must be an async function")

        async def run(payload: Any) -> Any:
            ctx = current()
            deadline = None if limit is None else ctx.scheduled_for + timedelta(seconds=limit)
            wctx = WorkflowContext(ctx, deadline)
            ctx.take_cancel(wctx._stop_running_step)
            try:
                return await fn(wctx, payload)
            except BaseException as exc:
                if wctx._compensations and _compensates(exc, ctx):
                    await wctx._compensate(exc)
                raise

        run.__name__ = run.__qualname__ = getattr(fn, "__name__", name)
        return Task(name=name, fn=run, version=declared, workflow=True, source=fn,
                    payload=spec)

    return decorate
