"""A job whose target is a DAG: its task is `dag:<DAG id>`, and each of its occurrences starts
a DAG run (of the DAG's version current then) instead of a run, through the same scheduler, so
every schedule a job can have (cron, every, DST and misfire policies, calendars) applies."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

DAG_TASK_PREFIX = "dag:"
_NAMESPACE = uuid.UUID("0c2b8f1e-5d1a-4f43-b1d5-27a9a3c6e4d2")


def dag_of_task(task: str | None) -> uuid.UUID | None:
    """The DAG a job's task names, or None (an ordinary task). ValueError: `dag:` and no id."""
    if not task or not task.startswith(DAG_TASK_PREFIX):
        return None
    return uuid.UUID(task.removeprefix(DAG_TASK_PREFIX))


def task_for(dag_id: uuid.UUID) -> str:
    return f"{DAG_TASK_PREFIX}{dag_id}"


def dag_run_id_for(job_id: uuid.UUID, scheduled_for: datetime) -> uuid.UUID:
    """The one DAG run an occurrence of a DAG job can start (as `run_id_for` for a run)."""
    if scheduled_for.tzinfo is None:
        raise ValueError("scheduled_for must be timezone-aware")
    slot = scheduled_for.astimezone(UTC).isoformat(timespec="microseconds")
    return uuid.uuid5(_NAMESPACE, f"job/{job_id}/{slot}")
