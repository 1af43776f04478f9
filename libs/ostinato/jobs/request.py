"""What a job is made of, as a client submits it (over HTTP or, later, Kafka): validated by
msgspec before anything is written. The API's OpenAPI schema is generated from it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ostinato.policy.retry import RetrySpec
from ostinato.schedules import ScheduleSpec

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][\w.:-]*$")]
ResourceName = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9_.-]{0,62}$")]


class JobRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: Name
    task: Name | None = None
    schedule: ScheduleSpec | None = None
    payload: Any = None
    pool: Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")] = "default"
    priority: ResourceName = "default"  # a configured priority class (OSTINATO_PRIORITY_CLASSES)
    idempotency_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    concurrency_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    resource: ResourceName | None = None  # rate-limited with PUT /v1/limits/resources/{name}
    retry: RetrySpec | None = None  # default: 3 attempts, 1s doubling to 5m, full jitter
    timeout: str | None = None  # an attempt's time limit, e.g. "30m"; none by default
    queue_wait_timeout: str | None = None  # schedule-to-start deadline, e.g. "1h"
    on_queue_wait: Literal["dead_letter", "skip"] = "dead_letter"
