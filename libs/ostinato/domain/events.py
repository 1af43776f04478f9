"""The event catalogue: every fact the log can hold, as versioned msgspec Structs.

Evolution rules (msgspec's): a new field gets a default, a field never changes type, a tag is never
reused. `schemas/events/catalogue.json` is generated from this module (`ostinato schemas`) and a
test keeps it current. Each event names the kind of stream it belongs to.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any, ClassVar

import msgspec


class Event(msgspec.Struct, tag_field="type", frozen=True, kw_only=True):
    stream_type: ClassVar[str]


# -- tenant streams ----------------------------------------------------------------------------


class TenantCreated(Event, tag="TenantCreated"):
    stream_type: ClassVar[str] = "tenant"
    name: str
    weight: int = 1


class ApiKeyIssued(Event, tag="ApiKeyIssued"):
    stream_type: ClassVar[str] = "tenant"
    key_hash: str  # hex sha256; the key itself is shown once and never stored
    role: str  # ostinato.domain.roles; "tenant" on keys of the one-key era (an operator)
    # None on keys of the one-key era: their id is derived from the hash (stores/api_keys.sql)
    key_id: uuid.UUID | None = None
    name: str = ""
    pools: list[str] = msgspec.field(default_factory=list)  # a worker key's pools; [] = all
    rotated_from: uuid.UUID | None = None  # the key this one replaces (POST .../rotate)


class ApiKeyRevoked(Event, tag="ApiKeyRevoked"):
    """The key stops authenticating at `effective_at`: the revocation itself, or the end of
    a rotation's grace period."""

    stream_type: ClassVar[str] = "tenant"
    key_id: uuid.UUID
    effective_at: datetime
    reason: str = ""


class LimitSet(Event, tag="LimitSet"):
    """A fair-dispatch limit of the tenant (docs/FAIRNESS.md): scope `tenant` (name ""; also
    its weight), `task` (a job type) or `resource` (a named external API). None = no limit."""

    stream_type: ClassVar[str] = "tenant"
    scope: str  # tenant | task | resource
    name: str
    max_concurrency: int | None = None
    rate_per_second: float | None = None
    burst: float | None = None
    weight: float | None = None  # scope tenant only: its share in weighted fair queueing


class RetentionSet(Event, tag="RetentionSet"):
    """The admin set how long the tenant's finished runs stay in the hot tables after they
    ended (`keep_seconds`) and whether they are archived to object storage first
    (docs/RETENTION.md; the rules: `ostinato.domain.retention`)."""

    stream_type: ClassVar[str] = "tenant"
    keep_seconds: int
    archive: bool = True
    by: str = ""
    reason: str | None = None


# -- job streams -------------------------------------------------------------------------------


class JobCreated(Event, tag="JobCreated"):
    stream_type: ClassVar[str] = "job"
    name: str
    task: str
    schedule: dict[str, Any]
    payload_ref: uuid.UUID
    pool: str
    priority: str
    next_run_at: datetime | None
    idempotency_key: str | None = None
    next_slot: datetime | None = None  # nominal slot; next_run_at adds the jitter offset
    retry: dict[str, Any] | None = None  # ostinato.policy.retry document
    timeout_seconds: float | None = None
    queue_wait_seconds: float | None = None
    on_queue_wait: str | None = None  # dead_letter | skip
    concurrency_key: str | None = None  # at most N runs per key of the tenant at a time
    resource: str | None = None  # a named external resource whose rate limit the runs obey
    payload_version: int | None = None  # the payload schema version it was validated against
    # SHA-256 of the request's canonical JSON, when it came with an idempotency key: the same
    # key with another request is refused
    request_hash: str | None = None
    complete_within_seconds: float | None = None  # a run must have succeeded by slot + this
    max_staleness_seconds: float | None = None  # a recurring job's last success is never older
    owner: str | None = None  # the team alerts about the job are routed to
    # searchable attributes (`ostinato.domain.attributes`), as stored; its runs inherit them
    attributes: dict[str, Any] | None = None


class OccurrenceFired(Event, tag="OccurrenceFired"):
    """The scheduler created the run for one occurrence and moved the job to its next one."""

    stream_type: ClassVar[str] = "job"
    scheduled_for: datetime
    run_id: uuid.UUID
    next_run_at: datetime | None
    next_slot: datetime | None = None


class OccurrencesSkipped(Event, tag="OccurrencesSkipped"):
    """Slots that will not run, with why (misfire policy, calendar, overlap, too late): a skip is
    always recorded, never a silent gap. `slots` is None when the range was too long to count."""

    stream_type: ClassVar[str] = "job"
    first: datetime
    last: datetime
    slots: int | None
    reason: str
    next_run_at: datetime | None
    next_slot: datetime | None


class OccurrenceMissed(Event, tag="OccurrenceMissed"):
    """The reconciler found a due slot with neither a run nor a recorded skip."""

    stream_type: ClassVar[str] = "job"
    scheduled_for: datetime
    detected_by: str
    repair: str  # what follows: "run" | "skip" | "scheduler" (left to the scheduler's policy)


class LedgerSlotMissing(Event, tag="LedgerSlotMissing"):
    """The expected-occurrence ledger (an independent cron implementation) found a slot past
    its due instant and grace with neither a run nor a recorded skip. Once per (job, slot): its
    event id is derived from both (`ostinato.ledger.finding_id`)."""

    stream_type: ClassVar[str] = "job"
    scheduled_for: datetime
    detected_by: str = "ledger"


class LedgerSlotResolved(Event, tag="LedgerSlotResolved"):
    """A slot the ledger recorded missing (`LedgerSlotMissing`) later got its run or recorded
    skip: the correction, so a "missing" is never left contradicted silently. `outcome` is the
    ledger's outcome now (completed, in_progress, failed, cancelled, skipped); `run_id` the
    run's (a DAG job's: its DAG run's), None for a skip. Once per (job, slot): its event id is
    derived from both (`ostinato.ledger.finding_id`, kind "resolved")."""

    stream_type: ClassVar[str] = "job"
    scheduled_for: datetime
    outcome: str
    run_id: uuid.UUID | None = None
    detected_by: str = "ledger"


class CompletionOverdue(Event, tag="CompletionOverdue"):
    """A completion deadline passed without a success: `kind` "complete_within" (the run of
    `scheduled_for` had not succeeded by `deadline`, slot + the job's `complete_within`; `state`
    is the run's state then: retrying, waiting, failed...) or "max_staleness" (the job's last
    success, `last_success_at`, none: its creation, got older than allowed at `deadline`). A
    DAG job's occurrence is its DAG run: `dag_run_id` instead of `run_id`, `state` the DAG
    run's. Once per breached occurrence or staleness episode: its event id is derived from the
    job, the occurrence (or last success) and the kind."""

    stream_type: ClassVar[str] = "job"
    kind: str
    deadline: datetime
    run_id: uuid.UUID | None = None
    scheduled_for: datetime | None = None
    state: str | None = None
    last_success_at: datetime | None = None
    dag_run_id: uuid.UUID | None = None


class LedgerDisagreement(Event, tag="LedgerDisagreement"):
    """The two cron implementations disagree on a slot: `expected_by` names the only one that
    has it ("ledger": the independent one; "scheduler": the scheduler's). Once per (job, slot)."""

    stream_type: ClassVar[str] = "job"
    scheduled_for: datetime
    expected_by: str


class LedgerScheduleUnreadable(Event, tag="LedgerScheduleUnreadable"):
    """The independent ledger cannot read the job's stored schedule (`error` says why), so its
    slots go unaudited until the schedule changes: the scheduler's reading is not checked. Once
    per (job, schedule document): the event id is derived from both
    (`ostinato.ledger.unreadable_id`)."""

    stream_type: ClassVar[str] = "job"
    error: str


class JobPaused(Event, tag="JobPaused"):
    stream_type: ClassVar[str] = "job"
    reason: str
    auto: bool = False


class JobResumed(Event, tag="JobResumed"):
    """`misfire` decides the slots missed while paused (None: the schedule's own policy)."""

    stream_type: ClassVar[str] = "job"
    misfire: str | None = None


class JobUpdated(Event, tag="JobUpdated"):
    """The job was edited in place (PATCH /v1/jobs/{id}): every editable setting as it is now
    (changed or not, so the projection sets them plainly), the fields that changed, the new
    definition version (1 at creation, one more per edit: the API's ETag) and why. A changed
    schedule takes over at `next_slot` (`ostinato.jobs.edit`); runs already created keep
    their settings, except the `runs_amended` still waiting to be dispatched when the edit
    asked `apply_to_scheduled` (each gets `RunAmended`)."""

    stream_type: ClassVar[str] = "job"
    definition_version: int
    changed: list[str]
    schedule: dict[str, Any]
    payload_ref: uuid.UUID
    pool: str
    priority: str
    next_run_at: datetime | None
    next_slot: datetime | None
    retry: dict[str, Any] | None = None
    timeout_seconds: float | None = None
    queue_wait_seconds: float | None = None
    on_queue_wait: str | None = None
    concurrency_key: str | None = None
    resource: str | None = None
    payload_version: int | None = None
    complete_within_seconds: float | None = None
    max_staleness_seconds: float | None = None
    owner: str | None = None
    reason: str | None = None
    apply_to_scheduled: bool = False
    runs_amended: int = 0


class BackfillRequested(Event, tag="BackfillRequested"):
    stream_type: ClassVar[str] = "job"
    start: datetime
    end: datetime
    runs_created: int
    slots_with_runs: int
    slots_skipped: int


class JobDeleted(Event, tag="JobDeleted"):
    stream_type: ClassVar[str] = "job"
    reason: str = "deleted by user"


# -- run streams -------------------------------------------------------------------------------


class RunScheduled(Event, tag="RunScheduled"):
    stream_type: ClassVar[str] = "run"
    job_id: uuid.UUID
    task: str
    pool: str
    priority: str
    payload_ref: uuid.UUID
    scheduled_for: datetime
    trigger: str = "schedule"  # schedule | manual | backfill | repair | replay | retry
    due_at: datetime | None = None  # scheduled_for + jitter
    retry: dict[str, Any] | None = None  # the job's retry policy when the run was created
    timeout_seconds: float | None = None
    queue_wait_seconds: float | None = None
    on_queue_wait: str | None = None
    replay_of: uuid.UUID | None = None  # the run this one re-runs (replay, manual retry)
    concurrency_key: str | None = None
    resource: str | None = None
    parent_run_id: uuid.UUID | None = None  # a workflow's child run (trigger "child")
    # A fan-out's chunk run (trigger "fan_out", `ostinato.domain.fanout`): the chunk's index
    # and the parent's position; None on the completion run and every other run.
    fan_out_index: int | None = None
    fan_out_seq: int | None = None
    # The task's payload schema version the payload was validated against at submission (None:
    # no schema was registered): only a worker accepting it claims the run.
    payload_version: int | None = None
    dag_run_id: uuid.UUID | None = None  # a DAG node's run (trigger "dag"): its DAG run
    dag_node: str | None = None  # ... and its node key
    attributes: dict[str, Any] | None = None  # searchable attributes, as stored (its job's)
    # The user's id for a workflow run (start by id, signal-with-start): projected to
    # run_workflow_ids. "At most one run not final per (tenant, task, id)" is decided under an
    # advisory lock in `ostinato.runs.workflow_ids`, not by a constraint (a reopened old run
    # can share it; signals go to the newest). None: started without one (a release before it
    # reads the event and ignores the field).
    workflow_id: str | None = None


class RunAmended(Event, tag="RunAmended"):
    """A run still waiting to be dispatched (state `scheduled`) takes its job's settings after
    an edit asked `apply_to_scheduled` (`JobUpdated`, same transaction): what it runs with."""

    stream_type: ClassVar[str] = "run"
    job_id: uuid.UUID
    definition_version: int
    payload_ref: uuid.UUID
    pool: str
    priority: str
    retry: dict[str, Any] | None = None
    timeout_seconds: float | None = None
    queue_wait_seconds: float | None = None
    on_queue_wait: str | None = None
    concurrency_key: str | None = None
    resource: str | None = None
    payload_version: int | None = None


class RunQueued(Event, tag="RunQueued"):
    stream_type: ClassVar[str] = "run"
    pool: str
    reason: str = "dispatched"


class RunStarted(Event, tag="RunStarted"):
    stream_type: ClassVar[str] = "run"
    attempt: int
    fencing_token: int
    worker_id: str
    lease_expires_at: datetime
    # The version of the task's handler on the worker that took the attempt (None: a worker
    # that declares none). `pinned`: a workflow's first start pins the run to that version for
    # good; a plain task's next attempt may run on any version.
    task_version: str | None = None
    pinned: bool = False


class RunSucceeded(Event, tag="RunSucceeded"):
    stream_type: ClassVar[str] = "run"
    attempt: int
    fencing_token: int
    output_ref: uuid.UUID | None
    logs_ref: uuid.UUID | None = None  # the attempt's captured log lines
    output_bytes: int | None = None  # the output's size, for usage (the blob expires)


class RunFailed(Event, tag="RunFailed"):
    stream_type: ClassVar[str] = "run"
    attempt: int
    fencing_token: int
    error_type: str
    message: str
    retryable: bool
    logs_ref: uuid.UUID | None = None


class AttemptTimedOut(Event, tag="AttemptTimedOut"):
    """The attempt ran past its timeout: a retryable failure (the SDK interrupts the handler;
    the reconciler records it when the worker does not)."""

    stream_type: ClassVar[str] = "run"
    attempt: int
    fencing_token: int
    timeout_seconds: float
    detected_by: str


class LeaseExpired(Event, tag="LeaseExpired"):
    """The worker stopped heartbeating (killed, partitioned, paused): the attempt failed and
    its token is revoked. `cause`: `lease_expired` (the lease ran out) or `missed_heartbeats`
    (a worker that pings was silent for seconds: taken back before its lease ran out)."""

    stream_type: ClassVar[str] = "run"
    attempt: int
    fencing_token: int
    worker_id: str
    expired_at: datetime
    cause: str = "lease_expired"  # absent in events written before issue 39


class LeaseReleased(Event, tag="LeaseReleased"):
    """The worker gave the run back unfinished (graceful shutdown): no attempt is used."""

    stream_type: ClassVar[str] = "run"
    attempt: int
    fencing_token: int
    worker_id: str


class RetryScheduled(Event, tag="RetryScheduled"):
    """The next attempt's due time, stored so a restart neither forgets nor repeats it."""

    stream_type: ClassVar[str] = "run"
    retry_at: datetime
    reason: str  # retryable | throttled | lease_expired | timed_out | released
    counts: bool  # whether the failure used up an attempt
    failures: int  # counted failures so far


class RetryDue(Event, tag="RetryDue"):
    """The retry's time has come: the dispatcher queues the run again."""

    stream_type: ClassVar[str] = "run"
    pool: str


class RunRepublished(Event, tag="RunRepublished"):
    """The reconciler found the run waiting for the dispatcher too long (its message lost or
    dropped) and hands it over again."""

    stream_type: ClassVar[str] = "run"
    reason: str


class RunDeadLettered(Event, tag="RunDeadLettered"):
    stream_type: ClassVar[str] = "run"
    reason: str  # permanent | exhausted | queue_wait_expired
    error_type: str | None
    message: str | None
    attempts: int
    job_id: uuid.UUID | None = None


class CancelRequested(Event, tag="CancelRequested"):
    stream_type: ClassVar[str] = "run"
    by: str


class RunCancelled(Event, tag="RunCancelled"):
    stream_type: ClassVar[str] = "run"
    by: str
    reason: str  # requested | queue_wait_expired
    output_ref: uuid.UUID | None = None  # a result that arrived after the cancel, kept but ignored
    output_bytes: int | None = None  # its size, for usage (the blob expires)


class QueueWaitExpired(Event, tag="QueueWaitExpired"):
    """Not started within the job's queue-wait deadline; RunDeadLettered or RunCancelled follows."""

    stream_type: ClassVar[str] = "run"
    deadline: datetime


class DeadLetterTriaged(Event, tag="DeadLetterTriaged"):
    stream_type: ClassVar[str] = "run"
    state: str  # new | acknowledged | fixed | wont_fix
    comment: str | None
    by: str


class DeadLetterReplayed(Event, tag="DeadLetterReplayed"):
    """Audit of a replay: who, the new run, whether the payload was changed."""

    stream_type: ClassVar[str] = "run"
    new_run_id: uuid.UUID
    request_key: str
    payload_changed: bool
    by: str


class StaleWriteRejected(Event, tag="StaleWriteRejected"):
    """A writer presented a fencing token that is no longer current; nothing else changed."""

    stream_type: ClassVar[str] = "run"
    operation: str
    presented_token: int
    current_token: int
    worker_id: str


class StepCompleted(Event, tag="StepCompleted"):
    """A workflow step returned (`ostinato.domain.workflow`): appended under the attempt's
    fencing token before the workflow goes past it; later executions return `output` (or the
    blob `output_ref`, for a large one) without running the step."""

    stream_type: ClassVar[str] = "run"
    seq: int  # the step's position in the workflow, 0-based
    name: str
    attempt: int
    fencing_token: int
    output: Any = None
    output_ref: uuid.UUID | None = None
    tries: int = 1  # runs of the step in this attempt (its own retries included)
    duration_ms: float = 0.0
    compensable: bool = False  # the step registered a compensation (a saga's step)


class StepFailed(Event, tag="StepFailed"):
    """A workflow step failed for good (a permanent error, or its retries used up in a way the
    workflow handles): later executions raise the same error at that step without running it."""

    stream_type: ClassVar[str] = "run"
    seq: int
    name: str
    attempt: int
    fencing_token: int
    error_type: str
    message: str
    tries: int = 1
    duration_ms: float = 0.0


class AttributesUpserted(Event, tag="AttributesUpserted"):
    """A workflow set searchable attributes (`ctx.upsert_attributes`, step kind `attributes`):
    recorded at its position like a step, so a later execution replays it without appending;
    the names given replace the run's values of those names, the others stay."""

    stream_type: ClassVar[str] = "run"
    seq: int
    name: str
    attempt: int
    fencing_token: int
    attributes: dict[str, Any]  # as stored (`ostinato.domain.attributes.normalise`)


class RunSuspended(Event, tag="RunSuspended"):
    """A workflow waits (a timer, a signal, a child) without holding a worker: the attempt ends
    here, its lease and slot are freed. `seq`/`name`: the workflow position that waits."""

    stream_type: ClassVar[str] = "run"
    attempt: int
    fencing_token: int
    seq: int
    name: str
    reason: str  # timer | signal | child | fan_out | paused
    wake_at: datetime | None = None  # the timer's due time, or a signal wait's timeout
    signal: str | None = None  # the signal waited for
    deadline_at: datetime | None = None  # the workflow's overall deadline: woken then, to fail
    child_run_id: uuid.UUID | None = None  # the child run waited for


class RunWoken(Event, tag="RunWoken"):
    """What a suspended run waited for happened: it is scheduled again (dispatch as usual)."""

    stream_type: ClassVar[str] = "run"
    cause: str  # timer | signal | signal_timeout | deadline | child | fan_out | cancel | resumed


class TimerFired(Event, tag="TimerFired"):
    """The timer at workflow position `seq` is due: later executions go past it at once."""

    stream_type: ClassVar[str] = "run"
    seq: int
    name: str
    due_at: datetime
    attempt: int = 0  # 0: recorded while the run was suspended, by the scheduler or api


class SignalReceived(Event, tag="SignalReceived"):
    """A signal sent to the run; kept until a wait of that name takes it."""

    stream_type: ClassVar[str] = "run"
    signal_id: uuid.UUID
    name: str
    payload: Any = None
    by: str = ""
    payload_ref: uuid.UUID | None = None  # a large payload, kept in the blob store
    reason: str | None = None  # why the sender sent it (an operator's intervention)


class SignalDelivered(Event, tag="SignalDelivered"):
    """The signal `signal_id` is what the wait at workflow position `seq` returns."""

    stream_type: ClassVar[str] = "run"
    seq: int
    name: str
    signal_id: uuid.UUID
    payload: Any = None
    attempt: int = 0  # 0: recorded while the run was suspended, by the scheduler or api
    payload_ref: uuid.UUID | None = None  # a large payload, kept in the blob store


class SignalTimedOut(Event, tag="SignalTimedOut"):
    """No signal came before the wait's timeout: the wait at `seq` raises SignalTimeout."""

    stream_type: ClassVar[str] = "run"
    seq: int
    name: str
    deadline: datetime
    attempt: int = 0  # 0: recorded while the run was suspended, by the scheduler or api


class ChildStarted(Event, tag="ChildStarted"):
    """The workflow at position `seq` created child run `child_run_id` (`ostinato.runs.children`).
    `awaited` (``ctx.child``): a `RunSuspended` follows and the position is recorded by the
    child's `ChildFinished`; otherwise (``ctx.start_child``) this is the position's record, its
    output the child's run id."""

    stream_type: ClassVar[str] = "run"
    seq: int
    name: str
    child_run_id: uuid.UUID
    task: str
    awaited: bool
    attempt: int


class ChildFinished(Event, tag="ChildFinished"):
    """The child awaited at position `seq` is final: its outcome is the position's (succeeded:
    its output, inline or the blob `output_ref`; dead-lettered or cancelled: the error)."""

    stream_type: ClassVar[str] = "run"
    seq: int
    name: str
    child_run_id: uuid.UUID
    state: str  # the child's final state: succeeded | dead_lettered | cancelled
    output: Any = None
    output_ref: uuid.UUID | None = None
    error_type: str | None = None
    message: str | None = None


class FanOutStarted(Event, tag="FanOutStarted"):
    """The workflow at position `seq` split work into `total` chunks (`ctx.fan_out`,
    `ostinato.domain.fanout`): the chunks' payloads are stored (blobs derived from the parent,
    the position and the index) and the first `admitted` chunk runs are created in the same
    transaction; at most `max_concurrency` are ever not final. A `RunSuspended` (reason fan_out)
    follows; the position is recorded by `FanOutCompleted`."""

    stream_type: ClassVar[str] = "run"
    seq: int
    name: str
    task: str
    total: int
    max_concurrency: int
    admitted: int
    on_failure: str  # fail | complete
    pool: str
    priority: str
    attempt: int
    on_complete: str | None = None  # the completion run's task
    retry: dict[str, Any] | None = None  # each chunk run's retry policy
    timeout_seconds: float | None = None


class FanOutProgressed(Event, tag="FanOutProgressed"):
    """The scheduler recorded the ends of some chunk runs (their `ParentNotified`) and admitted
    the chunks up to index `admitted` (exclusive) into the room freed: one event per parent
    per batch of ends, not per chunk. `failures`: the chunks that failed in this batch."""

    stream_type: ClassVar[str] = "run"
    seq: int
    succeeded: int  # more than before
    failed: int
    admitted: int  # chunks admitted so far, in all
    failures: list[dict[str, Any]] = msgspec.field(default_factory=list)


class FanOutCompleted(Event, tag="FanOutCompleted"):
    """Every chunk run of the fan-out at `seq` is final: this is the position's record.
    `outcome` succeeded (all chunks succeeded, or on_failure complete): the completion run
    `completion_run_id` (if any) was created in the same transaction, once; failed (on_failure
    fail and some chunk failed): no completion, the step fails with `error_type`."""

    stream_type: ClassVar[str] = "run"
    seq: int
    name: str
    outcome: str  # succeeded | failed
    total: int
    succeeded: int
    failed: int
    failures: list[dict[str, Any]] = msgspec.field(default_factory=list)  # the first ones
    completion_run_id: uuid.UUID | None = None
    error_type: str | None = None
    message: str | None = None


class RunPaused(Event, tag="RunPaused"):
    """An operator paused a workflow run (running or suspended): it starts no next step (a
    running one is suspended, reason paused, at its next step report) and its timer and
    deadline are frozen (`frozen_wake_in`: the time its timer had left, if one ran); a wait
    that completes meanwhile is recorded but wakes nothing."""

    stream_type: ClassVar[str] = "run"
    by: str
    reason: str | None = None
    frozen_wake_in: float | None = None  # seconds


class RunResumed(Event, tag="RunResumed"):
    """The pause ends: a frozen timer is due `wake_at` (now plus the time it had left), the
    deadline is restored; a run whose wait completed while paused, or that was suspended by the
    pause itself, is woken (`RunWoken`, cause resumed)."""

    stream_type: ClassVar[str] = "run"
    by: str
    reason: str | None = None
    wake_at: datetime | None = None


class RunStuck(Event, tag="RunStuck"):
    """The reconciler saw the run stuck (`reason`: suspended_too_long, child_dead_lettered,
    no_worker, compensation_failed) since `since`; once per stuck episode (nothing else
    happened to the run between two such events). It changes nothing: it is what an operator
    and the history see."""

    stream_type: ClassVar[str] = "run"
    reason: str
    detail: str
    since: datetime


class ParentNotified(Event, tag="ParentNotified"):
    """On a final child's stream: its parent has been told (`woke`: the parent waited for it
    and was woken with `ChildFinished`; otherwise it did not wait, or was final itself)."""

    stream_type: ClassVar[str] = "run"
    parent_run_id: uuid.UUID
    woke: bool


# Operator interventions (`ostinato.domain.interventions`): each an event with who and why.


class StepRetried(Event, tag="StepRetried"):
    """An operator retries the failed step at workflow position `seq` in place: its record and
    any later one are set aside (kept in the history, `run_steps_set_aside`), so the run's next
    attempt replays the steps before and runs this one again. `name`: the failed record's (None:
    the run stopped there with nothing recorded, its retries used up). A dead-lettered run is
    reopened next (`RunReopened`), a suspended one woken (`RunWoken`, cause intervention)."""

    stream_type: ClassVar[str] = "run"
    seq: int
    name: str | None
    set_aside: int  # records set aside: positions seq .. seq + set_aside - 1
    by: str
    reason: str


class StepSkipped(Event, tag="StepSkipped"):
    """An operator skips the step at `seq` (a failed record, or the position where the run
    stopped) by supplying its output: later records are set aside like a retry's and the
    position is recorded as succeeded with `output` (or the blob `output_ref`), supplied by
    `by`; the workflow gets that output when it replays the step."""

    stream_type: ClassVar[str] = "run"
    seq: int
    name: str
    set_aside: int  # records set aside: positions seq .. seq + set_aside - 1
    by: str
    reason: str
    output: Any = None
    output_ref: uuid.UUID | None = None


class RunRestarted(Event, tag="RunRestarted"):
    """An operator restarts the workflow from position `from_seq`: the records from there on
    are set aside (kept in the history), so its next attempt replays the steps before and runs
    the rest again. Signals taken by waits at those positions are pending again."""

    stream_type: ClassVar[str] = "run"
    from_seq: int
    set_aside: int
    by: str
    reason: str


class RunReopened(Event, tag="RunReopened"):
    """A dead-lettered run an intervention (`cause`) gives another chance: scheduled again, due
    now, with a fresh retry budget (failures 0); its dead letter is resolved (triage `fixed`)."""

    stream_type: ClassVar[str] = "run"
    cause: str  # step_retried | step_skipped | restarted
    by: str
    reason: str


class RunMarkedSucceeded(Event, tag="RunMarkedSucceeded"):
    """An operator decides a run that is not running succeeded, with `output_ref` as its output
    (None: none); its dead letter, if any, is resolved. No compensation runs."""

    stream_type: ClassVar[str] = "run"
    output_ref: uuid.UUID | None
    by: str
    reason: str
    output_bytes: int | None = None  # the output's size, for usage (the blob expires)


class RunMarkedFailed(Event, tag="RunMarkedFailed"):
    """An operator decides a run that is not running failed for good (its last error becomes
    `error_type`, `message`): `RunDeadLettered` (reason operator) follows. No compensation
    runs."""

    stream_type: ClassVar[str] = "run"
    error_type: str
    message: str
    by: str
    reason: str


class RunHeld(Event, tag="RunHeld"):
    """An operator held the run (any state): it is never archived or removed until released
    (docs/RETENTION.md). Bookkeeping: the run's state does not change."""

    stream_type: ClassVar[str] = "run"
    reason: str
    by: str


class RunReleased(Event, tag="RunReleased"):
    """The hold ends: the run's tenant retention applies to it again."""

    stream_type: ClassVar[str] = "run"
    by: str
    reason: str | None = None


# -- pool streams (one per pool and scope: every tenant, or one tenant's queue) ----------------


class PoolPaused(Event, tag="PoolPaused"):
    """Dispatch into the pool stops (for one tenant's queue, or for all); runs wait."""

    stream_type: ClassVar[str] = "pool"
    pool: str
    scope_tenant_id: uuid.UUID | None  # None: every tenant (an operator's pause)
    reason: str | None = None


class PoolResumed(Event, tag="PoolResumed"):
    stream_type: ClassVar[str] = "pool"
    pool: str
    scope_tenant_id: uuid.UUID | None


# -- calendar streams --------------------------------------------------------------------------


class CalendarDefined(Event, tag="CalendarDefined"):
    """Creates or replaces a named exclusion calendar: dates a schedule skips (in its zone)."""

    stream_type: ClassVar[str] = "calendar"
    name: str
    dates: list[date]


# -- DAG streams (docs/DAGS.md) ----------------------------------------------------------------


class DagDefined(Event, tag="DagDefined"):
    """A DAG's definition (ostinato.dags.graph, normalised), new or changed: `version` counts
    the definitions of this DAG, `version_hash` is the definition's content hash."""

    stream_type: ClassVar[str] = "dag"
    name: str
    version: int
    version_hash: str
    definition: dict[str, Any]


class DagRunStarted(Event, tag="DagRunStarted"):
    """A DAG run of one version: `nodes` are its node keys, all waiting; its roots start at
    `due_at` (now, or the instant it was asked for)."""

    stream_type: ClassVar[str] = "dag_run"
    dag_id: uuid.UUID
    dag_version: int
    nodes: list[str]
    due_at: datetime
    trigger: str = "api"  # api | at | schedule
    job_id: uuid.UUID | None = None
    scheduled_for: datetime | None = None


class DagNodeReady(Event, tag="DagNodeReady"):
    """The node's trigger rule holds (or an operator retried from it): its run `run_id` was
    scheduled in the same transaction. `generation` counts the node's runs in this DAG run."""

    stream_type: ClassVar[str] = "dag_run"
    key: str
    run_id: uuid.UUID
    generation: int = 0
    parents: list[uuid.UUID] = msgspec.field(default_factory=list)


class DagNodeFinished(Event, tag="DagNodeFinished"):
    """The node's run ended: `state` is the node's (succeeded | failed | cancelled). The event
    is appended by the advance poll, later than the run ended, so it carries the run's own times
    as the database recorded them: `first_started_at` (its first attempt's RunStarted),
    `started_at` (its last attempt's), `finished_at` (its final event) and `attempts`; a start
    is None if the run never started. All None in events written before these fields existed."""

    stream_type: ClassVar[str] = "dag_run"
    key: str
    run_id: uuid.UUID
    state: str
    started_at: datetime | None = None
    finished_at: datetime | None = None
    attempts: int | None = None
    first_started_at: datetime | None = None


class DagNodeSkipped(Event, tag="DagNodeSkipped"):
    """The node will not run: `state` upstream_failed or skipped (its trigger rule can no
    longer hold), or cancelled (the DAG run was cancelled before it started)."""

    stream_type: ClassVar[str] = "dag_run"
    key: str
    state: str
    cause: str = ""


class DagRunCancelled(Event, tag="DagRunCancelled"):
    """An operator cancelled the DAG run: its active nodes' runs are cancelled, its waiting
    nodes will not run."""

    stream_type: ClassVar[str] = "dag_run"
    by: str
    reason: str = ""


class DagRunRetriedFromNode(Event, tag="DagRunRetriedFromNode"):
    """An operator re-runs `key` and everything downstream of it (`reset`, back to waiting) in
    the same DAG run."""

    stream_type: ClassVar[str] = "dag_run"
    key: str
    reset: list[str]
    by: str
    reason: str = ""


class DagRunFinished(Event, tag="DagRunFinished"):
    """Every node is final: `outcome` succeeded | failed | cancelled, with the node counts."""

    stream_type: ClassVar[str] = "dag_run"
    outcome: str
    counts: dict[str, int] = msgspec.field(default_factory=dict)


class UnknownEvent(Event):
    """An event of a type this release does not know, written by a newer one during a rolling
    upgrade (docs/UPGRADES.md): kept opaque instead of refused, so the stream still reads.
    `type_name` is its `type` as written, `data` its document as written (`type` included);
    the log row around it gives its stream, version, actor and time. Not in the catalogue:
    nothing of this release writes one, and every fold ignores it (`is_unknown`)."""

    type_name: str
    data: dict[str, Any]
    stream_type: str = "unknown"  # as the log row says, when known (an append in a test)


CATALOGUE: tuple[type[Event], ...] = (
    TenantCreated,
    ApiKeyIssued,
    ApiKeyRevoked,
    LimitSet,
    RetentionSet,
    JobCreated,
    OccurrenceFired,
    OccurrencesSkipped,
    OccurrenceMissed,
    LedgerSlotMissing,
    LedgerSlotResolved,
    LedgerDisagreement,
    LedgerScheduleUnreadable,
    CompletionOverdue,
    JobPaused,
    JobResumed,
    JobUpdated,
    BackfillRequested,
    JobDeleted,
    CalendarDefined,
    PoolPaused,
    PoolResumed,
    RunScheduled,
    RunAmended,
    RunQueued,
    RunStarted,
    RunSucceeded,
    RunFailed,
    AttemptTimedOut,
    LeaseExpired,
    LeaseReleased,
    RetryScheduled,
    RetryDue,
    RunRepublished,
    RunDeadLettered,
    CancelRequested,
    RunCancelled,
    QueueWaitExpired,
    DeadLetterTriaged,
    DeadLetterReplayed,
    StaleWriteRejected,
    StepCompleted,
    StepFailed,
    AttributesUpserted,
    RunSuspended,
    RunWoken,
    TimerFired,
    SignalReceived,
    SignalDelivered,
    SignalTimedOut,
    ChildStarted,
    ChildFinished,
    ParentNotified,
    FanOutStarted,
    FanOutProgressed,
    FanOutCompleted,
    RunPaused,
    RunResumed,
    RunStuck,
    StepRetried,
    StepSkipped,
    RunRestarted,
    RunReopened,
    RunMarkedSucceeded,
    RunMarkedFailed,
    RunHeld,
    RunReleased,
    DagDefined,
    DagRunStarted,
    DagNodeReady,
    DagNodeFinished,
    DagNodeSkipped,
    DagRunCancelled,
    DagRunRetriedFromNode,
    DagRunFinished,
)

AnyEvent = (
    TenantCreated
    | ApiKeyIssued
    | ApiKeyRevoked
    | LimitSet
    | RetentionSet
    | JobCreated
    | OccurrenceFired
    | OccurrencesSkipped
    | OccurrenceMissed
    | LedgerSlotMissing
    | LedgerSlotResolved
    | LedgerDisagreement
    | LedgerScheduleUnreadable
    | CompletionOverdue
    | JobPaused
    | JobResumed
    | JobUpdated
    | BackfillRequested
    | JobDeleted
    | CalendarDefined
    | PoolPaused
    | PoolResumed
    | RunScheduled
    | RunAmended
    | RunQueued
    | RunStarted
    | RunSucceeded
    | RunFailed
    | AttemptTimedOut
    | LeaseExpired
    | LeaseReleased
    | RetryScheduled
    | RetryDue
    | RunRepublished
    | RunDeadLettered
    | CancelRequested
    | RunCancelled
    | QueueWaitExpired
    | DeadLetterTriaged
    | DeadLetterReplayed
    | StaleWriteRejected
    | StepCompleted
    | StepFailed
    | AttributesUpserted
    | RunSuspended
    | RunWoken
    | TimerFired
    | SignalReceived
    | SignalDelivered
    | SignalTimedOut
    | ChildStarted
    | ChildFinished
    | ParentNotified
    | FanOutStarted
    | FanOutProgressed
    | FanOutCompleted
    | RunPaused
    | RunResumed
    | RunStuck
    | StepRetried
    | StepSkipped
    | RunRestarted
    | RunReopened
    | RunMarkedSucceeded
    | RunMarkedFailed
    | RunHeld
    | RunReleased
    | DagDefined
    | DagRunStarted
    | DagNodeReady
    | DagNodeFinished
    | DagNodeSkipped
    | DagRunCancelled
    | DagRunRetriedFromNode
    | DagRunFinished
)

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)


_TAGS = frozenset(kind.__struct_config__.tag for kind in CATALOGUE)


def encode_event(event: Event) -> bytes:
    if type(event) is UnknownEvent:
        return _encoder.encode(event.data)  # as it was written
    return _encoder.encode(event)


def decode_event(data: bytes | str) -> Event:
    """The event `data` holds; one of a type the catalogue lacks is an `UnknownEvent` (a newer
    release wrote it), never an error. A known type with a bad field still raises."""
    try:
        return _decoder.decode(data)
    except msgspec.ValidationError:
        document = msgspec.json.decode(data)
        kind = document.get("type") if isinstance(document, dict) else None
        if isinstance(kind, str) and kind not in _TAGS:
            return UnknownEvent(type_name=kind, data=document)
        raise


def is_unknown(event: Event) -> bool:
    """An event of a type this release does not know: folds ignore it (docs/UPGRADES.md)."""
    return type(event) is UnknownEvent


def event_type(event: Event) -> str:
    if type(event) is UnknownEvent:
        return event.type_name
    return type(event).__struct_config__.tag  # type: ignore[return-value]


def event_data(event: Event) -> dict[str, Any]:
    """The event as its JSON document (`type` included): what timelines show, for an event of
    an unknown type its document as written."""
    if type(event) is UnknownEvent:
        return event.data
    return msgspec.to_builtins(event)  # type: ignore[no-any-return]


def json_schema() -> dict[str, Any]:
    """The catalogue as one JSON Schema document (committed under schemas/events/)."""
    (schema,), components = msgspec.json.schema_components([AnyEvent])
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Ostinato run-event log catalogue",
        **schema,
        "$defs": components,
    }
