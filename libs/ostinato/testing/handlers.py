"""Run one SDK handler in-process, as a worker would, with no gateway, database or broker: the
handler sees a real `RunContext` through `current()`, its heartbeats are captured, and a test
can request a cancel or take the lease away (as Temporal's `ActivityEnvironment` does).

    env = HandlerEnvironment(attempt=2)
    env.cancel_after_heartbeats(3)
    with pytest.raises(Cancelled):
        await env.run(invoice, {"invoice": 7, "amount_cents": 1200})
    assert env.heartbeats == 3

Sync handlers run in a thread with the context copied, so `current().heartbeat_sync()` works.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from ostinato.sdk.context import RunContext, use_context
from ostinato.sdk.tasks import Handler, Task, registry

__all__ = ["HandlerEnvironment"]


class HandlerEnvironment:
    """One attempt of one run, with the identity a claim would give it."""

    def __init__(self, *, task: str = "test", attempt: int = 1, fencing_token: int | None = None,
                 run_id: str | None = None, tenant_id: str | None = None,
                 job_id: str | None = None, scheduled_for: datetime | None = None,
                 lease_ttl_seconds: float = 30.0, timeout_seconds: float | None = None) -> None:
        self.run_id = run_id or str(uuid.uuid4())
        self.context = RunContext(
            run_id=self.run_id, job_id=job_id or str(uuid.uuid4()),
            tenant_id=tenant_id or str(uuid.uuid4()), task=task, attempt=attempt,
            fencing_token=attempt if fencing_token is None else fencing_token,
            idempotency_key=f"run:{self.run_id}",  # what the gateway gives every attempt
            scheduled_for=scheduled_for or datetime(2026, 12, 1, 9, 0, tzinfo=UTC),
            lease_expires_at=datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
            + timedelta(seconds=lease_ttl_seconds),
            lease_ttl_seconds=lease_ttl_seconds, heartbeat_hook=self._heartbeat,
            timeout_seconds=timeout_seconds,
        )
        self.heartbeats = 0
        self._cancel_after: int | None = None
        self._lose_after: int | None = None

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
        loop = asyncio.get_running_loop()
        self.context.bind_loop(loop)
        with use_context(self.context):
            if registered.is_async:
                return await registered.fn(payload)
            context = contextvars.copy_context()
            return await loop.run_in_executor(None, context.run, registered.fn, payload)
