"""DAG helpers: the scheduler's advance duty once, a node document."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import asyncpg

from ostinato.runs import dags as dag_runs
from tests.helpers.integration import store


async def advance(pool: asyncpg.Pool, now: datetime | None = None) -> int:
    """The scheduler's `advance_dags` duty, once."""
    async with pool.acquire() as conn:
        return await dag_runs.advance_due(conn, store(), now=now or datetime.now(UTC),
                                          batch_size=100, actor="scheduler",
                                          rules=dag_runs.Rules())


def node(key: str, task_name: str = "dag.step", **extra: Any) -> dict[str, Any]:
    return {"key": key, "task": task_name, "payload": {"key": key}, **extra}
