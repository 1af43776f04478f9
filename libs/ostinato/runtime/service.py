"""What every service process shares: settings, logging, tracing, the database pool, signal
handling, its background duties (`ostinato.runtime.duties`) and an orderly stop. Each
`services/<name>/__main__.py` reads as settings → duties → run over it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from datetime import datetime
from typing import Any

import asyncpg
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from ostinato import eventloop
from ostinato.bus.kafka import broker_reachable, ensure_topics, make_producer
from ostinato.clock import Clock, DatabaseClock
from ostinato.db.health import WRITES
from ostinato.db.migrate import current_version, expected_version
from ostinato.db.pool import create_pool
from ostinato.db.sqlstate import READ_ONLY
from ostinato.eventlog.store import BlobObjects, blob_objects, use_blob_objects
from ostinato.objects import ObjectStore
from ostinato.runtime.duties import Duty, DutyRunner
from ostinato.runtime.duties import readiness as duty_readiness
from ostinato.runtime.ops import Check, Degraded, HttpServer, ops_app
from ostinato.runtime.settings import Settings, load_settings
from ostinato.telemetry import metrics, tracing
from ostinato.telemetry.logging import configure_logging, get_logger

CLOCK_SYNC_SECONDS = 5.0  # how often the service reads the database's time again
CLOCK_SKEW_WARNING_SECONDS = 1.0  # a host clock further off than this is logged
PROBE_BUDGET_SECONDS = 0.8  # what /readyz waits for one dependency's answer (side by side)
KAFKA_PROBE_SECONDS = 5.0  # a broker probe at most this often
DEPENDENCY_PROBE_SECONDS = 5.0  # the `dependencies` duty's interval (gauges, transition logs)


class Service:
    def __init__(self, name: str, settings: Settings | None = None,
                 clock: Clock | None = None) -> None:
        self.name = name
        self.settings = settings or load_settings()
        # Wall time as PostgreSQL tells it (synced on connect, then every CLOCK_SYNC_SECONDS):
        # what is due, misfire lateness and event times never follow this host's clock.
        self.clock = clock or DatabaseClock()
        configure_logging(name, self.settings.log_level)
        tracing.init_tracing(name)
        metrics.BUILD_INFO.labels(version="0.1.0").set(1)
        self.log = get_logger(f"ostinato.{name}")
        self.stopping = asyncio.Event()
        self.pool: asyncpg.Pool | None = None
        self.duties: list[DutyRunner] = []  # in the order added; stopped in reverse
        self._kafka_ok = False
        self._kafka_checked = float("-inf")
        self._kafka_probe: asyncio.Task[None] | None = None
        self._kafka_probe_at = 0.0
        self._probe_conn: asyncpg.Connection | None = None
        self._probe_lock = asyncio.Lock()  # /readyz and the duty share the probe's connection
        self._up: dict[str, bool] = {}  # each dependency's last state, to log its changes
        self._blobs: BlobObjects | None = None  # use_blob_objects
        self._blobs_before: BlobObjects | None = None

    async def connect_database(self, *, attempts: int = 60) -> asyncpg.Pool:
        """Connect, waiting for the server and for the schema to be migrated."""
        delay = 0.5
        for attempt in range(1, attempts + 1):
            try:
                pool = await create_pool(self.settings.database_url,
                                         max_size=self.settings.db_pool_size)
                async with pool.acquire() as conn:
                    have, want = await current_version(conn), expected_version()
                if have >= want:
                    self.pool = pool
                    await self._sync_clock(pool)
                    if isinstance(self.clock, DatabaseClock):
                        self.add_duty(Duty("clock_sync", CLOCK_SYNC_SECONDS,
                                           lambda now, ready=pool: self._sync_clock(ready)))
                    # The dependency gauges and their logged changes (and so the alerts on
                    # them) stay current whether or not anything asks /readyz.
                    self.add_duty(Duty("dependencies", DEPENDENCY_PROBE_SECONDS,
                                       self._probe_dependencies))
                    return pool
                await pool.close()
                self.log.warning("schema not migrated yet; run `ostinato migrate`",
                                 have=have, want=want)
            except (OSError, asyncpg.PostgresError) as exc:
                self.log.warning("database not reachable yet", attempt=attempt, error=repr(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
        raise SystemExit(f"{self.name}: database not ready after {attempts} attempts")

    async def _sync_clock(self, pool: asyncpg.Pool) -> int:
        if not isinstance(self.clock, DatabaseClock):
            return 0
        async with pool.acquire() as conn:
            skew = (await self.clock.sync(conn)).total_seconds()
        metrics.CLOCK_SKEW.set(skew)
        if abs(skew) > CLOCK_SKEW_WARNING_SECONDS:
            self.log.warning("this host's clock is off the database's; the database's is used",
                             skew_seconds=round(skew, 3), alert="ostinato_clock_skew")
        return 1

    def make_producer(self) -> AIOKafkaProducer:
        """This service's idempotent producer, not started (`connect_producer`)."""
        return make_producer(self.settings.kafka_bootstrap, f"ostinato-{self.name}",
                             self.settings.kafka_auth)

    async def connect_producer(self, producer: AIOKafkaProducer) -> None:
        """Start `producer` and create the missing topics (one try: KafkaError if the broker
        does not answer)."""
        await producer.start()
        await ensure_topics(self.settings.kafka_bootstrap, self.settings.topics.all(),
                            self.settings.topic_partitions, self.settings.kafka_auth,
                            self.settings.kafka_replication_factor)

    async def start_producer(self, *, attempts: int = 60) -> AIOKafkaProducer:
        """Start an idempotent producer, waiting for the broker; create missing topics."""
        delay = 0.5
        for attempt in range(1, attempts + 1):
            producer = self.make_producer()
            try:
                await self.connect_producer(producer)
                return producer
            except KafkaError as exc:
                await producer.stop()
                self.log.warning("kafka not reachable yet", attempt=attempt, error=repr(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
        raise SystemExit(f"{self.name}: kafka not ready after {attempts} attempts")

    def add_duty(self, duty: Duty) -> DutyRunner:
        """Run `duty` from `run_until_stopped` on, reported on /readyz; its runner's `wake()` is
        for the writers that should not wait for its interval."""
        runner = DutyRunner(duty, self.clock)
        self.duties.append(runner)
        return runner

    def add_duties(self, each: Iterable[Duty]) -> list[DutyRunner]:
        return [self.add_duty(d) for d in each]

    def ops_server(self, port: int) -> HttpServer:
        """/livez, /healthz, /readyz and /metrics for services without a public API."""
        return HttpServer(ops_app(self.name, self.readiness), self.settings.ops_host, port)

    async def readiness(self, kafka: bool = True) -> dict[str, Check]:
        """Whether this process can do its work (its text, in place of False, says why not).
        Required: PostgreSQL reachable (`postgres`) and taking writes (`postgres_writes`: not
        read-only, and no statement refused for want of space or as read-only within
        `ostinato.db.health`'s window), each duty's last tick not a permanent error. Degraded,
        never a 503: Kafka (`Degraded` when down: the outbox keeps what the broker cannot
        take, and the reconciler repairs what was lost in transit). The checks run side by
        side, each answering within PROBE_BUDGET_SECONDS whatever a dependency does: a frozen
        server is reported down, never waited for. Sets `ostinato_dependency_up` and
        `ostinato_database_writes_failing`, and logs each change of a dependency's state."""
        checks: dict[str, Check]
        if kafka:
            postgres, broker = await asyncio.gather(self._postgres_status(),
                                                    self._kafka_status())
            checks = {"postgres": postgres,
                      "kafka": True if broker is True else Degraded(str(broker))}
        else:
            checks = {"postgres": await self._postgres_status()}
        checks["postgres_writes"] = WRITES.failing() or True
        self._report(checks)
        checks.update(duty_readiness(self.duties))
        return checks

    async def _probe_dependencies(self, now: datetime) -> int:
        await self.readiness()
        return 0

    def _report(self, checks: dict[str, Check]) -> None:
        """Gauges now, and one log line when a dependency goes down or comes back."""
        for name, ok in checks.items():
            up = ok is True
            if name == "postgres_writes":
                metrics.DATABASE_WRITES_FAILING.set(0 if up else 1)
            else:
                metrics.DEPENDENCY_UP.labels(dependency=name).set(1 if up else 0)
            if self._up.get(name, True) != up:
                if up:
                    self.log.info("dependency up again", dependency=name)
                else:
                    reason = ok.reason if isinstance(ok, Degraded) else ok
                    self.log.warning("dependency down", dependency=name, reason=reason,
                                     degraded=isinstance(ok, Degraded),
                                     alert="ostinato_dependency_down")
            self._up[name] = up

    async def _postgres_status(self) -> bool | str:
        """A query on a connection of the probe's own, not one from the pool: a pool busy with
        a storm of requests is a busy service, not a database that is down. A read-only server
        (a standby, `default_transaction_read_only`) is recorded as refusing writes."""
        try:
            async with asyncio.timeout(PROBE_BUDGET_SECONDS), self._probe_lock:
                if self._probe_conn is None or self._probe_conn.is_closed():
                    self._probe_conn = await asyncpg.connect(self.settings.database_url)
                read_only = await self._probe_conn.fetchval(
                    "SELECT current_setting('transaction_read_only')")
            if read_only == "on":
                WRITES.record(READ_ONLY, "the server is read-only (transaction_read_only is on)")
                self._drop_probe_conn()  # the next probe connects anew: to the primary, if HA
            return True
        except TimeoutError:
            self._drop_probe_conn()
            return f"no answer within {PROBE_BUDGET_SECONDS:g} s"
        except Exception:
            self._drop_probe_conn()
            return False

    def _drop_probe_conn(self) -> None:
        if self._probe_conn is not None:
            self._probe_conn.terminate()  # maybe mid-query on a frozen server: do not wait
            self._probe_conn = None

    async def _kafka_status(self) -> bool | str:
        """From a broker probe run in the background every KAFKA_PROBE_SECONDS (it opens a
        connection): a probe still pending is waited for up to the budget, then the last
        answer is reported with its age."""
        now = self.clock.monotonic()
        probe = self._kafka_probe
        if (probe is None or probe.done()) and now - self._kafka_checked >= KAFKA_PROBE_SECONDS:
            self._kafka_probe = probe = asyncio.create_task(self._probe_kafka(now))
        if probe is not None and not probe.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(probe), PROBE_BUDGET_SECONDS)
        now = self.clock.monotonic()
        if probe is not None and not probe.done():
            return f"no answer for {now - self._kafka_probe_at:.1f} s"
        if not self._kafka_ok:
            return f"unreachable (checked {now - self._kafka_checked:.1f} s ago)"
        return True

    async def _probe_kafka(self, started: float) -> None:
        self._kafka_probe_at = started
        self._kafka_ok = await broker_reachable(self.settings.kafka_bootstrap,
                                                self.settings.kafka_auth)
        self._kafka_checked = self.clock.monotonic()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)

    def use_blob_objects(self, store: ObjectStore | None = None) -> None:
        """Keep this process's large blobs in the object store (`store`, or the one
        OSTINATO_OBJECT_STORE_URL names, opened at its first use), unless OSTINATO_BLOB_OBJECTS
        is false; undone by `close`."""
        if self.settings.blob_objects:
            self._blobs = BlobObjects(store or self.settings.object_store_url,
                                      self.settings.blob_inline_max_bytes)
            self._blobs_before = use_blob_objects(self._blobs)

    async def close(self) -> None:
        if self._blobs is not None:
            if blob_objects() is self._blobs:
                use_blob_objects(self._blobs_before)
            await self._blobs.close()
            self._blobs = None
        self._drop_probe_conn()
        if self.pool is not None:
            await self.pool.close()
        tracing.shutdown_tracing()


STOP_SECONDS = 10.0


def run_service(amain: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a service's main coroutine (on uvloop when installed: `ostinato.eventloop`)."""
    eventloop.run(amain())


async def run_until_stopped(service: Service, tasks: Sequence[Awaitable[Any]] = (),
                            on_stop: Callable[[], Awaitable[None]] | None = None) -> None:
    """Run the service's duties (its Kafka consumers among them) and other background `tasks`
    until SIGTERM/SIGINT (or until one fails), then stop in order: `on_stop` (servers), then
    each duty after its current tick, in reverse order of adding (so a consumer, added last,
    commits and leaves first, and the relay, added first, publishes what the others appended
    last), all within STOP_SECONDS."""
    service.install_signal_handlers()
    eventloop.settle_heap()
    runners = [(r, asyncio.ensure_future(r.run())) for r in service.duties]
    running = [*(t for _, t in runners), *(asyncio.ensure_future(t) for t in tasks)]
    stopper = asyncio.ensure_future(service.stopping.wait())
    done, _ = await asyncio.wait([*running, stopper], return_when=asyncio.FIRST_COMPLETED)
    failed = [t for t in done if t is not stopper and t.exception() is not None]
    for t in failed:
        service.log.error("background task failed; stopping", error=repr(t.exception()))
    service.log.info("stopping")
    service.stopping.set()
    if on_stop is not None:
        await on_stop()
    # Let the duties finish their current tick (commit, hand shards back, drain the outbox) and
    # the other tasks their current step before cancelling.
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(STOP_SECONDS):
            for runner, task in reversed(runners):
                runner.stop()
                await asyncio.wait([task])
            pending = [t for t in running if not t.done()]
            if pending:
                await asyncio.wait(pending)
    for t in running:
        if not t.done():
            t.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    stopper.cancel()
    await service.close()
    service.log.info("stopped")
    if failed:
        raise SystemExit(1)
