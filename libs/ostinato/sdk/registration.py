"""Task registration: a worker tells the gateway the payload schema of each task it serves.

The worker's side of ``POST /v1/worker/tasks`` (its wire types are in ``ostinato.wire.worker``,
shared with the worker-gateway). Before its first claim, a worker whose
tasks declare a payload type (``@task(name, payload=T)``) sends each such task's JSON Schema
(``msgspec.json.schema(T)``) under its ``payload_version``; the gateway keeps them per scope
(the key's tenant, or ``*`` for a shared worker using the admin key), and the API validates
submissions of the task against the newest one and records its version on the job and its
runs.

A (scope, task, payload_version) names one schema for good: registering different JSON under
the same version is refused with 409 (``payload-schema-conflict``). The worker then fails to
start (``Worker.run()`` raises ``GatewayError``): two workers reading one version differently
would give queued runs a meaning their submitter never validated. An incompatible change takes
a new ``payload_version``. Registering the same schema again only refreshes ``last_seen``.

Transient failures (gateway unreachable, 5xx) are retried like claims; 4xx answers are
configuration errors and stop the worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

import httpx
import msgspec
import structlog

from ostinato.sdk.errors import GatewayError
from ostinato.sdk.reporter import backoff_delay
from ostinato.sdk.tasks import Registered
from ostinato.wire.worker import (
    TASKS_PATH,
    RegisterTasksRequest,
    RegisterTasksResponse,
    TaskDefinition,
)

__all__ = ["definitions", "register"]

_FATAL_STATUSES = frozenset({400, 401, 403, 404, 409, 413, 422})

log = structlog.get_logger("ostinato.sdk")
_encoder = msgspec.json.Encoder()

_response_decoder = msgspec.json.Decoder(RegisterTasksResponse)
Post = Callable[[str, bytes, float], Awaitable[bytes]]


def definitions(handlers: Mapping[str, Registered]) -> list[TaskDefinition]:
    """The tasks whose handlers declare a payload type, as the gateway registers them."""
    return [TaskDefinition(task=name, version=h.version or None,
                           payload_schema=h.payload.schema, payload_version=h.payload.version)
            for name, h in sorted(handlers.items()) if h.payload is not None]


async def register(post: Post, worker_id: str, handlers: Mapping[str, Registered],
                   stopping: asyncio.Event) -> RegisterTasksResponse | None:
    """Register the payload schemas of `handlers` before the first claim (nothing to do, and
    None, when no task declares one). Retries transient failures until `stopping` is set;
    raises ``GatewayError`` for a refusal (409: a schema differs from the one registered under
    its version)."""
    tasks = definitions(handlers)
    if not tasks:
        return None
    body = _encoder.encode(RegisterTasksRequest(worker_id=worker_id, tasks=tasks))
    failures = 0
    while not stopping.is_set():
        try:
            answer = _response_decoder.decode(await post(TASKS_PATH, body, 30.0))
        except (GatewayError, httpx.HTTPError, msgspec.DecodeError) as exc:
            if isinstance(exc, GatewayError) and exc.status in _FATAL_STATUSES:
                log.error("worker.registration_refused", status=exc.status, error=str(exc))
                raise
            failures += 1
            log.warning("worker.registration_retry", error=repr(exc), attempt=failures)
            await asyncio.sleep(backoff_delay(failures))
            continue
        log.info("worker.registered", scope=answer.scope,
                 schemas={s.task: s.payload_version for s in answer.schemas},
                 created=[s.task for s in answer.schemas if s.created])
        return answer
    return None
