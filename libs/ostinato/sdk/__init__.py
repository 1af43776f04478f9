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

Every attempt holds a lease identified by a fencing token. Outcomes and heartbeats for many runs
travel in one ``POST /v1/worker/batch`` request, flushed at 200 items or 5 ms after the first
pending one; heartbeats for all in-flight runs go out every ``lease_ttl/3``::

    claim ──> in custody ──handler──> returned ───────────> completion ─┐
                 │   ▲                raised ─────────────> failure ────┤──> batch ──> dropped
                 │   └─ heartbeat every ttl/3               LeaseLost ──┘ (no outcome)   when the
                 └─ heartbeat answered 409/404 ─> lease lost: no outcome    gateway answered it

Execution is at-least-once: pass ``current().idempotency_key`` to external APIs.

Failure behaviour
-----------------
- Handler returns: completion with the JSON output (not JSON-serialisable: permanent failure,
  type ``"invalid_output"``).
- ``PermanentError(msg, type=...)``: failure with ``retryable=false`` (goes to dead letters).
- ``RetryableError(msg, type=...)`` or any other exception: ``retryable=true``; for other
  exceptions ``type`` is the class name and the message is ``str(exc)`` cut to 4 KiB.
- Unknown task name: permanent failure of type ``"unknown_task"``, without running anything.
- ``LeaseLost`` (a heartbeat answered 409, or the lease could not be renewed before it surely
  expired): nothing is reported; the new owner or lease expiry decides. ``LeaseLost`` and
  ``Cancelled`` derive from ``BaseException``, so ``except Exception`` cannot swallow them.
- Cancel requested (seen on a heartbeat answer): ``is_cancelled()`` turns true and
  ``heartbeat()`` raises ``Cancelled``; cancellation is cooperative, a handler that never
  heartbeats nor polls runs to its end. An escaping ``Cancelled`` is reported as a permanent
  failure of type ``"cancelled"``.
- Gateway unreachable or answering 5xx: claims and batches are retried with capped exponential
  backoff and jitter; queued outcomes are kept until the gateway answers for them. A claim
  refused with 400/401/403/404/422 is a configuration error: ``run()`` shuts down and raises.
- ``stop()`` (or SIGTERM/SIGINT under ``run_forever()``): stop claiming (an in-flight long poll
  is abandoned; runs it leased come back after their lease expires), wait up to
  ``shutdown_grace_seconds`` for handlers, cancel the rest (reported retryable, type
  ``"worker_shutdown"``; a sync handler's thread cannot be interrupted and finishes unobserved),
  flush outcomes, close the HTTP client. Outcomes still unreported then are logged with their
  run ids and will be retried after lease expiry.

Logs are structlog events with ``run_id``, ``tenant_id``, ``job_id``, ``attempt``, ``task`` bound
while a handler runs; outgoing requests carry the W3C trace context of the caller.
"""

from ostinato.sdk.context import RunContext, current
from ostinato.sdk.errors import (
    Cancelled,
    GatewayError,
    LeaseLost,
    OstinatoWorkerError,
    PermanentError,
    RetryableError,
)
from ostinato.sdk.worker import Handler, Task, Worker, task

__all__ = [
    "Cancelled",
    "GatewayError",
    "Handler",
    "LeaseLost",
    "OstinatoWorkerError",
    "PermanentError",
    "RetryableError",
    "RunContext",
    "Task",
    "Worker",
    "current",
    "task",
]
