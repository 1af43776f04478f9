"""Every Prometheus metric Ostinato exports, defined once, on the default registry.

Each service is its own process with its own registry, so a service exports only what it touches
(plus the pre-set zero series below). Names follow Prometheus practice: `ostinato_` prefix, base
units, counters end in `_total`. Labels stay low-cardinality: never run/tenant/schedule ids or raw
paths; topics are labelled with their logical name (`Topics.logical`) so per-test prefixes don't
multiply series. Import the objects and call `.inc()`/`.observe()`/`.set()` on them.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.exposition import choose_encoder

__all__ = [
    "ALERTS_FIRING",
    "ALERT_DELIVERIES",
    "ALERT_DELIVERIES_PENDING",
    "ARCHIVE_BYTES",
    "ARCHIVE_DAG_RUNS",
    "ARCHIVE_FAILURES",
    "ARCHIVE_READS",
    "ARCHIVE_RUNS",
    "BLOBS_EXPIRED",
    "BLOB_OBJECTS",
    "BLOB_OBJECT_BYTES",
    "BUILD_INFO",
    "CLOCK_SKEW",
    "COMPLETION_OVERDUE",
    "CONSUMER_BATCH_SECONDS",
    "CONSUMER_LAG",
    "DATABASE_BYTES",
    "DATABASE_REUSABLE_BYTES",
    "DATABASE_VOLUME_BYTES",
    "DATABASE_VOLUME_USED_RATIO",
    "DATABASE_WRITES_FAILING",
    "DATABASE_WRITE_ERRORS",
    "DEAD_LETTERS",
    "DEPENDENCY_UP",
    "DUPLICATE_CLAIMS",
    "DUTY_ERRORS",
    "DUTY_TICK_SECONDS",
    "EVENTS_APPENDED",
    "HTTP_BUCKETS",
    "HTTP_REQUEST_DURATION",
    "JOBS_AUTO_PAUSED",
    "KAFKA_SUBMISSIONS",
    "LEASE_EXPIRATIONS",
    "LEDGER_DISAGREEMENTS",
    "LEDGER_SCHEDULES_UNREADABLE",
    "LEDGER_SLOTS_MISSING",
    "LEDGER_SLOTS_RESOLVED",
    "MESSAGES_CONSUMED",
    "OBJECT_STORE_BYTES",
    "OBJECT_STORE_REQUESTS",
    "OBJECT_STORE_SECONDS",
    "OCCURRENCES_MISSED",
    "OCCURRENCES_SKIPPED",
    "OLDEST_DUE_AGE",
    "OUTBOX_OLDEST_UNPUBLISHED_AGE",
    "OUTBOX_PUBLISHED",
    "OUTBOX_UNPUBLISHED",
    "POOL_BUSY_SLOTS",
    "POOL_SLOTS",
    "POOL_UTILISATION",
    "RESULT_WAITERS",
    "RETRIES_SCHEDULED",
    "RUNS_CLAIMED",
    "RUNS_COMPLETED",
    "RUNS_CREATED",
    "RUNS_QUEUED",
    "RUNS_STUCK",
    "RUN_DURATION",
    "RUN_END_NOTICES",
    "SCHEDULER_TICK_SECONDS",
    "SCHEDULE_LAG",
    "SHARD_EPOCH",
    "STALE_MESSAGES_DROPPED",
    "STALE_WRITES_REJECTED",
    "STORAGE_REFUSED",
    "STORAGE_REFUSING",
    "STUCK_RUNS",
    "TENANT_LABEL_CAP",
    "TIMER_LATENESS",
    "UPCOMING_DUE",
    "WORKFLOWS_SUSPENDED",
    "WORKFLOWS_SUSPENDED_TOO_LONG",
    "WORKFLOW_STEPS",
    "WORKFLOW_SUSPENSIONS",
    "render",
    "tenant_label",
]

# Without this every counter also exports `<name>_created` (so `ostinato_runs_created_created`).
disable_created_metrics()

# Tenant labels are bounded: the first TENANT_LABEL_CAP tenants a process labels keep their
# id, later ones share the label "other" (docs/ALERTS.md, "Metrics and cardinality").
TENANT_LABEL_CAP = int(os.environ.get("OSTINATO_METRICS_TENANT_CAP", "200"))
OTHER_TENANTS = "other"
_labelled_tenants: set[str] = set()


def tenant_label(tenant: str) -> str:
    """The `tenant` label value for `tenant` (an id): itself while under the cap, else "other"."""
    if tenant in _labelled_tenants or tenant == OTHER_TENANTS:
        return tenant
    if len(_labelled_tenants) < TENANT_LABEL_CAP:
        _labelled_tenants.add(tenant)
        return tenant
    return OTHER_TENANTS


class _TenantCapped:
    """A metric whose `tenant` label always goes through `tenant_label`, whoever sets it: the
    cap cannot be forgotten at a call site. (A gauge's caller still sums the tenants that
    share "other" before setting it.)"""

    def labels(self, *values: str, **kw: str):  # type: ignore[no-untyped-def]
        if "tenant" in kw:
            kw["tenant"] = tenant_label(str(kw["tenant"]))
        return super().labels(*values, **kw)  # type: ignore[misc]


class TenantCounter(_TenantCapped, Counter):
    pass


class TenantGauge(_TenantCapped, Gauge):
    pass


class TenantHistogram(_TenantCapped, Histogram):
    pass


# OTel's http.server.request.duration advice, reused for our other latency histograms.
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)

CLOCK_SKEW = Gauge(
    "ostinato_clock_skew_seconds",
    "This host's wall clock minus the database's, at the last sync; services use the database's "
    "time, so a skew shows here and changes nothing else."
)
DEPENDENCY_UP = Gauge(
    "ostinato_dependency_up",
    "1 while this process reaches a dependency (postgres, kafka), 0 while it does not; probed "
    "every 5 s and on every /readyz (ostinato.runtime.service).", ["dependency"]
)
DATABASE_WRITE_ERRORS = Counter(
    "ostinato_database_write_errors_total",
    "Statements of this process the database refused for want of resources or because it is "
    "read-only (SQLSTATE class 53, 58030, 25006), by SQLSTATE (ostinato.db.health).",
    ["sqlstate"]
)
DATABASE_WRITES_FAILING = Gauge(
    "ostinato_database_writes_failing",
    "1 while the database refuses this process's writes (a refused statement within the last "
    "30 s, or a read-only server), else 0; /readyz is 503 meanwhile."
)
RUNS_CREATED = Counter(
    "ostinato_runs_created_total", "Runs created, by API submission or schedule occurrence."
)
RUNS_QUEUED = Counter("ostinato_runs_queued_total", "Runs put on a ready queue for workers.")
RUNS_CLAIMED = Counter("ostinato_runs_claimed_total", "Run attempts claimed by a worker lease.")
RESULT_WAITERS = Gauge(
    "ostinato_result_waiters",
    "Long polls of GET /v1/runs/{id}/result waiting in this api process for a run's end (they "
    "hold no database connection)."
)
RUN_END_NOTICES = Counter(
    "ostinato_run_end_notices_total",
    "Run-end notices (PostgreSQL NOTIFY, one per append that ends runs) this api process's "
    "listener received, and `reconnects`: how often it (re)connected (each reads the state of "
    "every awaited run again, in one statement per 1,000).", ["kind"]
)
WORKFLOW_SUSPENSIONS = Counter(
    "ostinato_workflow_suspensions_total",
    "Workflow runs suspended (leaving their worker), by what they wait for.", ["reason"]
)
WORKFLOWS_SUSPENDED = Gauge(
    "ostinato_workflows_suspended", "Workflow runs suspended now, by what they wait for.",
    ["reason"]
)
WORKFLOWS_SUSPENDED_TOO_LONG = TenantGauge(
    "ostinato_workflows_suspended_too_long",
    "Workflow runs waiting for a signal, a child or their resume longer than the threshold "
    "(OSTINATO_SUSPENDED_ALERT_AFTER_SECONDS), by tenant and reason.", ["tenant", "reason"]
)
RUNS_STUCK = TenantGauge(
    "ostinato_runs_stuck",
    "Runs stuck, by tenant and reason: suspended_too_long (a signal, child or paused wait over "
    "OSTINATO_SUSPENDED_ALERT_AFTER_SECONDS), child_dead_lettered, no_worker (pinned to a "
    "version no live worker serves, over OSTINATO_UNSERVED_ALERT_AFTER_SECONDS), "
    "compensation_failed (until its dead letter is triaged).", ["tenant", "reason"]
)
UPCOMING_DUE = Gauge(
    "ostinato_upcoming_due",
    "Runs falling due (overdue included) within the window (1m, 5m, 15m) per pool: each active "
    "job's next occurrence, retries and workflow timers. A scaling signal: add workers before "
    "a known peak (infra/k8s/README.md).", ["pool", "window"]
)
TIMER_LATENESS = Histogram(
    "ostinato_timer_lateness_seconds",
    "Workflow timers and signal-wait timeouts: seconds from their due time to the wake-up.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
WORKFLOW_STEPS = Counter(
    "ostinato_workflow_steps_total", "Workflow steps recorded, by outcome.", ["outcome"]
)
RUNS_COMPLETED = TenantCounter(
    "ostinato_runs_completed_total", "Run attempts finished, by tenant (capped: tenant_label) "
    "and outcome.", ["tenant", "outcome"]
)
RUN_DURATION = TenantHistogram(
    "ostinato_run_duration_seconds",
    "An attempt's run time, from its claim to its reported outcome, by tenant (capped: "
    "tenant_label), pool and outcome.",
    ["tenant", "pool", "outcome"],
    buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
             14400.0),
)
OUTBOX_PUBLISHED = Counter(
    "ostinato_outbox_published_total",
    "Outbox rows published to Kafka, by logical topic (no test prefix).",
    ["topic"],
)
MESSAGES_CONSUMED = Counter(
    "ostinato_messages_consumed_total", "Kafka messages processed, by consumer.", ["consumer"]
)
STALE_WRITES_REJECTED = Counter(
    "ostinato_stale_writes_rejected_total",
    "Writes refused because their lease or fencing token was no longer current.",
)
EVENTS_APPENDED = Counter("ostinato_events_appended_total", "Events appended to the event log.")

SCHEDULER_TICK_SECONDS = Histogram(
    "ostinato_scheduler_tick_seconds",
    "Wall time of one scheduler tick (find due occurrences, create runs).",
    buckets=HTTP_BUCKETS,
)
DUTY_TICK_SECONDS = Histogram(
    "ostinato_duty_tick_seconds",
    "Wall time of one tick of a background duty (ostinato.runtime.duties), by duty.",
    ["duty"],
    buckets=HTTP_BUCKETS,
)
DUTY_ERRORS = Counter(
    "ostinato_duty_errors_total",
    "Ticks of a background duty that raised, by duty and kind (transient: retried with "
    "backoff; permanent: logged as an error and shown on /readyz until a tick succeeds).",
    ["duty", "kind"],
)
CONSUMER_BATCH_SECONDS = Histogram(
    "ostinato_consumer_batch_seconds",
    "Wall time to process one batch of consumed messages, by consumer.",
    ["consumer"],
    buckets=HTTP_BUCKETS,
)
HTTP_REQUEST_DURATION = Histogram(
    "ostinato_http_request_duration_seconds",
    "HTTP server request duration, by method, route template and status code.",
    ["method", "route", "status"],
    buckets=HTTP_BUCKETS,
)

OUTBOX_UNPUBLISHED = Gauge("ostinato_outbox_unpublished", "Outbox messages not yet published.")
OUTBOX_OLDEST_UNPUBLISHED_AGE = Gauge(
    "ostinato_outbox_oldest_unpublished_age_seconds",
    "Age of the oldest unpublished outbox row (0 when the outbox is empty).",
)
STUCK_RUNS = Gauge(
    "ostinato_stuck_runs", "Runs found stuck in a state past its deadline, by state.", ["state"]
)
OCCURRENCES_SKIPPED = Counter(
    "ostinato_occurrences_skipped_total",
    "Schedule slots recorded as skipped, by reason.",
    ["reason"],
)
OCCURRENCES_MISSED = Counter(
    "ostinato_occurrences_missed_total",
    "Due slots the reconciler found with neither a run nor a recorded skip.",
)
LEDGER_SLOTS_MISSING = TenantCounter(
    "ostinato_ledger_slots_missing_total",
    "Slots the independent ledger expected that got neither a run nor a recorded skip in time, "
    "by tenant (each slot counted once).",
    ["tenant"],
)
LEDGER_SLOTS_RESOLVED = TenantCounter(
    "ostinato_ledger_slots_resolved_total",
    "Slots recorded missing by the ledger that later got their run or recorded skip (each "
    "corrected by a LedgerSlotResolved), by tenant.",
    ["tenant"],
)
LEDGER_DISAGREEMENTS = TenantCounter(
    "ostinato_ledger_disagreements_total",
    "Slots only one of the two cron implementations (scheduler's, ledger's) has, by tenant "
    "(each slot counted once).",
    ["tenant"],
)
LEDGER_SCHEDULES_UNREADABLE = TenantCounter(
    "ostinato_ledger_schedules_unreadable_total",
    "Stored schedules the independent ledger cannot read (their slots go unaudited), by tenant "
    "(each job's schedule counted once).",
    ["tenant"],
)
COMPLETION_OVERDUE = TenantCounter(
    "ostinato_completion_overdue_total",
    "Completion deadlines breached (a run not succeeded within its job's complete_within, or a "
    "recurring job's last success older than its max_staleness), by tenant; each once.",
    ["tenant", "kind"],
)
ALERTS_FIRING = TenantGauge(
    "ostinato_alerts_firing", "Alerts firing now, by tenant and rule (ostinato.alerts).",
    ["tenant", "rule"],
)
ALERT_DELIVERIES = Counter(
    "ostinato_alert_deliveries_total",
    "Webhook deliveries of alert notifications, by outcome (delivered | failed: retried later).",
    ["outcome"],
)
ALERT_DELIVERIES_PENDING = Gauge(
    "ostinato_alert_deliveries_pending",
    "Alert notifications waiting for their sink (a sink that is down keeps them here).",
)
JOBS_AUTO_PAUSED = Counter(
    "ostinato_jobs_auto_paused_total", "Jobs paused after too many consecutive failed runs."
)
SCHEDULE_LAG = TenantHistogram(
    "ostinato_schedule_lag_seconds",
    "Start of a run's first attempt minus its due instant, by tenant (capped: tenant_label) "
    "and pool.",
    ["tenant", "pool"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0),
)
DEAD_LETTERS = TenantCounter(
    "ostinato_dead_letters_total",
    "Runs that reached the dead-letter queue, by tenant (capped: tenant_label). No job label: "
    "the owner is paged per job by the reconciler's OstinatoDeadLetter alert.",
    ["tenant"],
)
LEASE_EXPIRATIONS = Counter(
    "ostinato_lease_expirations_total", "Attempt leases that expired without an outcome."
)
DUPLICATE_CLAIMS = Counter(
    "ostinato_duplicate_claims_total",
    "Claims that found a run already leased under a current token (must stay 0).",
)
RETRIES_SCHEDULED = Counter(
    "ostinato_retries_scheduled_total", "Retries scheduled, by reason.", ["reason"]
)
STALE_MESSAGES_DROPPED = Counter(
    "ostinato_stale_messages_dropped_total",
    "Kafka messages dropped because their scheduler epoch was older than one already seen.",
)
ARCHIVE_RUNS = Counter(
    "ostinato_archive_runs_total",
    "Finished runs past their retention the archiver handled: archived (an object written), "
    "removed from the hot tables, or kept by the removal procedure (reason: a rule of "
    "docs/RETENTION.md, busy, changed, ...).",
    ["outcome", "reason"],
)
ARCHIVE_DAG_RUNS = Counter(
    "ostinato_archive_dag_runs_total",
    "Finished DAG runs past their retention the archiver handled (migration 0052): archived, "
    "removed with their nodes and stream (and a one-off DAG job's), or kept (reason: "
    "node_run_in_hot_tables, a window rule, busy, changed, ...).",
    ["outcome", "reason"],
)
ARCHIVE_BYTES = Counter(
    "ostinato_archive_bytes_total",
    "Bytes the archiver wrote to the object store (run objects and index objects, gzip'd).",
)
ARCHIVE_FAILURES = Counter(
    "ostinato_archive_failures_total",
    "Archiver passes that failed, nothing of their batch removed (kind: store, the object store "
    "did not confirm a put; database).",
    ["kind"],
)
BLOBS_EXPIRED = Counter(
    "ostinato_blobs_expired_total", "Outputs and captured logs deleted by the retention setting."
)
BLOB_OBJECTS = Counter(
    "ostinato_blob_objects_total",
    "Blob objects (values over the inline limit) put, read, collected and swept, by outcome: "
    "put stored (before its transaction)|stored_in_transaction (under its locks)|reused (a "
    "reference vouched for it: no put)|unavailable, get read|unreadable|unavailable, collect "
    "deleted|unavailable, sweep deleted|unavailable (orphans no row knew).", ["op", "outcome"]
)
BLOB_OBJECT_BYTES = Counter(
    "ostinato_blob_object_bytes_total", "Bytes of blob objects put and swept.", ["op"]
)
SHARD_EPOCH = Gauge(
    "ostinato_shard_epoch", "Epoch of each scheduler shard lease this instance holds.", ["shard"]
)
OLDEST_DUE_AGE = Gauge(
    "ostinato_oldest_due_age_seconds",
    "Age of the oldest due occurrence of an active job that has no run yet.",
)
QUEUE_DEPTH = TenantGauge(
    "ostinato_queue_depth", "Runs waiting for the dispatcher, by tenant, priority class and pool.",
    ["tenant", "class", "pool"],
)
OLDEST_WAITING = TenantGauge(
    "ostinato_oldest_waiting_seconds",
    "Age of the oldest run waiting for the dispatcher, by tenant, priority class and pool.",
    ["tenant", "class", "pool"],
)
POOL_SLOTS = Gauge(
    "ostinato_pool_slots",
    "Slots declared by live workers (seen within the worker TTL), by pool and scope (shared: "
    "admin-key workers serving every tenant; own: tenants' workers). Set by the reconciler.",
    ["pool", "scope"],
)
POOL_BUSY_SLOTS = Gauge(
    "ostinato_pool_busy_slots",
    "Slots in use now (attempts holding a lease), by pool. Set by the reconciler.", ["pool"]
)
POOL_UTILISATION = Gauge(
    "ostinato_pool_utilisation",
    "Busy slots over live workers' slots, by pool (0 to 1; above 1 while attempts of workers "
    "that left still hold leases; 0 with no slot). Set by the reconciler.", ["pool"]
)
CONSUMER_LAG = Gauge(
    "ostinato_consumer_lag_messages",
    "Messages on the broker not yet consumed (high watermark minus position, summed over the "
    "assigned partitions), by consumer group and logical topic. Set by each consumer.",
    ["consumer", "topic"]
)
# Archived runs read back by the api (docs/RETENTION.md, "Reading an archived run"): outcome
# read, missing (no object: a 404), unreadable (ArchiveCorrupt: a 424, the alert
# OstinatoArchiveUnreadable), unavailable (the object store down: a 503).
ARCHIVE_READS = Counter(
    "ostinato_archive_reads_total",
    "Archive objects (a run's, a listing's index) the api read, by outcome.", ["outcome"]
)
for _outcome in ("read", "missing", "unreadable", "unavailable"):
    ARCHIVE_READS.labels(_outcome)  # every series exported from the start, at 0
# Never let the disk decide (docs/RETENTION.md "The disk"): what the reconciler measures and
# what the api refuses.
DATABASE_BYTES = Gauge(
    "ostinato_database_bytes",
    "The database's size (pg_database_size: relations, indexes, TOAST; not WAL). Set by the "
    "reconciler."
)
DATABASE_VOLUME_BYTES = Gauge(
    "ostinato_database_volume_bytes",
    "The database's storage by kind: total (the volume's usable size, or the configured "
    "capacity) and free (what PostgreSQL may still write). Set by the reconciler; absent while "
    "neither OSTINATO_DB_VOLUME_PATH nor OSTINATO_DB_CAPACITY_BYTES is set.", ["kind"]
)
DATABASE_REUSABLE_BYTES = Gauge(
    "ostinato_database_reusable_bytes",
    "Room inside the database's files (space removed rows left that VACUUM freed, estimated "
    "from the statistics: policy.storage.reusable_bytes), counted in the free kind of "
    "ostinato_database_volume_bytes and the used ratio. Set by the reconciler."
)
DATABASE_VOLUME_USED_RATIO = Gauge(
    "ostinato_database_volume_used_ratio",
    "Used over total of the database's storage (0 to 1; over 1 when the database outgrew its "
    "capacity); the alert watermark (0.8) fires OstinatoDatabaseFilling, the refuse watermark "
    "(0.95) makes the api refuse new work; 0 while unmeasured. Set by the reconciler."
)
# The object store (ostinato.objects, both backends): every call by operation and outcome, its
# latency and the bytes it moved (docs/OBSERVABILITY.md). Outcomes: ok, missing (ObjectMissing),
# unavailable (ObjectStoreUnavailable: down, slow, 5xx, throttled), error (any other failure).
OBJECT_STORE_REQUESTS = Counter(
    "ostinato_object_store_requests_total",
    "Object store calls by backend (file, s3), operation (put, get, head, delete, list) and "
    "outcome (ok, missing, unavailable, error).", ["backend", "op", "outcome"]
)
OBJECT_STORE_SECONDS = Histogram(
    "ostinato_object_store_request_seconds",
    "Latency of object store calls by backend and operation, whatever their outcome (a list: "
    "until its last key).", ["backend", "op"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
             30.0, 60.0),
)
OBJECT_STORE_BYTES = Counter(
    "ostinato_object_store_bytes_total",
    "Bytes moved by successful object store calls, by backend and direction (put: written, "
    "get: read).", ["backend", "op"]
)
STORAGE_REFUSING = Gauge(
    "ostinato_storage_refusing",
    "1 while the recorded storage level is full (new work refused with 503 storage-full), "
    "else 0. Set by the reconciler when it records the level and by the api when it reads it."
)
STORAGE_REFUSED = Counter(
    "ostinato_storage_refused_total",
    "Requests for new work the api refused with 503 storage-full (the storage over the refuse "
    "watermark). Set by the api."
)
DISPATCH_DECISIONS = Counter(
    "ostinato_dispatch_decisions_total", "Fair-dispatch decisions taken (one per round)."
)
DISPATCH_ROUND_SECONDS = Histogram(
    "ostinato_dispatch_round_seconds", "Time of one dispatch round (snapshot, decide, write).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
KAFKA_SUBMISSIONS = Counter(
    "ostinato_kafka_submissions_total",
    "Messages on tenants' submit topics, by outcome: accepted, duplicate (an idempotency key "
    "already used), rejected (to the tenant's rejects topic), dropped (a topic of no tenant).",
    ["outcome"],
)
BUILD_INFO = Gauge(
    "ostinato_build_info", "Always 1; the version label says what is running.", ["version"]
)


def _version() -> str:
    try:
        return version("ostinato")
    except PackageNotFoundError:
        return "0.0.0+unknown"


BUILD_INFO.labels(version=_version()).set(1)
# Series known in advance start at 0, so rate() and alerts work before the first event (the
# per-tenant ones cannot be known in advance).
DUPLICATE_CLAIMS.inc(0)
ALERT_DELIVERIES_PENDING.set(0)


def render(accept: str | None = None) -> tuple[bytes, str]:
    """Body and content type for a /metrics response, negotiated from the Accept header."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(REGISTRY), content_type
OPERATION_ITEMS = Counter(
    "ostinato_operation_items_total",
    "Items of bulk operations handled, by kind and outcome (done, skipped, failed).",
    ["kind", "outcome"],
)
