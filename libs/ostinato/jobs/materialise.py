"""The one way a job's row becomes a run: `RunScheduled` with the job's task, pool, payload and
its retry, timeout and queue-wait settings as they were when the run was created (a later
change to the job does not change runs already made)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ostinato.domain import events as ev
from ostinato.domain.ids import run_id_for


def run_for(job: Mapping[str, Any], slot: datetime, *, trigger: str = "schedule",
            due_at: datetime | None = None, run_id: uuid.UUID | None = None,
            replay_of: uuid.UUID | None = None,
            payload_ref: uuid.UUID | None = None) -> tuple[uuid.UUID, ev.RunScheduled]:
    """(run id, event) for `slot`; the run id derives from the occurrence unless given."""
    return run_id or run_id_for(job["id"], slot), ev.RunScheduled(
        job_id=job["id"], task=job["task"], pool=job["pool"], priority=job["priority"],
        payload_ref=payload_ref or job["payload_ref"], scheduled_for=slot, trigger=trigger,
        due_at=due_at or slot, retry=job["retry_policy"], timeout_seconds=job["timeout_seconds"],
        queue_wait_seconds=job["queue_wait_seconds"], on_queue_wait=job["on_queue_wait"],
        replay_of=replay_of, concurrency_key=job["concurrency_key"], resource=job["resource"],
    )
