"""reconciler: anti-entropy checks over the log and read models, with alerts.
Ops endpoints on OSTINATO_OPS_HOST:OSTINATO_RECONCILER_PORT (127.0.0.1:8084)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from ostinato.reconcile import run_reconciler
from ostinato.runtime.service import Service, run_until_stopped


async def amain() -> None:
    service = Service("reconciler")
    settings = service.settings
    pool = await service.connect_database()
    ops = service.ops_server(settings.reconciler_port)
    await ops.start()
    await run_until_stopped(service, [
        run_reconciler(pool, service.clock, interval_seconds=settings.reconcile_interval_seconds,
                       stuck_after=timedelta(seconds=settings.stuck_after_seconds),
                       stopping=service.stopping),
    ], on_stop=ops.stop)


def main() -> None:
    asyncio.run(amain())


if __name__ == "__main__":
    main()
