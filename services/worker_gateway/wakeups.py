"""Long-poll wake-ups: `runs.ready.<pool>` messages say "tenant T has ready work"; claims of T
waiting for work are woken, and so are the claims of shared workers (admin key, waiting under
`None`), which serve every tenant. Losing a wake-up costs latency, never a run: waiters also
re-check the database every `fallback_seconds`."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict

from ostinato.bus.consumer import Delivered


class ReadySignals:
    def __init__(self) -> None:
        self._waiters: dict[uuid.UUID | None, set[asyncio.Event]] = defaultdict(set)

    def notify(self, tenant_id: uuid.UUID) -> None:
        """Wake the tenant's own waiting claims and every shared worker's."""
        for key in (tenant_id, None):
            for event in self._waiters.get(key, ()):
                event.set()

    async def on_ready_messages(self, delivered: list[Delivered]) -> None:
        for tenant_id in {d.envelope.tenant_id for d in delivered}:
            self.notify(tenant_id)

    async def wait(self, tenant_id: uuid.UUID | None, seconds: float) -> bool:
        """Wait until work may be ready for the tenant (None: for any tenant); False on
        timeout."""
        event = asyncio.Event()
        waiters = self._waiters[tenant_id]
        waiters.add(event)
        try:
            await asyncio.wait_for(event.wait(), seconds)
            return True
        except TimeoutError:
            return False
        finally:
            waiters.discard(event)
            if not waiters:
                self._waiters.pop(tenant_id, None)
