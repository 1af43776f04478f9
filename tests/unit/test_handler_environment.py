"""The shipped handler environment runs an SDK handler as a worker would: `current()` is the
attempt's context, heartbeats are counted, and cancels and lost leases reach the handler."""

from __future__ import annotations

import pytest

from ostinato.sdk import Cancelled, LeaseLost, PermanentError, current, task
from ostinato.testing.handlers import HandlerEnvironment


@task("invoice")
async def invoice(payload: dict) -> dict:
    ctx = current()
    for _ in range(payload.get("beats", 1)):
        await ctx.heartbeat()
    if payload["amount_cents"] <= 0:
        raise PermanentError("an invoice needs a positive amount", type="invalid_amount")
    return {"key": ctx.idempotency_key, "attempt": ctx.attempt}


def sync_report(payload: dict) -> str:
    ctx = current()
    ctx.heartbeat_sync()
    return f"{ctx.task}:{ctx.fencing_token}"


async def test_an_async_handler_sees_its_attempt_and_its_heartbeats_are_counted() -> None:
    env = HandlerEnvironment(attempt=2)
    result = await env.run(invoice, {"amount_cents": 1200, "beats": 3})
    assert result == {"key": f"run:{env.run_id}", "attempt": 2}
    assert env.heartbeats == 3


async def test_what_the_handler_raises_is_raised() -> None:
    with pytest.raises(PermanentError, match="positive amount"):
        await HandlerEnvironment().run(invoice, {"amount_cents": 0})


async def test_a_cancel_reaches_the_handler_at_its_next_heartbeat() -> None:
    env = HandlerEnvironment()
    env.cancel_after_heartbeats(2)
    with pytest.raises(Cancelled):
        await env.run(invoice, {"amount_cents": 5, "beats": 10})
    assert env.heartbeats == 2


async def test_a_lost_lease_stops_the_handler() -> None:
    env = HandlerEnvironment()
    env.lose_lease()
    with pytest.raises(LeaseLost):
        await env.run(invoice, {"amount_cents": 5})
    assert env.heartbeats == 0, "no heartbeat is sent for a lease already lost"


async def test_a_sync_handler_runs_in_a_thread_and_heartbeats_from_it() -> None:
    env = HandlerEnvironment(task="report", fencing_token=7)
    assert await env.run(sync_report, {}) == "report:7"
    assert env.heartbeats == 1
