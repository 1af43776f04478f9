"""Typed settings from `OSTINATO_*` environment variables, validated at start (12-factor).

Every knob is one flat variable; the README lists them. A bad value stops the service at start
with a message naming the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import msgspec

from ostinato.archive import DEFAULT_INLINE_MAX_BYTES
from ostinato.bus.kafka import KafkaAuth
from ostinato.bus.topics import POOL_NAME, Topics
from ostinato.domain.errors import InvalidInput
from ostinato.domain.retention import MAX_KEEP_SECONDS, MIN_KEEP_SECONDS
from ostinato.objects import parse_object_store_url
from ostinato.policy.fairness import ClassConfig, parse_classes
from ostinato.policy.retry import RetryPolicy, RetrySpec, parse_retry
from ostinato.policy.storage import Watermarks
from ostinato.wire.worker import MAX_CLAIM_WAIT_SECONDS

# The embedded default store (`make up`): the checkout's .cache/objects, or,
# installed outside a checkout, .cache/objects under the working directory.
_CHECKOUT = Path(__file__).resolve().parents[3]
DEFAULT_OBJECT_STORE_URL = (
    (_CHECKOUT if (_CHECKOUT / "pyproject.toml").is_file() else Path.cwd()) / ".cache" / "objects"
).as_uri()


class Settings(msgspec.Struct, kw_only=True, frozen=True):
    # The services' least-privilege role (README.md "Database roles"): owns no table, cannot
    # alter, truncate, disable triggers or rewrite the event log.
    database_url: str = "postgresql://ostinato_app@127.0.0.1:15432/ostinato"
    # The owner of the schema, for `ostinato migrate`, `rebuild-projections` and `schema-dump`
    # only (set it empty to use database_url: a deployment with one role); no service uses it.
    owner_database_url: str = "postgresql://ostinato_owner@127.0.0.1:15432/ostinato"
    kafka_bootstrap: str = "127.0.0.1:9092"
    # A SCRAM user of the service's own (docs/KAFKA.md), on the broker's SASL listener for
    # services; empty: the loopback PLAINTEXT listener, unauthenticated.
    kafka_username: str = ""
    kafka_password: str = ""
    kafka_security_protocol: str = "SASL_PLAINTEXT"  # or SASL_SSL
    # The broker's SASL/SCRAM listener for tenants' producers (docs/KAFKA.md), as tenants reach
    # it. Empty: no Kafka submission (no tenant users, topics or ingest), as in most tests.
    kafka_tenant_bootstrap: str = ""
    kafka_submit_partitions: int = 3  # of each tenant's submit topic
    # Replicas of each topic the services create (3 in the HA profile's three-broker cluster,
    # with min.insync.replicas 2: ostinato.bus.kafka.topic_configs); at most the broker count.
    kafka_replication_factor: int = 1
    topic_prefix: str = ""
    pools: str = "default"
    topic_partitions: int = 12
    admin_key: str = ""
    api_host: str = "127.0.0.1"
    api_port: int = 8080
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8081
    scheduler_port: int = 8082
    dispatcher_port: int = 8083
    reconciler_port: int = 8084
    ops_host: str = "127.0.0.1"
    max_payload_bytes: int = 262_144
    search_attributes_cap: int = 20  # searchable attributes a tenant may declare
    # Requests per second per API key at the api (a token bucket per key in each api process;
    # burst = its capacity); a tenant's own rate is set with PUT /v1/tenants/{id}/limits/api.
    # 0 turns the default off. The admin key and the worker gateway are not limited.
    api_rate_per_second: float = 1000.0
    api_burst: float = 2000.0
    scheduler_batch_size: int = 400  # a 100,000 burst: 55.7 s all started (100: 60.4 s)
    scheduler_poll_seconds: float = 0.05
    lease_ttl_seconds: float = 30.0
    shard_lease_ttl_seconds: float = 10.0
    # A worker counts as live (its slots as pool capacity) this long after its last claim or
    # heartbeat. Longer than the longest claim wait, so a worker blocked in a long poll stays
    # live without writes while it waits; keep it above a third of the lease TTL too (a busy
    # worker only heartbeats).
    worker_ttl_seconds: float = MAX_CLAIM_WAIT_SECONDS + 5.0
    # A worker that pings (the SDK: every second while it holds runs) and has been silent this
    # long (or three of its pings, if longer) is dead: the reconciler takes its runs back at
    # once, fenced as a lease expiry (policy/liveness.py).
    worker_dead_after_seconds: float = 3.0
    reconcile_interval_seconds: float = 10.0
    stuck_after_seconds: float = 300.0
    # A workflow suspended this long waiting for a signal, a child or its resume (paused) is
    # reported stuck (timers have due times: an overdue one is `stuck_after_seconds`' concern).
    suspended_alert_after_seconds: float = 86_400.0
    # A pinned workflow run waiting this long for a worker serving its version is stuck
    # (RunStuck no_worker, alert ostinato_run_stuck): drain a version before removing it.
    unserved_alert_after_seconds: float = 300.0
    missed_grace_seconds: float = 30.0
    gap_window_seconds: float = 86_400.0
    # The reconciler's fleet-state alert rules (docs/ALERTS.md, ostinato.alerts.Thresholds).
    alert_lease_stuck_after_seconds: float = 60.0
    alert_lag_slo_seconds: float = 60.0
    alert_lag_window_seconds: float = 900.0
    alert_lag_min_samples: int = 10
    alert_outbox_after_seconds: float = 120.0
    alert_no_worker_after_seconds: float = 300.0
    alert_disagreement_window_seconds: float = 86_400.0
    output_retention_days: float = 30.0
    # Never let the disk decide (docs/RETENTION.md "The disk"): the reconciler measures the
    # database's storage by a path on its volume (statvfs, where it shares the host: the local
    # profile sets it) and/or a capacity in bytes its size is compared with (a managed
    # database); the fuller counts, neither set: unmeasured. At the alert ratio an alert fires;
    # at the refuse ratio the api refuses new work (503 storage-full, Retry-After).
    db_volume_path: str = ""
    db_capacity_bytes: int = 0
    storage_alert_ratio: float = 0.80
    storage_refuse_ratio: float = 0.95
    storage_retry_after_seconds: int = 60
    # Where archived runs (and blobs) are kept (ostinato.objects, docs/RETENTION.md): a local
    # folder (file:///abs/dir, the embedded default: this checkout's .cache/objects) or an S3
    # bucket (s3://bucket/prefix?endpoint=...; `make up S3=1`: the local SeaweedFS).
    object_store_url: str = DEFAULT_OBJECT_STORE_URL
    # Blobs (payloads, outputs, signal payloads, large step outputs, captured logs) over this
    # many bytes are kept in the object store by content address, their `blobs` rows only the
    # reference (docs/RETENTION.md "Blobs"). `blob_objects` false: every blob inline, as the
    # previous release wrote them (for a rolling upgrade from it: docs/UPGRADES.md). The
    # reconciler deletes objects nothing references once untouched for the grace period.
    blob_objects: bool = True
    blob_inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES
    blob_collect_grace_seconds: float = 3600.0
    # The bucket sweep (objects no row knows, docs/RETENTION.md "Blobs"): one page of 1,000
    # listed keys every this many seconds; 0: no sweep.
    blob_sweep_interval_seconds: float = 60.0
    # The reconciler's archiver (docs/RETENTION.md "Archive, then remove"): runs a pass, the
    # pause between passes that found less, and how long its passes may fail before
    # OstinatoArchiveFailing fires. Disabled: no run ever leaves the hot tables.
    archive_enabled: bool = True
    archive_batch: int = 200
    archive_interval_seconds: float = 10.0
    archive_failing_after_seconds: float = 900.0
    # The least `keep` a tenant's retention may have (docs/RETENTION.md "The floor"): the API
    # refuses less (422 naming it) and the archiver never removes a run sooner. An hour by
    # default; an operator lowers it for a soak benchmark that expires runs within minutes.
    retention_floor_seconds: int = MIN_KEEP_SECONDS
    # Fair dispatch (docs/FAIRNESS.md): classes in priority order, name:reserved_share[:lendable]
    priority_classes: str = "critical:0.1:0.5,default:0.7:1,bulk:0.2:1"
    dispatch_interval_seconds: float = 0.2  # a decision at least this often, besides wake-ups
    dispatch_candidates: int = 256  # oldest waiting runs looked at per (tenant, pool, class)
    key_concurrency: int = 1  # runs at a time per (tenant, concurrency key)
    dispatch_prefetch: float = 0.5  # runs queued ahead of free slots, as a fraction of slots
    pool_retry_defaults: str = ""  # JSON {"pool": {retry policy}}: a pool's default policy
    # Items of a bulk operation (POST /v1/operations) acted on per transaction by the api.
    operation_batch_size: int = 200
    db_pool_size: int = 10
    # At SIGTERM the api and the worker-gateway drain (ostinato.runtime.ops.Drain): /readyz is a
    # 503 at once and new requests get a 503 problem with Retry-After for this long while the
    # ones in flight finish (up to DRAIN_GRACE_SECONDS more), then the port closes.
    drain_seconds: float = 1.0
    log_level: str = "info"

    def __post_init__(self) -> None:
        for pool in self.pool_names:
            if not POOL_NAME.match(pool):
                raise ValueError(f"OSTINATO_POOLS: invalid pool name {pool!r}")
        if self.max_payload_bytes <= 0:
            raise ValueError("OSTINATO_MAX_PAYLOAD_BYTES must be positive")
        if not (self.api_rate_per_second >= 0 and self.api_burst >= 1):
            raise ValueError("OSTINATO_API_RATE_PER_SECOND must be >= 0 and "
                             "OSTINATO_API_BURST >= 1")
        if self.kafka_replication_factor < 1:
            raise ValueError("OSTINATO_KAFKA_REPLICATION_FACTOR must be >= 1")
        if not 0 <= self.drain_seconds <= 60:
            raise ValueError("OSTINATO_DRAIN_SECONDS must be in 0..60")
        if self.lease_ttl_seconds <= 0:
            raise ValueError("OSTINATO_LEASE_TTL_SECONDS must be positive")
        if self.worker_dead_after_seconds <= 0:
            raise ValueError("OSTINATO_WORKER_DEAD_AFTER_SECONDS must be positive")
        if self.worker_ttl_seconds <= MAX_CLAIM_WAIT_SECONDS:
            raise ValueError("OSTINATO_WORKER_TTL_SECONDS must exceed the longest claim wait "
                             f"({MAX_CLAIM_WAIT_SECONDS:g} s)")
        if min(self.alert_lease_stuck_after_seconds, self.alert_lag_slo_seconds,
               self.alert_lag_window_seconds, self.alert_outbox_after_seconds,
               self.alert_no_worker_after_seconds,
               self.alert_disagreement_window_seconds) <= 0 or self.alert_lag_min_samples < 1:
            raise ValueError("OSTINATO_ALERT_*_SECONDS must be positive and "
                             "OSTINATO_ALERT_LAG_MIN_SAMPLES >= 1")
        try:
            self.storage_watermarks  # noqa: B018 — validated at start
        except ValueError as exc:
            raise ValueError(f"OSTINATO_STORAGE_ALERT_RATIO, OSTINATO_STORAGE_REFUSE_RATIO: "
                             f"{exc}") from exc
        if self.db_capacity_bytes < 0 or not 1 <= self.storage_retry_after_seconds <= 3600:
            raise ValueError("OSTINATO_DB_CAPACITY_BYTES must be >= 0 (0: none) and "
                             "OSTINATO_STORAGE_RETRY_AFTER_SECONDS in 1..3600")
        if not (1 <= self.archive_batch <= 1000 and self.archive_interval_seconds > 0
                and self.archive_failing_after_seconds > 0):
            raise ValueError("OSTINATO_ARCHIVE_BATCH must be in 1..1000 and "
                             "OSTINATO_ARCHIVE_*_SECONDS positive")
        if (self.blob_inline_max_bytes < 0 or self.blob_collect_grace_seconds < 60
                or self.blob_sweep_interval_seconds < 0):
            raise ValueError("OSTINATO_BLOB_INLINE_MAX_BYTES must be >= 0, "
                             "OSTINATO_BLOB_COLLECT_GRACE_SECONDS at least 60 and "
                             "OSTINATO_BLOB_SWEEP_INTERVAL_SECONDS >= 0")
        if not 1 <= self.retention_floor_seconds <= MAX_KEEP_SECONDS:
            raise ValueError(f"OSTINATO_RETENTION_FLOOR_SECONDS must be in 1..{MAX_KEEP_SECONDS}")
        try:
            self.classes  # noqa: B018 — validated at start
        except ValueError as exc:
            raise ValueError(f"OSTINATO_PRIORITY_CLASSES: {exc}") from exc
        if self.dispatch_candidates < 1 or self.key_concurrency < 0 or not (
                0 <= self.dispatch_prefetch <= 10):
            raise ValueError("OSTINATO_DISPATCH_CANDIDATES must be >= 1, "
                             "OSTINATO_KEY_CONCURRENCY >= 0, OSTINATO_DISPATCH_PREFETCH 0..10")
        try:
            parse_object_store_url(self.object_store_url)
        except ValueError as exc:
            raise ValueError(f"OSTINATO_OBJECT_STORE_URL: {exc}") from exc
        try:
            self.pool_retry  # noqa: B018 — validated at start, not at the first job
        except (msgspec.DecodeError, msgspec.ValidationError, InvalidInput) as exc:
            raise ValueError(f"OSTINATO_POOL_RETRY_DEFAULTS: {exc}") from exc

    @property
    def owner_url(self) -> str:
        """What the administrative commands connect with: the owner role."""
        return self.owner_database_url or self.database_url

    @property
    def pool_names(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in self.pools.split(",") if p.strip())

    @property
    def storage_watermarks(self) -> Watermarks:
        return Watermarks(self.storage_alert_ratio, self.storage_refuse_ratio)

    @property
    def classes(self) -> tuple[ClassConfig, ...]:
        return parse_classes(self.priority_classes)

    @property
    def pool_retry(self) -> dict[str, RetryPolicy]:
        """Per-pool default retry policies (a job's own `retry` still wins)."""
        if not self.pool_retry_defaults:
            return {}
        raw = msgspec.json.decode(self.pool_retry_defaults, type=dict[str, RetrySpec])
        return {pool: parse_retry(spec, f"OSTINATO_POOL_RETRY_DEFAULTS.{pool}")
                for pool, spec in raw.items()}

    @property
    def kafka_auth(self) -> KafkaAuth:
        return KafkaAuth(self.kafka_username, self.kafka_password, self.kafka_security_protocol)

    @property
    def topics(self) -> Topics:
        return Topics(prefix=self.topic_prefix, pools=self.pool_names,
                      partitions=self.topic_partitions)


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    fields = {f.name for f in msgspec.structs.fields(Settings)}
    raw = {
        key[len("OSTINATO_"):].lower(): value
        for key, value in env.items()
        if key.startswith("OSTINATO_") and key[len("OSTINATO_"):].lower() in fields
    }
    try:
        return msgspec.convert(raw, Settings, strict=False)
    except (msgspec.ValidationError, ValueError) as exc:
        message = str(exc)
        if "$." in message:
            name = message.rsplit("$.", 1)[1].rstrip("`")
            message = f"{message} (environment variable OSTINATO_{name.upper()})"
        raise SystemExit(f"invalid configuration: {message}") from exc
