"""Long-poll wake-ups: `runs.ready.<pool>` messages say "tenant T has ready work"; claims of T
waiting for work are woken. Losing a wake-up costs latency, never a run: waiters also re-check
the database every `fallback_seconds`."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict

from ostinato.bus.consumer import Delivered


class ReadySignals:
    def __init__(self) -> None:
        self._waiters: dict[uuid.UUID, set[asyncio.Event]] = defaultdict(set)

    def notify(self, tenant_id: uuid.UUID) -> None:
        for event in self._waiters.get(tenant_id, ()):
            event.set()

    async def on_ready_messages(self, delivered: list[Delivered]) -> None:
        for tenant_id in {d.envelope.tenant_id for d in delivered}:
            self.notify(tenant_id)

    async def wait(self, tenant_id: uuid.UUID, seconds: float) -> bool:
        """Wait until work may be ready for the tenant; False on timeout."""
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
