"""reconciler: anti-entropy over the log and read models — outbox lag, stuck runs, overdue and
silently missed occurrences — with alerts and repairs; its relay publishes what it repairs.
Ops endpoints on OSTINATO_OPS_HOST:OSTINATO_RECONCILER_PORT (127.0.0.1:8084)."""

from __future__ import annotations

from datetime import timedelta

from ostinato.alerts import Thresholds
from ostinato.eventlog.outbox import OutboxRelay
from ostinato.eventlog.store import EventStore
from ostinato.objects import open_object_store
from ostinato.runtime.duties import outbox_relay
from ostinato.runtime.service import Service, run_service, run_until_stopped
from services.reconciler import loop
from services.reconciler.checks.archive import ArchiveConfig
from services.reconciler.checks.blob_objects import blob_collect_duty
from services.reconciler.checks.storage import StorageConfig
from services.reconciler.loop import ReconcileConfig


async def amain() -> None:
    service = Service("reconciler")
    settings = service.settings
    pool = await service.connect_database()
    producer = await service.start_producer()
    store = EventStore(service.clock, settings.topics)
    config = ReconcileConfig(
        interval=timedelta(seconds=settings.reconcile_interval_seconds),
        fast_interval=timedelta(seconds=min(1.0, settings.reconcile_interval_seconds)),
        stuck_after=timedelta(seconds=settings.stuck_after_seconds),
        suspended_alert_after=timedelta(seconds=settings.suspended_alert_after_seconds),
        unserved_alert_after=timedelta(seconds=settings.unserved_alert_after_seconds),
        worker_ttl=timedelta(seconds=settings.worker_ttl_seconds),
        worker_dead_after=timedelta(seconds=settings.worker_dead_after_seconds),
        missed_grace=timedelta(seconds=settings.missed_grace_seconds),
        gap_window=timedelta(seconds=settings.gap_window_seconds),
        archive=ArchiveConfig(
            enabled=settings.archive_enabled, batch=settings.archive_batch,
            interval=timedelta(seconds=settings.archive_interval_seconds),
            checks_window=timedelta(seconds=settings.gap_window_seconds),
            floor_seconds=settings.retention_floor_seconds),
        output_retention=timedelta(days=settings.output_retention_days),
        alert_thresholds=Thresholds(
            lease_stuck_after=timedelta(seconds=settings.alert_lease_stuck_after_seconds),
            lag_slo=timedelta(seconds=settings.alert_lag_slo_seconds),
            lag_window=timedelta(seconds=settings.alert_lag_window_seconds),
            lag_min_samples=settings.alert_lag_min_samples,
            outbox_after=timedelta(seconds=settings.alert_outbox_after_seconds),
            no_worker_after=timedelta(seconds=settings.alert_no_worker_after_seconds),
            disagreement_window=timedelta(seconds=settings.alert_disagreement_window_seconds),
            archive_failing_after=timedelta(seconds=settings.archive_failing_after_seconds)),
        storage=StorageConfig(volume_path=settings.db_volume_path,
                              capacity_bytes=settings.db_capacity_bytes,
                              watermarks=settings.storage_watermarks),
    )

    objects = open_object_store(settings.object_store_url)
    service.use_blob_objects(objects)  # large blobs in the object store (issue 38)
    relay = service.add_duty(outbox_relay(OutboxRelay(pool, producer, settings.topics)))
    service.add_duties(loop.duties(pool, store, service.clock, config, on_repaired=relay.wake,
                                   objects=objects))
    if settings.blob_objects:  # blob objects nothing references, deleted after their grace
        service.add_duty(blob_collect_duty(
            pool, objects, grace=timedelta(seconds=settings.blob_collect_grace_seconds),
            interval=config.interval,
            sweep_interval=timedelta(seconds=settings.blob_sweep_interval_seconds)
            if settings.blob_sweep_interval_seconds > 0 else None))

    ops = service.ops_server(settings.reconciler_port)
    await ops.start()
    await run_until_stopped(service, on_stop=ops.stop)
    await producer.stop()
    await objects.close()


def main() -> None:
    run_service(amain)


if __name__ == "__main__":
    main()
