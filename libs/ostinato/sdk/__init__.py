"""Ostinato worker SDK: run your handlers for runs leased from the worker-gateway.

Model
-----
A worker is your own process. It long-polls ``POST /v1/worker/claim`` for as many runs as it has
free slots (never more than ``concurrency`` in flight), calls the handler registered for each
run's task with the decoded JSON payload, and reports the outcome. Handlers are ordinary
functions, ``async def`` or plain (plain ones run in a thread pool)::

    from ostinato.sdk import PermanentError, Worker, current, task

    @task("billing.charge")
    async def charge(payload: dict) -> dict:
        ctx = current()                      # run_id, attempt (1-based), retries, idempotency_key
        await ctx.heartbeat()                # before an effect you must not duplicate
        if payload["amount"] <= 0:
            raise PermanentError("bad amount", type="invalid_amount")
        return {"charged": payload["amount"]}

    Worker("http://127.0.0.1:8081", api_key, [charge], concurrency=50).run_forever()

With a tenant's API key the worker runs that tenant's runs; with the admin key it is a shared
worker running every tenant's runs in its pools (``current().tenant_id`` tells whose). Its
``concurrency`` is declared on every claim as the slots fair dispatch shares among tenants.

Every attempt holds a lease identified by a fencing token. Outcomes and heartbeats for many runs
travel in one ``POST /v1/worker/batch`` request, flushed at 200 items or 5 ms after the first
pending one; heartbeats for all in-flight runs go out every ``lease_ttl/3``::

    claim ──> in custody ──handler──> returned ─────────────> completion ──┐
                 │   ▲                raised ───────────────> failure ─────┤
                 │   │                timed out, cancelled ─> failure ─────┼─> batch ─> dropped
                 │   │                shutdown past grace ──> release ─────┤   once the gateway
                 │   │                LeaseLost ────────────> (no outcome) ┘   answered for it
                 │   └─ heartbeat every ttl/3 (renews; relays cancel requests)
                 └─ heartbeat answered 409/404 ─> lease lost: handler interrupted, no outcome

Execution is at-least-once: pass ``current().idempotency_key`` (the same for every attempt of
the run) to external APIs, and make writes in your own PostgreSQL database idempotent and fenced
with ``ostinato.sdk.effects`` (``apply_once`` records the effect with a dedupe row in your
transaction, ``fence`` refuses a write from an attempt older than one already applied; the
module documents the same pattern for other stores).

Failure behaviour
-----------------
Every failure carries ``type`` (what retry policies match on), ``retryable`` and ``classified``
(true when the handler raised one of our errors or the SDK decided; false for an arbitrary
exception, whose retryable default the job's policy may override, by type or wholesale).

- Handler returns: completion with the JSON output (not JSON-serialisable: permanent failure,
  type ``"invalid_output"``).
- ``PermanentError(msg, type=...)``: ``retryable=false`` (goes to dead letters).
- ``RetryableError(msg, type=...)``: ``retryable=true``, retried per the job's policy.
- ``Throttled(msg, retry_after=seconds | timedelta)``: type ``"throttled"`` with
  ``retry_after_seconds``: rescheduled that much later without using up an attempt.
- Any other exception: ``retryable=true, classified=false``, type the class name, message
  ``str(exc)`` cut to 4 KiB.
- Timeout (``timeout_seconds`` of the claimed run): an async handler's task is cancelled (it sees
  ``asyncio.CancelledError`` at its next ``await``); failure ``"attempt_timed_out"``, retryable.
  A sync handler cannot be interrupted: the timeout is reported at the deadline and its thread
  finishes unobserved (result discarded), keeping its concurrency slot until then.
- Unknown task name: permanent failure ``"unknown_task"``, without running anything.
- A payload that does not convert into the task's declared type (``@task(name, payload=T)``):
  permanent failure ``"invalid_payload"`` naming the field, without calling the handler.
- ``LeaseLost`` (a heartbeat answered 409/404, the lease could not be renewed before it surely
  expired, or ``effects.fence`` met a newer token): nothing is reported; the new owner or lease
  expiry decides. An async handler still running is cancelled at its next ``await``.
  ``LeaseLost`` and ``Cancelled`` derive from ``BaseException``, so ``except Exception`` cannot
  swallow them.
- Cancel requested (seen on a heartbeat answer; periodic heartbeats go out every ``ttl/3``
  whether or not the handler calls ``heartbeat()``): ``is_cancelled()`` turns true,
  ``heartbeat()`` raises ``Cancelled``, and an async handler's task is cancelled, so it sees
  ``asyncio.CancelledError`` at its next ``await`` (``Cancelled`` if that await is
  ``heartbeat()``). Clean up in ``finally``. Ending by an exception is reported as the failure
  ``"cancelled"`` (not retryable); a handler that returns anyway (or a sync one that never polls)
  has its completion reported, which the gateway records and ignores.
- Gateway unreachable or answering 5xx: claims and batches are retried with capped exponential
  backoff and jitter; queued outcomes are kept until the gateway answers for them. A claim
  refused with 400/401/403/404/422 is a configuration error: ``run()`` shuts down and raises.
- ``stop()`` (or SIGTERM/SIGINT under ``run_until_signal()`` / ``run_forever()``): stop claiming
  (an in-flight long poll is abandoned; runs it leased come back after their lease expires),
  wait up to ``shutdown_grace_seconds`` for handlers, cancel the rest and *release* their leases
  (the gateway queues them again at once, no attempt used, no failure recorded; a sync
  handler's thread cannot be interrupted and finishes unobserved), flush outcomes, close the
  HTTP client. Outcomes still unreported then are logged with their run ids and will be retried
  after lease expiry.

Workflows
---------
``@workflow("name")`` registers an ``async def fn(ctx, payload)`` whose ``await ctx.step(name,
fn, ...)`` calls are checkpointed in the run's history: a later execution of the run returns
recorded steps without running them and resumes at the first unrecorded one. See
``ostinato.sdk.workflow`` and ``docs/WORKFLOWS.md``.

Logs
----
SDK logs are structlog events with ``run_id``, ``tenant_id``, ``job_id``, ``attempt``, ``task``
bound while a handler runs; outgoing requests carry the W3C trace context of the caller. A
handler runs in its run's trace context; each attempt is also a CONSUMER span ``run <task>``
when an OpenTelemetry SDK provider is installed (none is made without one). What the handler
itself logs (structlog or stdlib ``logging``) is also captured, bounded (500 lines /
256 KiB per attempt: first and last 250 kept) and sent with its outcome (``capture_logs=False``
turns this off; see ``ostinato.sdk.logs``).
"""

from ostinato.sdk.context import RunContext, current
from ostinato.sdk.effects import apply_once, fence  # install(): ostinato.sdk.effects.install
from ostinato.sdk.errors import (
    Cancelled,
    GatewayError,
    LeaseLost,
    OstinatoWorkerError,
    PermanentError,
    RetryableError,
    Throttled,
)
from ostinato.sdk.tasks import Handler, Task, task
from ostinato.sdk.worker import Worker
from ostinato.sdk.workflow import (
    ChildFailedError,
    CompensationFailed,
    FanOutFailedError,
    NonDeterminismError,
    SignalTimeout,
    StateTooLarge,
    StepFailedError,
    Update,
    UpdateTimeout,
    WorkflowContext,
    WorkflowTimedOut,
    workflow,
)

__all__ = [
    "Cancelled",
    "ChildFailedError",
    "CompensationFailed",
    "FanOutFailedError",
    "GatewayError",
    "Handler",
    "LeaseLost",
    "NonDeterminismError",
    "OstinatoWorkerError",
    "PermanentError",
    "RetryableError",
    "RunContext",
    "SignalTimeout",
    "StateTooLarge",
    "StepFailedError",
    "Task",
    "Throttled",
    "Update",
    "UpdateTimeout",
    "Worker",
    "WorkflowContext",
    "WorkflowTimedOut",
    "apply_once",
    "current",
    "fence",
    "task",
    "workflow",
]
