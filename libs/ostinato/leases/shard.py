"""Scheduler shard leases: each due job belongs to one of `SHARDS` shards (a function of its
id); a scheduler instance works only on the shards it leases. A lease lives `ttl` by the
database clock and is renewed every `ttl/3`; every acquisition bumps the shard's epoch.

Fencing: the scheduler's transaction re-reads its leases at their epochs `FOR SHARE` before
writing (`hold_shards_if_epoch`). A takeover needs the row lock, so it waits for that
transaction to end; a scheduler that lost a lease (paused past it, partitioned) finds it gone
and writes nothing. The events it does write carry the shard epoch.

Rebalancing: each instance's fair share is ceil(SHARDS / live instances). An instance over its
share releases the surplus (highest shards first) at its next renewal; one under it takes free
or expired shards. A dead instance's shards are free once their leases expire.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.db.queries import load
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

SHARDS = 16  # fixed by migration 0004; changing it needs a migration that re-shards jobs
LQ = load("ostinato.leases", "leases.sql")
log = get_logger("ostinato.scheduler")


def shard_of(job_id: uuid.UUID) -> int:
    """The shard a job belongs to (same formula as migration 0004's backfill: md5 prefix)."""
    return int(hashlib.md5(str(job_id).encode()).hexdigest()[:8], 16) % SHARDS


def fair_share(live_instances: int) -> int:
    return math.ceil(SHARDS / max(1, live_instances))


def surplus(owned: dict[int, int], live_instances: int) -> list[int]:
    """Shards to give back so this instance holds at most its fair share (highest first)."""
    keep = fair_share(live_instances)
    return sorted(owned, reverse=True)[: max(0, len(owned) - keep)]


@dataclass
class ShardOwnership:
    """This instance's leases: shard -> epoch. Mutated only by `ShardLeases`."""

    owner: str
    epochs: dict[int, int] = field(default_factory=dict)

    def shards(self) -> list[int]:
        return sorted(self.epochs)

    def pairs(self) -> tuple[list[int], list[int]]:
        shards = self.shards()
        return shards, [self.epochs[s] for s in shards]


class ShardLeases:
    def __init__(self, pool: asyncpg.Pool, clock: Clock, owner: str, *,
                 ttl: timedelta = timedelta(seconds=10)) -> None:
        self.pool = pool
        self.clock = clock
        self.ttl = ttl
        self.ownership = ShardOwnership(owner)

    async def refresh(self) -> ShardOwnership:
        """Renew held leases, give back a surplus, take up to the fair share."""
        own = self.ownership
        now = self.clock.db_now()
        async with self.pool.acquire() as conn, conn.transaction():
            live = await conn.fetchval(LQ["instance_seen"], own.owner, now, self.ttl)
            shards, epochs = own.pairs()
            renewed = {r["shard"]: r["epoch"] for r in await conn.fetch(
                LQ["renew_shards_if_epoch"], own.owner, shards, epochs, now, self.ttl)}
            for lost in set(own.epochs) - set(renewed):
                log.warning("shard lease lost", shard=lost, epoch=own.epochs[lost])
            give = surplus(renewed, live)
            if give:
                await conn.execute(LQ["release_shards_if_epoch"], own.owner, give,
                                   [renewed[s] for s in give])
                for s in give:
                    renewed.pop(s)
            want = fair_share(live) - len(renewed)
            if want > 0:
                for r in await conn.fetch(LQ["acquire_shards"], own.owner, want, now, self.ttl):
                    renewed[r["shard"]] = r["epoch"]
                    log.info("shard lease acquired", shard=r["shard"], epoch=r["epoch"])
        own.epochs = renewed
        for shard, epoch in renewed.items():
            metrics.SHARD_EPOCH.labels(shard=str(shard)).set(epoch)
        return own

    async def release_all(self) -> None:
        """Graceful stop: hand every shard back so another instance takes over at once."""
        shards, epochs = self.ownership.pairs()
        async with self.pool.acquire() as conn, conn.transaction():
            if shards:
                await conn.execute(LQ["release_shards_if_epoch"], self.ownership.owner, shards,
                                   epochs)
            await conn.execute(LQ["instance_gone"], self.ownership.owner)
        self.ownership.epochs = {}


async def hold(conn: asyncpg.Connection, ownership: ShardOwnership,
               clock: Clock) -> ShardOwnership:
    """In the caller's transaction: the leases still current at their epochs, locked FOR SHARE
    until the transaction ends. Lost ones are dropped from `ownership` and counted."""
    shards, epochs = ownership.pairs()
    held = {r["shard"] for r in await conn.fetch(LQ["hold_shards_if_epoch"], ownership.owner,
                                                 shards, epochs, clock.db_now())}
    for lost in set(shards) - held:
        metrics.STALE_WRITES_REJECTED.inc()
        log.warning("write refused: shard lease no longer current", shard=lost,
                    epoch=ownership.epochs[lost], owner=ownership.owner)
        ownership.epochs.pop(lost)
    return ownership
