"""The public API's wire models: the msgspec Structs its requests and answers are made of.

One home for both sides (the `ostinato.wire` package): services/api decodes requests and
encodes answers with them (and the OpenAPI document, schemas/openapi.json, is generated from
them), and `ostinato.client` decodes the same answers into the same types. Changing a field
here changes the API, so follow msgspec's evolution rules: new fields get defaults, a field's
type never changes. Every answer has its Struct here, envelopes and short statuses too, so the
document names each one.

This module imports only msgspec, the run states and the pure schedule, retry and DAG specs, so
that importing the client loads no server code (an import-linter contract).
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from ostinato.dags.graph import EdgeSpec, NodeSpec
from ostinato.domain import retention
from ostinato.domain.names import PoolName
from ostinato.domain.states import FINAL, RunState
from ostinato.policy.retry import RetrySpec
from ostinato.schedules import ScheduleSpec

# The values of `RunView.state`, from the one lifecycle module (ostinato.domain.states).
RUN_STATES: tuple[str, ...] = tuple(s.value for s in RunState)
FINAL_STATES: frozenset[str] = frozenset(s.value for s in FINAL)


# Jobs as a client submits them (POST /v1/jobs, and Kafka submissions)

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][\w.:-]*$")]
ResourceName = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9_.-]{0,62}$")]
TeamName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][\w.-]{0,62}$")]


class JobRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: Name
    task: Name | None = None
    schedule: ScheduleSpec | None = None
    payload: Any = None
    pool: PoolName = "default"
    priority: ResourceName = "default"  # a configured priority class (OSTINATO_PRIORITY_CLASSES)
    idempotency_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    concurrency_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    resource: ResourceName | None = None  # rate-limited with PUT /v1/limits/resources/{name}
    retry: RetrySpec | None = None  # default: 3 attempts, 1s doubling to 5m, full jitter
    timeout: str | None = None  # an attempt's time limit, e.g. "30m"; none by default
    queue_wait_timeout: str | None = None  # schedule-to-start deadline, e.g. "1h"
    on_queue_wait: Literal["dead_letter", "skip"] = "dead_letter"
    # completion deadlines (docs/ALERTS.md): a run must have succeeded this long after its slot,
    # e.g. "2h"; a recurring job's last success may get at most this old, e.g. "26h"
    complete_within: str | None = None
    max_staleness: str | None = None
    owner: TeamName | None = None  # the team its alerts go to (PUT /v1/alert-sinks/{name})
    # searchable attributes, each declared by the tenant (PUT /v1/search-attributes/{name});
    # its runs inherit them (docs/SEARCH_ATTRIBUTES.md)
    attributes: Annotated[dict[str, Any], msgspec.Meta(max_length=50)] | None = None


class TenantRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=100,
                                      pattern=r"^[a-z0-9][a-z0-9-]*$")]
    weight: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 1


class KafkaAccessView(msgspec.Struct, kw_only=True):
    """A tenant's Kafka producer settings (docs/KAFKA.md); the password is shown once, here."""

    bootstrap_servers: str
    security_protocol: str
    sasl_mechanism: str
    username: str
    password: str
    topic: str  # write a POST /v1/jobs body per message here
    rejects_topic: str  # where messages that could not be accepted go, with the problem


class TenantView(msgspec.Struct, kw_only=True):
    """A tenant as the admin lists it (GET /v1/tenants); its keys are never shown."""

    id: uuid.UUID
    name: str
    weight: float  # its fair share of capacity
    created_at: datetime


class TenantCreatedView(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    name: str
    api_key: str
    # Kafka submission, when the deployment has it and the broker answered (else null: issue
    # it later with POST /v1/kafka/credentials)
    kafka: KafkaAccessView | None = None


class JobBatchRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Up to 1,000 jobs in one request: all are created, or none (errors name `jobs[i].field`)."""

    jobs: Annotated[list[JobRequest], msgspec.Meta(min_length=1, max_length=1000)]


class JobBatchItem(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    created: bool
    next_run_at: datetime | None


class JobBatch(msgspec.Struct, kw_only=True):
    """POST /v1/jobs/batch: one item per requested job, in order."""

    items: list[JobBatchItem]


class JobStatus(msgspec.Struct, kw_only=True):
    """POST /v1/jobs/{id}/pause and /resume: the job's status after the call."""

    status: str


class JobView(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    name: str
    task: str
    status: str
    schedule: dict[str, Any]
    pool: str
    priority: str
    next_run_at: datetime | None
    next_slot: datetime | None
    last_run_at: datetime | None
    runs_created: int
    consecutive_failures: int
    idempotency_key: str | None
    created_at: datetime
    updated_at: datetime
    payload: Any = None
    payload_version: int | None = None  # the payload schema version its payload was checked at
    complete_within_seconds: float | None = None
    max_staleness_seconds: float | None = None
    owner: str | None = None
    # The id the run (a DAG job's: the DAG run) of its next occurrence gets, known before the
    # scheduler creates it: await it with GET /v1/runs/{id}/result?job_id=<this job>.
    next_run_id: uuid.UUID | None = None
    attributes: dict[str, Any] | None = None  # its searchable attributes, as stored
    # The job's definition version: 1 at creation, one more per edit (PATCH). Also its ETag;
    # send it back as If-Match to edit only the version you read.
    version: int | None = None
    # The rest of its settings, as an edit (PATCH) sees them
    retry: dict[str, Any] | None = None
    timeout_seconds: float | None = None
    queue_wait_seconds: float | None = None
    on_queue_wait: str | None = None
    concurrency_key: str | None = None
    resource: str | None = None


Unset = msgspec.UnsetType
Reason = Annotated[str, msgspec.Meta(min_length=1, max_length=1000)]
Key = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class JobUpdateRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """PATCH /v1/jobs/{id}: the settings to change; a field left out keeps its value, `null`
    clears an optional one (`retry: null` is the pool's default policy). `schedule` is replaced
    whole (docs/SCHEDULES.md, "Editing a schedule"). Name and task cannot change. `reason` goes
    into the JobUpdated event and the audit trail; `apply_to_scheduled` gives the runs still
    waiting to be dispatched the new payload, pool, priority and limits (otherwise runs already
    created keep theirs); `dry_run` answers the change and the upcoming occurrences before and
    after it, and changes nothing."""

    schedule: ScheduleSpec | Unset = msgspec.UNSET
    payload: Any = msgspec.UNSET
    pool: PoolName | Unset = msgspec.UNSET
    priority: ResourceName | Unset = msgspec.UNSET
    retry: RetrySpec | Unset | None = msgspec.UNSET
    timeout: str | Unset | None = msgspec.UNSET
    queue_wait_timeout: str | Unset | None = msgspec.UNSET
    on_queue_wait: Literal["dead_letter", "skip"] | Unset = msgspec.UNSET
    concurrency_key: Key | Unset | None = msgspec.UNSET
    resource: ResourceName | Unset | None = msgspec.UNSET
    complete_within: str | Unset | None = msgspec.UNSET
    max_staleness: str | Unset | None = msgspec.UNSET
    owner: TeamName | Unset | None = msgspec.UNSET
    reason: Reason | None = None
    apply_to_scheduled: bool = False
    dry_run: bool = False
    preview_count: Annotated[int, msgspec.Meta(ge=1, le=100)] = 5


class JobUpdateView(msgspec.Struct, kw_only=True):
    """The answer of PATCH /v1/jobs/{id}: the job after the edit (with `dry_run`: as it would
    be), the fields that changed, its upcoming occurrences before and after, and how many runs
    still waiting to be dispatched took the new settings (`apply_to_scheduled`)."""

    job: JobView
    version: int  # the definition version after the edit (dry run: unchanged)
    changed: list[str]
    dry_run: bool
    upcoming_before: UpcomingView
    upcoming_after: UpcomingView
    switch_at: datetime | None = None  # a new schedule's occurrences count from this instant
    runs_amended: int = 0


class StateTimes(msgspec.Struct, kw_only=True, omit_defaults=True):
    scheduled_at: datetime | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class FanOutView(msgspec.Struct, kw_only=True):
    """A workflow's chunked fan-out (`ctx.fan_out`), its latest: `running` chunk runs are
    admitted and not final (never more than `max_concurrency`); `pending` not admitted yet."""

    seq: int
    name: str
    task: str
    state: str  # running | succeeded | failed
    total: int
    succeeded: int
    failed: int
    running: int
    pending: int
    max_concurrency: int
    on_failure: str  # fail | complete
    on_complete: str | None = None
    completion_run_id: uuid.UUID | None = None
    failures: list[dict[str, Any]] = msgspec.field(default_factory=list)  # the first ones
    started_at: datetime
    finished_at: datetime | None = None


class RunView(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    job_id: uuid.UUID
    task: str
    pool: str
    priority: str
    state: str
    scheduled_for: datetime
    due_at: datetime | None
    trigger: str
    # the run's executions so far (kept under its old name): every claim, a workflow's timer,
    # signal and child wake-ups included. Not the retry policy's count: that is
    # `retry_attempt` of `max_attempts` (docs/FAILURES.md, attempts and executions)
    attempt: int
    fencing_token: int
    worker_id: str | None
    timestamps: StateTimes
    last_error: dict[str, Any] | None
    updated_at: datetime
    failures: int = 0  # failures counted against max_attempts (not throttles nor releases)
    executions: int = 0  # claims of the run: the same number as `attempt`, named for what it is
    # the attempt the retry policy counts that the run is on or ended on (failures counted
    # before it, plus one), of `max_attempts`: what "attempt 2 of 3" means
    retry_attempt: int = 1
    max_attempts: int = 3
    retry_at: datetime | None = None
    cancel_requested: bool = False
    replay_of: uuid.UUID | None = None
    output: Any = None
    links: dict[str, str] | None = None  # the run's timeline and captured logs
    concurrency_key: str | None = None
    resource: str | None = None
    waiting_reason: str | None = None  # why it waits: the dispatcher, a timer, a signal
    steps_done: int = 0  # a workflow's recorded steps (GET /v1/runs/{id}/steps)
    # the step a workflow run is in: a suspended run's waiting step (sleep, signal:x), a
    # running run's executing step (its name, as in `running_step`)
    current_step: str | None = None
    parent_run_id: uuid.UUID | None = None  # a workflow's child: its parent run
    waiting_for_child: uuid.UUID | None = None  # the child run a suspended workflow waits for
    paused: bool = False  # an operator paused it (POST /v1/runs/{id}/resume ends that)
    # a suspended run's: timer | signal | child | paused (at a step boundary, no wait pending)
    wait_reason: str | None = None
    payload: Any = None  # the run's own payload (GET /v1/runs/{id} only; lists leave it out)
    # the task's payload schema version the payload was validated against at submission (None:
    # no schema was registered); only workers accepting it claim the run
    payload_version: int | None = None
    # the handler version of the latest attempt's worker; `pinned`: a started workflow, which
    # only workers serving that version resume (docs/WORKFLOWS.md, versioned handlers)
    task_version: str | None = None
    pinned: bool = False
    fan_out: FanOutView | None = None  # GET /v1/runs/{id} only: its latest fan-out
    # a DAG node's run (trigger dag; GET /v1/runs/{id} only): its DAG run and node key
    dag_run_id: uuid.UUID | None = None
    dag_node: str | None = None
    # a running workflow's executing step (GET /v1/runs/{id} only; docs/WORKFLOW_STEPS.md)
    running_step: RunningStepView | None = None
    attributes: dict[str, Any] | None = None  # its searchable attributes, as stored
    # read back from the archive (docs/RETENTION.md): the run left the hot database at
    # `archived_at`; it can be read, not changed (an action on it is a 409 run-archived)
    archived: bool = False
    archived_at: datetime | None = None
    # an operator's hold (POST /v1/runs/{id}/hold): never archived or removed until released
    held: HoldView | None = None


class RunningStepView(msgspec.Struct, kw_only=True):
    """The step a running workflow is executing: its position, name and since when (the
    database clock), as its worker said when the step began; gone once it is recorded."""

    seq: int
    name: str
    since: datetime


class StepView(msgspec.Struct, kw_only=True):
    """A workflow step as its run recorded it (steps, timers and signal waits alike), or, last
    on the last page, the step a running workflow is executing (`state` running: nothing
    recorded yet, `recorded_at` None, `started_at` since when)."""

    seq: int
    name: str
    succeeded: bool
    attempt: int  # the run attempt that recorded it; 0: recorded while the run was suspended
    tries: int
    duration_ms: float
    recorded_at: datetime | None
    output: Any = None
    output_ref: uuid.UUID | None = None  # a large output, kept in the blob store
    error_type: str | None = None
    message: str | None = None
    state: Literal["succeeded", "failed", "running"] = "succeeded"
    started_at: datetime | None = None  # a running step's start (the database clock)


class StepsPage(msgspec.Struct, kw_only=True):
    run_id: uuid.UUID
    steps_done: int
    items: list[StepView]
    next_after: int | None = None  # pass as `after` for the next page; None: the last page
    archived: bool = False  # read back from the archive (docs/RETENTION.md), archived then
    archived_at: datetime | None = None


class ChildView(msgspec.Struct, kw_only=True):
    """A workflow's child run (its details: GET /v1/runs/{id})."""

    id: uuid.UUID
    task: str
    state: str
    parent_notified: bool  # final, and its parent was told (woken, if it waited for it)


class ChildrenPage(msgspec.Struct, kw_only=True):
    run_id: uuid.UUID
    items: list[ChildView]
    next_after: uuid.UUID | None = None  # pass as `after` for the next page; None: the last
    archived: bool = False  # read back from the archive (docs/RETENTION.md), archived then
    archived_at: datetime | None = None


class SignalAccepted(msgspec.Struct, kw_only=True):
    signal_id: uuid.UUID
    delivered: bool  # True: a wait took it and the run is woken; False: kept for a later wait
    created: bool  # False: this idempotency key was used before; nothing new was recorded


class WorkflowStartRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Start a workflow run under the caller's own id (`POST /v1/workflows/{task}/{id}/start`):
    `id_reuse_policy` says whether an id whose earlier run ended may be used again
    (docs/WORKFLOWS.md, "Workflow ids and signal-with-start")."""

    payload: Any = None
    pool: PoolName = "default"
    id_reuse_policy: str = "allow_duplicate"
    idempotency_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None


class SignalWithStartRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Signal the running run of a workflow id, starting it with `payload` first if none runs
    (`POST /v1/workflows/{task}/{id}/signal-with-start`)."""

    signal: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    signal_payload: Any = None
    payload: Any = None  # the start's payload, used only when a run is started
    pool: PoolName = "default"
    id_reuse_policy: str = "allow_duplicate"
    idempotency_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None


class WorkflowStarted(msgspec.Struct, kw_only=True):
    """The run a workflow id names; `started`: this call made it; `signal_id`/`delivered`: the
    signal recorded for it (signal-with-start only)."""

    run_id: uuid.UUID
    workflow_id: str
    task: str
    started: bool
    signal_id: uuid.UUID | None = None
    delivered: bool = False


class UpdateRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """An update to a running workflow (`POST /v1/runs/{id}/updates`): the workflow's handler
    for `name` answers it; the same `idempotency_key` names the same update (and answer)."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    payload: Any = None
    idempotency_key: Annotated[str, msgspec.Meta(min_length=1, max_length=256)] | None = None


class UpdateError(msgspec.Struct, kw_only=True):
    type: str
    message: str


class UpdateView(msgspec.Struct, kw_only=True):
    """Where an update stands: `pending` (not answered, the run not final), `completed`
    (`output`), `rejected` (`error`: an unknown name, a handler's failure), `abandoned` (the
    run ended without answering it)."""

    update_id: uuid.UUID
    run_id: uuid.UUID
    name: str
    state: str
    taken: bool  # a `ctx.next_update` wait of the workflow took it
    created: bool = True  # False: this idempotency key was used before; nothing new was sent
    output: Any = None
    error: UpdateError | None = None
    archived: bool = False  # read back from the archive (docs/RETENTION.md), archived then
    archived_at: datetime | None = None


class StateValue(msgspec.Struct, kw_only=True):
    value: Any
    seq: int  # the position that recorded it (the latest set of its name)
    set_at: datetime


class RunStateView(msgspec.Struct, kw_only=True):
    """The latest value of each name a workflow published (`ctx.set`), while it runs and
    after; `run_state`: the run's lifecycle state when read."""

    run_id: uuid.UUID
    run_state: str
    values: dict[str, StateValue]
    archived: bool = False  # read back from the archive (docs/RETENTION.md), archived then
    archived_at: datetime | None = None


class EventView(msgspec.Struct, kw_only=True):
    seq: int
    version: int
    event_id: uuid.UUID
    type: str
    occurred_at: datetime
    recorded_at: datetime
    actor: str
    epoch: int | None
    data: dict[str, Any]


class Page(msgspec.Struct, kw_only=True):
    items: list[Any]
    next_cursor: str | None = None


class EventsPage(msgspec.Struct, kw_only=True):
    run_id: uuid.UUID
    items: list[EventView]
    next_after: int | None = None  # pass as `after` for the next page; None: the last page
    archived: bool = False  # read back from the archive (docs/RETENTION.md), archived then
    archived_at: datetime | None = None


class RunLogLine(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One line of a run's log, as the worker reported it (`fields` omitted when empty)."""

    t: float  # seconds since the attempt started, on the worker's monotonic clock
    level: str
    message: str
    fields: dict[str, Any] = {}


class RunLogs(msgspec.Struct, kw_only=True):
    """GET /v1/runs/{id}/logs: the log lines of the run's latest reported attempt."""

    run_id: uuid.UUID
    attempt: int
    items: list[RunLogLine]
    archived: bool = False  # read back from the archive (docs/RETENTION.md), archived then
    archived_at: datetime | None = None


class RunResult(msgspec.Struct, kw_only=True):
    """GET /v1/runs/{id}/result (a long poll): `done` false when the wait ended before the run
    did (ask again); when done, `state` is final: `succeeded` with `output`, or `dead_lettered`
    / `failed` (a DAG run) / `cancelled` with the final `error` (`type`, `message`, ...). `kind`
    is `run` (a task or workflow run) or `dag_run`."""

    run_id: uuid.UUID
    kind: Literal["run", "dag_run"] = "run"
    done: bool
    state: str
    output: Any = None
    error: dict[str, Any] | None = None
    finished_at: datetime | None = None
    archived: bool = False  # read back from the archive (docs/RETENTION.md), archived then
    archived_at: datetime | None = None


class Cancelled(msgspec.Struct, kw_only=True):
    """POST /v1/runs/{id}/cancel: `cancel` is `done` (it was waiting) or `requested` (a running
    run stops at its next safe point)."""

    state: str
    cancel: str


class PauseRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    reason: Annotated[str, msgspec.Meta(max_length=500)] = "paused by user"


class ResumeRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """`misfire` decides the slots missed while paused; omitted: the schedule's own policy."""

    misfire: Literal["run_once", "catch_up", "skip"] | None = None


class TriggerRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """`request_key`: the same key on the same job triggers once, however often it is sent."""

    request_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None


class TriggeredView(msgspec.Struct, kw_only=True):
    """A trigger's run (a plain job's), or its DAG run (`dag_run_id`, a DAG job's; `run_id` is
    then null: the nodes' runs start with the DAG run). `created` is false for a resent
    `request_key`."""

    run_id: uuid.UUID | None
    job_id: uuid.UUID
    trigger: str
    dag_run_id: uuid.UUID | None = None
    created: bool = True


class CalendarRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    dates: Annotated[list[date], msgspec.Meta(max_length=10_000)]


class CalendarView(msgspec.Struct, kw_only=True):
    name: str
    dates: list[date]
    updated_at: datetime


class Calendars(msgspec.Struct, kw_only=True):
    items: list[CalendarView]


# Alert sinks and alerts (docs/ALERTS.md)

HeaderName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9-]{1,100}$")]


class AlertSinkRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A webhook sink: Alertmanager's webhook body (version 4) is POSTed to `url`."""

    url: Annotated[str, msgspec.Meta(min_length=8, max_length=2000)]  # http:// or https://
    secret_header: HeaderName | None = None  # e.g. "Authorization"; sent with every delivery
    secret: Annotated[str, msgspec.Meta(min_length=1, max_length=4000)] | None = None
    owners: Annotated[list[TeamName], msgspec.Meta(max_length=100)] = []  # teams it serves
    default: bool = False  # also the alerts no owner's sink takes


class AlertSinkView(msgspec.Struct, kw_only=True):
    name: str
    url: str
    secret_header: str | None  # the secret itself is never shown
    owners: list[str]
    default: bool
    created_at: datetime
    updated_at: datetime


class AlertView(msgspec.Struct, kw_only=True):
    key: str
    rule: str
    status: str  # firing | resolved
    owner: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None = None


class AlertSinks(msgspec.Struct, kw_only=True):
    items: list[AlertSinkView]


class Alerts(msgspec.Struct, kw_only=True):
    items: list[AlertView]


# Per-job health and tenant usage (docs/ALERTS.md, "Health and usage")


class JobHealthView(msgspec.Struct, kw_only=True):
    job_id: uuid.UUID
    window_from: datetime = msgspec.field(name="from")
    window_to: datetime = msgspec.field(name="to")
    runs: int  # runs with slots in the window
    succeeded: int
    failed: int  # failed or dead-lettered
    in_progress: int
    started: int  # runs whose first attempt started (the lag's sample)
    lag_p50_seconds: float | None  # first start minus due time
    lag_p99_seconds: float | None
    lag_max_seconds: float | None
    last_success_at: datetime | None  # ever, not only in the window
    missed: int  # OccurrenceMissed recorded in the window (gaps, overdue checks)
    ledger_missing: int  # LedgerSlotMissing recorded in the window (the independent ledger)
    overdue: int  # CompletionOverdue recorded in the window
    skips: int  # OccurrencesSkipped recorded in the window
    complete_within_seconds: float | None = None
    max_staleness_seconds: float | None = None


class UsageBucket(msgspec.Struct, kw_only=True):
    start: datetime  # the hour or day (UTC) it covers
    runs: int = 0  # runs created
    attempts: int = 0  # attempts started
    worker_seconds: float = 0.0  # attempts' time from start to their outcome
    payload_bytes: int = 0  # payloads submitted
    output_bytes: int = 0  # outputs recorded (sized on their completion events: still counted
    #                        after retention expires the outputs themselves)
    workflow_steps: int = 0  # steps recorded


class UsageView(msgspec.Struct, kw_only=True):
    window_from: datetime = msgspec.field(name="from")
    window_to: datetime = msgspec.field(name="to")
    granularity: str
    items: list[UsageBucket]
    total: UsageBucket  # the sums (its `start`: the window's)


class UpcomingItem(msgspec.Struct, kw_only=True):
    slot: datetime  # the nominal occurrence (UTC)
    due_at: datetime  # slot + the deterministic jitter offset
    local: str  # the slot in the schedule's time zone, for checking DST behaviour


class UpcomingView(msgspec.Struct, kw_only=True):
    timezone: str
    items: list[UpcomingItem]


class PreviewRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    schedule: ScheduleSpec
    count: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10


class BackfillRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """`dry_run`: answer the slots the backfill would create or leave alone, change nothing."""

    start: Annotated[datetime, msgspec.Meta(tz=True)]
    end: Annotated[datetime, msgspec.Meta(tz=True)]
    dry_run: bool = False


class BackfillSlotView(msgspec.Struct, kw_only=True):
    """One slot of the range: `action` create (a run), has_run (left alone), removed (among
    runs retention removed: left alone), upcoming (at or after the job's next slot: left to the
    scheduler) or skip (overlap=skip, recorded as a skip); `recorded_skip` the reason of an
    earlier recorded skip."""

    slot: datetime
    local: str
    action: str
    recorded_skip: str | None = None


class BackfillView(msgspec.Struct, kw_only=True):
    start: datetime
    end: datetime
    runs_created: int
    slots_with_runs: int
    slots_skipped: int
    dry_run: bool = False
    timezone: str = "UTC"
    slots: list[BackfillSlotView] = []


class RunPauseRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    reason: Annotated[str, msgspec.Meta(max_length=1000)] | None = None


class PauseMatchingRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Pause or resume the running and suspended runs of a task or of a job."""

    # A task or a job_id, as `runs.pausing.pause_matching` enforces (else a 422 naming `task`);
    # `runtime/contract.py` puts the rule into the OpenAPI document.
    SCHEMA_RULES: ClassVar[dict[str, Any]] = {"anyOf": [
        {"required": [k], "properties": {k: {"type": "string"}}} for k in ("task", "job_id")]}

    task: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    job_id: uuid.UUID | None = None
    reason: Annotated[str, msgspec.Meta(max_length=1000)] | None = None


class PauseChanged(msgspec.Struct, kw_only=True):
    changed: int  # runs paused (or resumed) by this call; already so: not counted


class RunPaused(msgspec.Struct, kw_only=True):
    """POST /v1/runs/{id}/pause and /resume."""

    paused: bool
    changed: bool  # False: it was already so


class HoldRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """POST /v1/runs/{id}/hold (`reason` required, non-empty) and /release (optional)."""

    reason: str | None = None


class HoldView(msgspec.Struct, kw_only=True):
    """A run's hold (docs/RETENTION.md): never archived or removed until released."""

    reason: str
    by: str  # the actor who held it (as the audit trail names it)
    at: datetime


class RunHoldResult(msgspec.Struct, kw_only=True):
    """POST /v1/runs/{id}/hold and /release: the hold now (None: not held), and whether this
    call changed it (holding a held run or releasing one not held: False, nothing recorded)."""

    run_id: uuid.UUID
    held: HoldView | None
    changed: bool


class RetentionRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """PUT /v1/tenants/{id}/retention: `keep` in seconds or as a duration ("30d", "12h",
    "P30D"; from the operator's floor, 1 hour unless lowered, to 10 years); `archive`: write
    each run to object storage before removing it (docs/RETENTION.md)."""

    # ge=1, not the floor: the floor is a setting (OSTINATO_RETENTION_FLOOR_SECONDS), checked
    # by the command with a 422 that names it
    keep: str | Annotated[int, msgspec.Meta(ge=1, le=retention.MAX_KEEP_SECONDS)]
    archive: bool = True
    reason: str | None = None


class RetentionView(msgspec.Struct, kw_only=True):
    """A tenant's retention; `default`: never set (30 days, archive), `updated_*` then None."""

    tenant_id: uuid.UUID
    keep_seconds: int
    keep: str  # the same, compact ("30d")
    archive: bool
    default: bool
    updated_at: datetime | None = None
    updated_by: str | None = None


# Operator interventions (services/api/interventions.py): each body names why, for the audit.
InterventionReason = Annotated[str, msgspec.Meta(min_length=1, max_length=1000)]


class InterventionRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    reason: InterventionReason


class SkipStepRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The output the skipped step returns to the workflow (any JSON, null too); `name`: the
    step's, needed only where nothing is recorded and the run waits for nothing there."""

    reason: InterventionReason
    output: Any
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=1000)] | None = None


class RestartRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    reason: InterventionReason
    from_seq: Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]


class SucceedRunRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    reason: InterventionReason
    output: Any = None  # the run's output (null: none)


class FailRunRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    reason: InterventionReason
    error_type: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] = "operator_failed"
    message: Annotated[str, msgspec.Meta(min_length=1, max_length=1000)] | None = None


class InterventionDone(msgspec.Struct, kw_only=True):
    """The run after an intervention, and the events it appended, in order."""

    run_id: uuid.UUID
    state: str
    version: int
    events: list[str]
    children_cancelled: int = 0


class SetAsideStepView(msgspec.Struct, kw_only=True):
    """A recorded step an intervention set aside: kept in the history, no longer replayed."""

    set_aside_version: int  # the version of the event that set it aside (GET .../events)
    set_aside_at: datetime
    seq: int
    name: str
    succeeded: bool
    attempt: int
    tries: int
    duration_ms: float
    recorded_at: datetime
    output: Any = None
    output_ref: uuid.UUID | None = None
    error_type: str | None = None
    message: str | None = None
    supplied_by: str | None = None  # a skipped step's output was supplied by this caller


class SetAsideStepsPage(msgspec.Struct, kw_only=True):
    run_id: uuid.UUID
    items: list[SetAsideStepView]
    # pass as after_version and after_seq for the next page; None: the last page
    next_after_version: int | None = None
    next_after_seq: int | None = None
    archived: bool = False  # read back from the archive (docs/RETENTION.md), archived then
    archived_at: datetime | None = None


class RetryRunRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    request_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None


class ReplayRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Replay a dead letter as a new run; `payload` replaces the original when given. The same
    `request_key` replays once, however often it is sent."""

    payload: Any = msgspec.UNSET
    request_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None


class BulkReplayRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    request_key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    job_id: uuid.UUID | None = None
    error_type: str | None = None
    triage_state: Literal["new", "acknowledged", "fixed", "wont_fix"] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 100


class TriageRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    state: Literal["new", "acknowledged", "fixed", "wont_fix"]
    comment: Annotated[str, msgspec.Meta(max_length=2000)] | None = None


class Rerun(msgspec.Struct, kw_only=True):
    run_id: uuid.UUID
    replay_of: uuid.UUID
    created: bool


class AttemptView(msgspec.Struct, kw_only=True):
    attempt: int
    worker_id: str | None
    started_at: datetime | None
    ended_at: datetime | None
    outcome: str
    error: dict[str, Any] | None = None


class DeadLetterView(msgspec.Struct, kw_only=True):
    run_id: uuid.UUID
    job_id: uuid.UUID
    task: str
    reason: str
    error_type: str | None
    message: str | None
    attempts: int
    dead_lettered_at: datetime
    triage_state: str
    triage_by: str | None
    triage_comment: str | None
    triaged_at: datetime | None
    replays: int
    last_replay_run: uuid.UUID | None
    payload: Any = None
    history: list[AttemptView] | None = None


class DeadLetterCounts(msgspec.Struct, kw_only=True):
    total: int
    by_error_type: dict[str, int]
    by_triage_state: dict[str, int]


class DeadLetterPage(msgspec.Struct, kw_only=True):
    items: list[DeadLetterView]
    counts: DeadLetterCounts  # of every dead letter matching the filter, not just this page
    next_cursor: str | None = None


class Triaged(msgspec.Struct, kw_only=True):
    triage_state: str


class BulkReplayed(msgspec.Struct, kw_only=True):
    matched: int
    replayed: int
    already_replayed: int


class LimitRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A fair-dispatch limit; an omitted field means no limit of that kind (docs/FAIRNESS.md)."""

    max_concurrency: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)] | None = None
    rate_per_second: Annotated[float, msgspec.Meta(ge=0, le=1_000_000)] | None = None
    burst: Annotated[float, msgspec.Meta(ge=1, le=1_000_000_000)] | None = None
    weight: Annotated[float, msgspec.Meta(ge=0, le=1000)] | None = None  # tenants only


class ApiRateRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Requests per second per API key of a tenant (0: not limited); burst defaults to the
    rate (at least 1)."""

    rate_per_second: Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]
    burst: Annotated[float, msgspec.Meta(ge=1, le=1_000_000_000)] | None = None


class LimitView(msgspec.Struct, kw_only=True):
    scope: str
    name: str
    max_concurrency: int | None
    rate_per_second: float | None
    burst: float | None
    updated_at: datetime


class Limits(msgspec.Struct, kw_only=True):
    items: list[LimitView]


class LimitSet(msgspec.Struct, kw_only=True):
    """PUT of a limit: which one was set."""

    scope: str
    name: str
    status: str


class PoolPauseRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    reason: Annotated[str, msgspec.Meta(max_length=500)] | None = None


class ClassLoad(msgspec.Struct, kw_only=True):
    waiting: int
    oldest_waiting_seconds: float | None
    in_flight: int  # queued for a worker or running


class PoolView(msgspec.Struct, kw_only=True):
    name: str
    paused: bool  # by an operator, for every tenant
    queue_paused: bool  # the caller's own queue in this pool
    shared_slots: int  # slots of live shared workers (admin key)
    own_slots: int  # slots of the caller's own live workers (every tenant's, for the admin)
    classes: dict[str, ClassLoad]


class Pools(msgspec.Struct, kw_only=True):
    items: list[PoolView]


class PoolPaused(msgspec.Struct, kw_only=True):
    pool: str
    scope: str  # "every tenant" (admin key) or "this tenant's queue"
    status: str  # paused | active
    changed: bool


class WorkerView(msgspec.Struct, kw_only=True):
    worker_id: str
    shared: bool  # started with the admin key: serves every tenant
    pools: list[str]
    slots: int
    seen_at: datetime
    versions: dict[str, str] = {}  # task -> the handler version this worker serves


class Workers(msgspec.Struct, kw_only=True):
    items: list[WorkerView]


# The tasks view (GET /v1/tasks)

class TaskVersionView(msgspec.Struct, kw_only=True):
    task: str
    # None: runs not started yet, or retries of plain tasks, that any version may take
    version: str | None
    waiting: int = 0  # to be started or resumed (a pinned run: only by this version)
    running: int = 0
    suspended: int = 0  # workflows asleep on a timer, a signal or a child: pinned here
    workers: int = 0  # live workers serving this version
    # Pinned runs that no live worker can resume: they wait "no worker serves <task> v<version>"
    stranded: bool = False
    drained: bool = False  # no run left on this version: its code may be removed


class TasksPage(msgspec.Struct, kw_only=True):
    items: list[TaskVersionView]


# A job's own history (GET /v1/jobs/{id}/events, /skips)

class JobEventsPage(msgspec.Struct, kw_only=True):
    job_id: uuid.UUID
    items: list[EventView]
    next_after: int | None = None  # pass as `after` for the next page; None: the last page


class SkipView(msgspec.Struct, kw_only=True):
    first_slot: datetime
    last_slot: datetime
    slots: int | None  # how many slots the range held (None: not counted, e.g. per-second)
    reason: str  # misfire_run_once, misfire_skip, catch_up_limit, too_late, calendar, overlap


class SkipsPage(msgspec.Struct, kw_only=True):
    job_id: uuid.UUID
    items: list[SkipView]
    next_after: datetime | None = None  # pass as `after` for the next page


# -- API keys (services/api/keys.py) ----------------------------------------------------------

KeyName = Annotated[str, msgspec.Meta(min_length=1, max_length=100,
                                      pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._@:-]*$")]
# A worker key's pools are checked against the configured pools by name (a 422 naming them).
KeyPool = Annotated[str, msgspec.Meta(min_length=1, max_length=63)]


class KeyRequest(msgspec.Struct, forbid_unknown_fields=True):
    name: KeyName
    role: Literal["operator", "viewer", "submitter", "worker"]
    # a worker key's pools (none: every pool); only for role worker
    pools: Annotated[list[KeyPool], msgspec.Meta(max_length=64)] = msgspec.field(
        default_factory=list)


class RotateRequest(msgspec.Struct, forbid_unknown_fields=True):
    # how long the old key keeps working, so its users can switch (up to 7 days)
    grace_seconds: Annotated[int, msgspec.Meta(ge=0, le=604_800)] = 0


class KeyView(msgspec.Struct):
    id: uuid.UUID
    name: str
    role: str
    pools: list[str]
    created_at: datetime
    active: bool  # authenticates now
    revoked_at: datetime | None  # in the future during a rotation's grace period
    last_used_at: datetime | None  # to the minute


class Keys(msgspec.Struct, kw_only=True):
    """GET /v1/keys."""

    keys: list[KeyView]


class IssuedKeyView(msgspec.Struct):
    id: uuid.UUID
    name: str
    role: str
    pools: list[str]
    key: str  # shown once: only its hash is stored


class RotatedKeyView(msgspec.Struct):
    key: IssuedKeyView
    old_key_id: uuid.UUID
    old_key_expires_at: datetime


class AuditEntryView(msgspec.Struct):
    """One attempt at a control action (GET /v1/audit; docs/SECURITY.md "Audit trail")."""

    id: uuid.UUID
    recorded_at: datetime
    tenant_id: uuid.UUID | None  # the tenant acted on
    caller_tenant_id: uuid.UUID | None  # the key's own tenant (null: the admin key)
    key_id: uuid.UUID | None  # null: the admin key
    key_name: str
    role: str
    actor: str  # as the run-event log names the caller
    request_id: str  # the answer's X-Request-Id
    action: str  # e.g. job.pause, key.rotate, limit.set
    target_kind: str
    target_id: str
    status: int  # the HTTP status answered
    outcome: Literal["done", "refused", "rejected", "error"]
    detail: str
    before: Any = None
    after: Any = None


class AuditPage(msgspec.Struct, kw_only=True):
    items: list[AuditEntryView]
    next_cursor: str | None = None


# Bulk actions by query, as tracked operations (POST /v1/operations, docs/OPERATIONS.md)

OPERATION_KINDS: tuple[str, ...] = ("cancel", "retry", "replay", "pause")


class OperationFilter(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """What an operation acts on. cancel and retry select runs (`states`, `job_id`, `task`,
    `pool`, scheduled for in [`since`, `until`)); replay selects dead letters (`job_id`,
    `error_type`, `triage_state`); pause selects active jobs (`task`, `pool`). A field another
    kind's selection has is refused (400), never ignored."""
    states: Annotated[list[str], msgspec.Meta(max_length=len(RUN_STATES))] | None = None
    job_id: uuid.UUID | None = None
    task: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    pool: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    since: Annotated[datetime, msgspec.Meta(tz=True)] | None = None
    until: Annotated[datetime, msgspec.Meta(tz=True)] | None = None
    error_type: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    triage_state: Literal["new", "acknowledged", "fixed", "wont_fix"] | None = None
    # cancel and retry: searchable attributes, as GET /v1/runs?where= (e.g. "customer=acme")
    where: Annotated[list[str], msgspec.Meta(max_length=10)] | None = None


class OperationRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    kind: Literal["cancel", "retry", "replay", "pause"]
    filter: OperationFilter = msgspec.field(default_factory=OperationFilter)
    dry_run: bool = False  # only count what the filter selects; nothing is written


class OperationCountView(msgspec.Struct, kw_only=True):
    """A dry run's answer: how many items the operation would act on."""
    kind: str
    filter: dict[str, Any]
    count: int
    dry_run: bool = True


class OperationFailureView(msgspec.Struct, kw_only=True):
    item_id: uuid.UUID
    outcome: str  # skipped (no longer applicable: a run finished meanwhile) | failed
    detail: str


class OperationView(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    kind: str
    filter: dict[str, Any]
    state: str  # running | completed | cancelled
    total: int  # the selection, frozen when the operation was created
    processed: int  # done + skipped + failed
    done: int
    skipped: int
    failed: int
    actor: str
    created_at: datetime
    finished_at: datetime | None
    cancelled_by: str | None = None
    failures: list[OperationFailureView] | None = None  # GET /v1/operations/{id}: the first 100


# DAGs (docs/DAGS.md): definitions, DAG runs and their nodes


class DagRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """POST /v1/dags: the same name again defines its next version when the definition changed
    (and is the current version unchanged when it did not)."""

    name: Name
    nodes: Annotated[list[NodeSpec], msgspec.Meta(min_length=1, max_length=2000)]
    edges: Annotated[list[EdgeSpec], msgspec.Meta(max_length=20000)] = []


class DagView(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    name: str
    version: int
    version_hash: str
    node_count: int
    created_at: datetime
    updated_at: datetime
    created: bool | None = None  # POST only: a new DAG or version (False: unchanged)
    nodes: list[NodeSpec] | None = None  # GET /v1/dags/{id} only: the current definition
    edges: list[EdgeSpec] | None = None


class DagsPage(msgspec.Struct, kw_only=True):
    items: list[DagView]
    next_after: str | None = None


class DagRunRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    at: datetime | None = None  # none or past: now


class DagRunCreated(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    dag_id: uuid.UUID
    dag_version: int
    state: str  # running, or pending until `at`
    due_at: datetime


class DagNodeView(msgspec.Struct, kw_only=True):
    key: str
    task: str
    state: str  # waiting | active | succeeded | failed | cancelled | upstream_failed | skipped
    trigger_rule: str
    parents: list[str]
    run_id: uuid.UUID | None = None  # the node's current run (its latest generation)
    run_state: str | None = None
    generation: int = 0  # runs of this node before the current one (retries from it)
    attempts: int = 0
    ready_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    output_ref: uuid.UUID | None = None
    last_error: dict[str, Any] | None = None


class DagRunView(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    dag_id: uuid.UUID
    dag_version: int
    state: str  # pending | running | succeeded | failed | cancelled
    trigger: str
    due_at: datetime
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    progress: dict[str, int]  # nodes per state, and "total"
    nodes: list[DagNodeView]
    job_id: uuid.UUID | None = None
    scheduled_for: datetime | None = None
    # read back from the archive (docs/RETENTION.md "DAG runs"), archived then; read, not changed
    archived: bool = False
    archived_at: datetime | None = None


class DagRunsPage(msgspec.Struct, kw_only=True):
    items: list[DagRunView]


class DagRunCancelRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    reason: Annotated[str, msgspec.Meta(max_length=500)] = ""


class DagNodeRetryRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    reason: Annotated[str, msgspec.Meta(max_length=500)] = ""


class DagRunChanged(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    state: str
    cancelled_runs: int | None = None  # cancel: node runs asked to stop
    key: str | None = None  # retry: the node re-run, its new run and what was reset
    run_id: uuid.UUID | None = None
    reset: list[str] | None = None


# -- searchable attributes (docs/SEARCH_ATTRIBUTES.md) -----------------------------------------

class SearchAttributeRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """PUT /v1/search-attributes/{name}: declare a name for jobs and runs of the tenant."""

    type: Literal["keyword", "text", "int", "float", "bool", "datetime"]


class SearchAttributeView(msgspec.Struct, kw_only=True):
    name: str
    type: str
    created_at: datetime
    actor: str


class SearchAttributeList(msgspec.Struct, kw_only=True):
    """GET /v1/search-attributes: the tenant's declarations and how many it may have."""

    items: list[SearchAttributeView]
    cap: int
