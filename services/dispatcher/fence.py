"""Kafka-side epoch fencing of the dispatcher's wake-ups.

Per scheduler shard, the highest epoch seen so far: a `RunScheduled` message from a scheduler
writing under an older epoch than one already seen is dropped and counted. Messages only wake
the dispatcher (it reads waiting runs from the database, where stale writes were refused), so a
dropped message never loses a run: the next decision finds it anyway.
"""

from __future__ import annotations

from ostinato.bus.consumer import Delivered
from ostinato.domain import events as ev
from ostinato.leases.shard import shard_of
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.dispatcher")


class EpochFence:
    def __init__(self) -> None:
        self.highest: dict[int, int] = {}

    def admit(self, shard: int, epoch: int | None) -> bool:
        if epoch is None:
            return True
        if epoch < self.highest.get(shard, 0):
            return False
        self.highest[shard] = epoch
        return True

    def fresh(self, delivered: list[Delivered]) -> list[Delivered]:
        """The messages not from a stale epoch; the others are counted and logged."""
        return [d for d in delivered if self._admitted(d)]

    def _admitted(self, d: Delivered) -> bool:
        event = d.envelope.event
        if not isinstance(event, ev.RunScheduled):
            return True
        shard = shard_of(event.job_id)
        if self.admit(shard, d.envelope.epoch):
            return True
        metrics.STALE_MESSAGES_DROPPED.inc()
        log.warning("message from a stale scheduler epoch dropped", shard=shard,
                    epoch=d.envelope.epoch, highest=self.highest.get(shard),
                    run_id=str(d.envelope.stream_id), tenant_id=str(d.envelope.tenant_id))
        return False
