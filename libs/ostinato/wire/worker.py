"""Wire types of the worker protocol, shared by the SDK and the worker-gateway (their one home).

Both sides import these exact Structs so the protocol cannot drift: the gateway decodes requests
with them (``forbid_unknown_fields=True``, so a typo in a client is a 400 rather than silently
ignored) and encodes responses with them; the SDK does the reverse. Responses tolerate unknown
fields so a newer gateway can add fields without breaking older workers.

Evolution rules (msgspec's): new fields get defaults, field types never change, names are never
reused. Timestamps are RFC 3339 strings on the wire and timezone-aware ``datetime`` in Python.

Servers may put a ``msgspec.Raw`` (already-encoded JSON) into ``payload``/``output`` to avoid
re-encoding stored documents; clients always see decoded JSON values.

Endpoints (all under the gateway base URL, ``Authorization: Bearer <tenant api key>``, or the
admin key for a shared worker serving every tenant)::

    POST /v1/worker/claim                    ClaimRequest     -> ClaimResponse
    POST /v1/worker/batch                    BatchRequest     -> BatchResponse
    POST /v1/worker/runs/{run_id}/heartbeat  HeartbeatRequest -> HeartbeatResponse
    POST /v1/worker/runs/{run_id}/complete   CompleteRequest  -> OutcomeResponse
    POST /v1/worker/runs/{run_id}/fail       FailRequest      -> OutcomeResponse
    POST /v1/worker/runs/{run_id}/release    ReleaseRequest   -> OutcomeResponse
    POST /v1/worker/runs/{run_id}/steps      StepsRequest     -> StepsResponse
    POST /v1/worker/goodbye                  GoodbyeRequest   -> GoodbyeResponse
    POST /v1/worker/tasks                    RegisterTasksRequest -> RegisterTasksResponse
    any error                                Problem (application/problem+json, RFC 9457)
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final, Literal

import msgspec

from ostinato.domain.names import PoolName

__all__ = [
    "BATCH_PATH",
    "CLAIM_PATH",
    "GOODBYE_PATH",
    "MAX_BATCH_ITEMS",
    "MAX_CLAIM_RUNS",
    "MAX_CLAIM_WAIT_SECONDS",
    "MAX_ERROR_MESSAGE_CHARS",
    "MAX_ERROR_TYPE_CHARS",
    "MAX_LOG_BYTES",
    "MAX_LOG_LINES",
    "MAX_LOG_MESSAGE_CHARS",
    "MAX_SCHEMA_BYTES",
    "MAX_STEPS_PAGE",
    "MAX_STEP_NAME_CHARS",
    "MAX_TASKS",
    "MIN_LIVENESS_SECONDS",
    "TASKS_PATH",
    "BatchItemResult",
    "BatchRequest",
    "BatchResponse",
    "ChildSpec",
    "ClaimRequest",
    "ClaimResponse",
    "ClaimedRun",
    "CompleteRequest",
    "CompletionItem",
    "ErrorInfo",
    "FailRequest",
    "FailureItem",
    "GoodbyeRequest",
    "GoodbyeResponse",
    "HeartbeatItem",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "LogLine",
    "OutcomeResponse",
    "Problem",
    "RegisterTasksRequest",
    "RegisterTasksResponse",
    "RegisteredSchema",
    "ReleaseItem",
    "ReleaseRequest",
    "StepItem",
    "StepRecord",
    "StepStartedItem",
    "StepsRequest",
    "StepsResponse",
    "TaskDefinition",
    "WaitSpec",
    "run_path",
]

CLAIM_PATH: Final = "/v1/worker/claim"
BATCH_PATH: Final = "/v1/worker/batch"
GOODBYE_PATH: Final = "/v1/worker/goodbye"
TASKS_PATH: Final = "/v1/worker/tasks"
MAX_CLAIM_RUNS: Final = 1000
MAX_CLAIM_WAIT_SECONDS: Final = 30.0
MIN_LIVENESS_SECONDS: Final = 0.001  # the finest ping interval a worker may declare
MAX_BATCH_ITEMS: Final = 1000  # per list (heartbeats, completions, failures, releases)
MAX_ERROR_MESSAGE_CHARS: Final = 4096
MAX_ERROR_TYPE_CHARS: Final = 256
# Per-attempt log capture: beyond MAX_LOG_LINES lines or MAX_LOG_BYTES of messages the SDK keeps
# the first and last MAX_LOG_LINES // 2 lines plus one line saying how many were dropped.
MAX_LOG_LINES: Final = 500
MAX_LOG_BYTES: Final = 256 * 1024
MAX_LOG_MESSAGE_CHARS: Final = 8192  # one line's message; the SDK cuts longer ones
MAX_STEP_NAME_CHARS: Final = 256
MAX_STEPS_PAGE: Final = 1000  # recorded steps per page a resuming workflow reads
MAX_TASKS: Final = 1000  # task definitions per registration request
MAX_SCHEMA_BYTES: Final = 64 * 1024  # one payload schema, encoded as JSON


def run_path(
    run_id: str, action: Literal["heartbeat", "complete", "fail", "release", "steps"]
) -> str:
    """Path of a single-item endpoint; one function so client and routes agree."""
    return f"/v1/worker/runs/{run_id}/{action}"


RunId = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
# Ranges: what PostgreSQL's bigint / integer columns hold, and spans a timedelta can add to
# now; a number past them is a 422, never an overflow inside the gateway.
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
MAX_SPAN_SECONDS = 10 * 366 * 86_400.0  # ten years
FencingToken = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
Seconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_SPAN_SECONDS)]
AwareDatetime = Annotated[datetime, msgspec.Meta(tz=True)]


# ---------------------------------------------------------------------------- requests


class _Request(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Base of everything a worker sends: strict on decode, compact on encode."""


class ClaimRequest(_Request):
    """Long poll for up to ``max_runs`` runs; answered as soon as one is available."""

    worker_id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    # Each a pool name (`ostinato.domain.names`): one no pool can have is a 422 naming it.
    pools: Annotated[list[PoolName], msgspec.Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: ["default"]
    )
    max_runs: Annotated[int, msgspec.Meta(ge=1, le=MAX_CLAIM_RUNS)] = 1
    wait_seconds: Annotated[float, msgspec.Meta(ge=0, le=MAX_CLAIM_WAIT_SECONDS)] = 0.0
    tasks: list[str] | None = None  # task names this worker can run; None = any
    # The worker's total concurrency (declared slots): the pool capacity it adds for fair
    # dispatch. None: the gateway counts ``max_runs``.
    slots: Annotated[int, msgspec.Meta(ge=1, le=MAX_CLAIM_RUNS)] | None = None
    # Task name -> the version of its handler here. A pinned run (a workflow once started) is
    # only given to a worker serving its version; None: the worker serves no pinned run.
    versions: dict[Annotated[str, msgspec.Meta(min_length=1, max_length=256)],
                   Annotated[str, msgspec.Meta(min_length=1, max_length=64)]] | None = None
    workflows: list[str] | None = None  # tasks whose runs this worker's first start pins
    # Task name -> the payload versions its handler accepts; a run whose payload was submitted
    # under another version of the task's schema is not given to this worker (absent: any).
    payload_versions: dict[str, Annotated[list[Annotated[int, msgspec.Meta(ge=1, le=INT32_MAX)]],
                                          msgspec.Meta(min_length=1)]] | None = None
    # How often this worker says it is alive while it holds runs (a batch, empty if need be):
    # silent for max(OSTINATO_WORKER_DEAD_AFTER_SECONDS, 3 of these) it is judged dead and its
    # runs are taken back at once (docs/ARCHITECTURE.md §4b). None: judged by its leases only.
    # At least MIN_LIVENESS_SECONDS (1 ms): a subnormal interval would round to 0 in the
    # column, whose CHECK refuses it (a 422 here, not a refused INSERT).
    liveness_seconds: Annotated[float, msgspec.Meta(ge=MIN_LIVENESS_SECONDS, le=60)] | None = None


class ErrorInfo(_Request):
    """Why an attempt failed; ``type`` is the stable string retry policies match on."""

    type: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ERROR_TYPE_CHARS)]
    message: Annotated[str, msgspec.Meta(max_length=MAX_ERROR_MESSAGE_CHARS)]
    retryable: bool
    # True when the handler raised one of the SDK's classified errors (RetryableError,
    # PermanentError, Throttled) or the SDK decided itself (attempt_timed_out, cancelled,
    # unknown_task, invalid_output). False: an arbitrary exception, whose ``retryable=true`` is
    # only the default the job's policy may override (by ``type``, or "unclassified: permanent").
    classified: bool = False
    # Only with type "throttled": reschedule this many seconds from now, without using an attempt.
    retry_after_seconds: Seconds | None = None


class LogLine(_Request):
    """One log line a handler emitted during the attempt (structlog event or stdlib record)."""

    # seconds since the attempt started (monotonic clock of the worker)
    t: Annotated[float, msgspec.Meta(ge=-MAX_SPAN_SECONDS, le=MAX_SPAN_SECONDS)]
    level: Annotated[str, msgspec.Meta(max_length=32)]  # lower case: debug, info, warning, ...
    message: Annotated[str, msgspec.Meta(max_length=MAX_LOG_MESSAGE_CHARS)]
    fields: dict[str, Any] = {}  # JSON-safe key/values of the event (bound run fields omitted)


# A bounded capture has at most MAX_LOG_LINES lines plus the one "N lines dropped" line.
Logs = Annotated[list[LogLine], msgspec.Meta(max_length=MAX_LOG_LINES + 1)]


class HeartbeatItem(_Request):
    run_id: RunId
    fencing_token: FencingToken


class CompletionItem(_Request):
    run_id: RunId
    fencing_token: FencingToken
    output: Any = None  # any JSON value; null when omitted
    logs: Logs | None = None  # the attempt's captured log lines


class FailureItem(_Request):
    run_id: RunId
    fencing_token: FencingToken
    error: ErrorInfo
    logs: Logs | None = None


class ReleaseItem(_Request):
    """Give the run back to the queue at once: no attempt used, no failure recorded."""

    run_id: RunId
    fencing_token: FencingToken


class WaitSpec(_Request):
    """What a workflow waits for at its position: a timer (``until`` an instant, or ``seconds``
    from now by the database clock) or a signal ``name`` (with an optional timeout)."""

    kind: Literal["timer", "signal"]
    until: AwareDatetime | None = None
    seconds: Seconds | None = None
    signal: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_STEP_NAME_CHARS)] | None = None
    timeout_seconds: Seconds | None = None


class ChildSpec(_Request):
    """A child run the workflow starts at its position (``ctx.child``: ``wait`` it, the run
    suspended until the child is final; ``ctx.start_child``: not). Unset fields take the
    parent's pool and priority class, the pool's default retry policy, no time limit."""

    task: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    payload: Any = None
    pool: Annotated[str, msgspec.Meta(min_length=1, max_length=63)] | None = None
    priority: Annotated[str, msgspec.Meta(min_length=1, max_length=63)] | None = None
    retry: dict[str, Any] | None = None  # as a job's ``retry`` (POST /v1/jobs)
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=MAX_SPAN_SECONDS)] | None = None
    wait: bool = True


class FanOutSpec(_Request):
    """A chunked fan-out the workflow starts at its position (``ctx.fan_out``): one child run of
    ``task`` per chunk (its payload), at most ``max_concurrency`` of them not final at once;
    when all are final, ``on_complete`` (a task) runs once, and ``on_failure`` says what failed
    chunks do: ``fail`` the step, or ``complete`` with the failures listed. The run is
    suspended until every chunk is final."""

    task: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    chunks: Annotated[list[Any], msgspec.Meta(min_length=1, max_length=100_000)]
    max_concurrency: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 50
    on_complete: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    on_failure: Literal["fail", "complete"] = "fail"
    pool: Annotated[str, msgspec.Meta(min_length=1, max_length=63)] | None = None
    priority: Annotated[str, msgspec.Meta(min_length=1, max_length=63)] | None = None
    retry: dict[str, Any] | None = None  # each chunk run's, as a job's ``retry``
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=MAX_SPAN_SECONDS)] | None = None


class StepItem(_Request):
    """A workflow step's outcome, recorded under the attempt's fencing token before the SDK
    lets the workflow go past the step (``ostinato.domain.workflow``). ``error`` set: the step
    failed for good, and later executions raise it again at this step. ``wait`` set: the
    workflow waits here; the answer either carries the ``step`` it goes on with (a timer already
    due, a signal already sent) or says the run is ``suspended`` (the attempt ends)."""

    run_id: RunId
    fencing_token: FencingToken
    seq: Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_STEP_NAME_CHARS)]
    output: Any = None
    error: ErrorInfo | None = None
    tries: Annotated[int, msgspec.Meta(ge=1, le=INT32_MAX)] = 1
    duration_ms: Annotated[float, msgspec.Meta(ge=0, le=MAX_SPAN_SECONDS * 1000)] = 0.0
    wait: WaitSpec | None = None
    child: ChildSpec | None = None  # a child run started here (``ctx.child``/``start_child``)
    fan_out: FanOutSpec | None = None  # chunk runs started here (``ctx.fan_out``)
    compensable: bool = False  # the step registered a compensation (``compensate=``)
    # The workflow's overall deadline (``@workflow(..., timeout=)``): past it, by the database
    # clock, nothing is recorded and the answer says ``deadline_passed``.
    deadline: AwareDatetime | None = None


class StepStartedItem(_Request):
    """A workflow step began executing (``ostinato.sdk.workflow``): shown as the run's running
    step until its outcome is recorded. Rides whatever request the worker sends next (its
    liveness ping at the latest), never a request of its own; only to a gateway whose claim
    said ``step_starts``. ``age_ms``: how long ago it began by the worker's monotonic clock
    (the gateway dates it by the database clock). Advisory: no result, never retried."""

    run_id: RunId
    fencing_token: FencingToken
    seq: Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_STEP_NAME_CHARS)]
    age_ms: Annotated[float, msgspec.Meta(ge=0, le=MAX_SPAN_SECONDS * 1000)] = 0.0


class BatchRequest(_Request):
    """Heartbeats and outcomes for many runs in one round trip (one result per item).

    Results come in the order heartbeats, completions, failures, releases, steps; ``started``
    items get none.
    """

    worker_id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    heartbeats: Annotated[list[HeartbeatItem], msgspec.Meta(max_length=MAX_BATCH_ITEMS)] = []
    completions: Annotated[list[CompletionItem], msgspec.Meta(max_length=MAX_BATCH_ITEMS)] = []
    failures: Annotated[list[FailureItem], msgspec.Meta(max_length=MAX_BATCH_ITEMS)] = []
    releases: Annotated[list[ReleaseItem], msgspec.Meta(max_length=MAX_BATCH_ITEMS)] = []
    steps: Annotated[list[StepItem], msgspec.Meta(max_length=MAX_BATCH_ITEMS)] = []
    started: Annotated[list[StepStartedItem], msgspec.Meta(max_length=MAX_BATCH_ITEMS)] = []


class StepsRequest(_Request):
    """A page of the run's recorded steps after position ``after`` (-1: from the first), for the
    attempt holding the lease."""

    fencing_token: FencingToken
    after: Annotated[int, msgspec.Meta(ge=-1, le=INT32_MAX)] = -1
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_STEPS_PAGE)] = MAX_STEPS_PAGE


class GoodbyeRequest(_Request):
    """A worker stopping gracefully: its slots leave the pool capacity at once."""

    worker_id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class HeartbeatRequest(_Request):
    fencing_token: FencingToken


class CompleteRequest(_Request):
    fencing_token: FencingToken
    output: Any = None


class FailRequest(_Request):
    fencing_token: FencingToken
    error: ErrorInfo


class ReleaseRequest(_Request):
    fencing_token: FencingToken


# --------------------------------------------------------------------------- responses


class _Response(msgspec.Struct, kw_only=True):
    """Base of everything the gateway sends: unknown fields are ignored by older workers."""


class ClaimedRun(_Response):
    """One leased attempt. ``fencing_token`` must accompany every write about it."""

    run_id: str
    job_id: str
    tenant_id: str
    task: str
    attempt: Annotated[int, msgspec.Meta(ge=1)]  # 1-based
    fencing_token: FencingToken
    lease_expires_at: AwareDatetime
    lease_ttl_seconds: Annotated[float, msgspec.Meta(gt=0)]
    scheduled_for: AwareDatetime
    idempotency_key: str
    payload: Any = None
    traceparent: str | None = None  # W3C trace context of the run: handlers continue its trace
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None  # attempt limit; None: none
    steps_done: Annotated[int, msgspec.Meta(ge=0)] = 0  # workflow steps recorded so far
    # A workflow woken to run its compensations: its cancel was requested while it waited.
    cancel_requested: bool = False
    # A retryable failure of this attempt would dead-letter the run (its retries are used up):
    # a workflow runs its compensations before it fails so.
    final_attempt: bool = False
    payload_version: int | None = None  # the task's payload schema version at submission
    # The gateway takes `BatchRequest.started` (an older one refuses a field it does not know):
    # the SDK says when a step starts only then.
    step_starts: bool = False
    # A parent run is told of this run's end (a fan-out chunk: its end admits the next chunk;
    # a workflow's child): the SDK sends its outcome at once, without the batch's linger.
    awaited: bool = False


class ClaimResponse(_Response):
    runs: list[ClaimedRun] = []


class BatchItemResult(_Response):
    """Answer for one batch item: 200 applied, 409 stale token / lease lost, 404 unknown run."""

    run_id: str
    kind: Literal["heartbeat", "complete", "fail", "release", "step"]
    status: int
    lease_expires_at: AwareDatetime | None = None
    cancel_requested: bool = False
    detail: str | None = None
    # kind "step" with a wait or a child: the record the workflow goes on with, or the run was
    # suspended; a step answered with cancel_requested recorded nothing (no child starts)
    step: StepRecord | None = None
    suspended: bool = False
    deadline_passed: bool = False  # the workflow's deadline passed: it fails, nothing recorded


class BatchResponse(_Response):
    """Results in request order: heartbeats, completions, failures, releases, then steps."""

    results: list[BatchItemResult] = []


class HeartbeatResponse(_Response):
    lease_expires_at: AwareDatetime
    cancel_requested: bool = False


class StepRecord(_Response):
    """A recorded step as a resuming workflow replays it."""

    seq: int
    name: str
    succeeded: bool
    output: Any = None
    error_type: str | None = None
    message: str | None = None


class StepsResponse(_Response):
    steps: list[StepRecord] = []


class OutcomeResponse(_Response):
    state: str


class GoodbyeResponse(_Response):
    forgotten: bool  # False: the gateway did not know the worker (never claimed, or expired)
    # runs still leased in its name (claimed for it, the answer never read): queued again
    released: int = 0


class Problem(_Response):
    """RFC 9457 problem details; of the extension members the SDK reads only
    ``retry_after_seconds`` (a 503 while the gateway's database is unavailable)."""

    type: str = "about:blank"
    title: str = ""
    status: int = 0
    detail: str | None = None
    retry_after_seconds: float | None = None


# ---------------------------------------------------------------------------- task registration
# POST /v1/worker/tasks (the worker's side: ostinato.sdk.registration; its rules are there).

TaskName = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class TaskDefinition(msgspec.Struct, kw_only=True, forbid_unknown_fields=True,
                     omit_defaults=True):
    """One task as a worker serves it: its handler version and payload schema."""

    task: TaskName
    version: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    payload_schema: dict[str, Any] | None = None  # JSON Schema of the payload type
    payload_version: Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)] | None = None


class RegisterTasksRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True,
                           omit_defaults=True):
    worker_id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    tasks: Annotated[list[TaskDefinition], msgspec.Meta(max_length=MAX_TASKS)] = []


class RegisteredSchema(msgspec.Struct, kw_only=True):
    """A schema the gateway holds now: ``created`` False when it was registered before."""

    task: str
    payload_version: int
    created: bool


class RegisterTasksResponse(msgspec.Struct, kw_only=True):
    scope: str  # the tenant id, or "*" for a shared worker
    schemas: list[RegisteredSchema] = []
