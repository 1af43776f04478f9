"""Building blocks for integration tests: a tenant, jobs, and one run driven through the
library code each service runs (no hand-written SQL in tests)."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from ostinato.bus.topics import Topics
from ostinato.clock import Clock, SystemClock
from ostinato.eventlog.store import EventStore
from ostinato.jobs import submit_job
from ostinato.jobs.request import JobRequest
from ostinato.schedules import ScheduleSpec
from ostinato.tenancy import create_tenant

TOPICS = Topics()


def store(clock: Clock | None = None) -> EventStore:
    return EventStore(clock or SystemClock(), TOPICS)


async def new_tenant(pool: asyncpg.Pool, name: str | None = None) -> tuple[uuid.UUID, str]:
    async with pool.acquire() as conn:
        return await create_tenant(conn, store(), name or f"t-{uuid.uuid4().hex[:8]}",
                                   actor="test")


async def new_job(pool: asyncpg.Pool, tenant_id: uuid.UUID, *, at: datetime | None = None,
                  name: str = "job", payload: object = None, clock: Clock | None = None,
                  ) -> asyncpg.Record:
    request = JobRequest(name=name, schedule=ScheduleSpec(at=at) if at else None,
                         payload=payload)
    async with pool.acquire() as conn:
        row, _ = await submit_job(conn, store(clock), clock or SystemClock(),
                                  tenant_id=tenant_id, request=request, pools=("default",),
                                  max_payload_bytes=1 << 20, actor="test")
    return row


async def dispatch(pool: asyncpg.Pool, clock: Clock | None = None, *, slots: int = 10_000,
                   pools: tuple[str, ...] = ("default", "long", "etl")) -> int:
    """One dispatcher decision with ample shared capacity in `pools` (the decision itself is
    tested in test_dispatch.py); returns how many runs were queued."""
    from ostinato.policy.fairness import DEFAULT_CLASSES
    from services.dispatcher.dispatcher import Dispatcher, fixed_capacity

    clock = clock or SystemClock()
    return await Dispatcher(pool, store(clock), clock, classes=DEFAULT_CLASSES,
                            capacity=fixed_capacity(slots, pools)).run_round()
