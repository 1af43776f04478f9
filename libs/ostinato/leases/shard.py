"""Scheduler shard leases: each due job belongs to one of `SHARDS` shards (a function of its
id); a scheduler instance works only on the shards it leases. A lease lives `ttl` by the
database clock and is renewed every `ttl/3`; every acquisition bumps the shard's epoch.

Fencing: the scheduler's transaction re-reads its leases at their epochs `FOR SHARE` before
writing (`hold_shards_if_epoch`). A takeover needs the row lock, so it waits for that
transaction to end; a scheduler that lost a lease (paused past it, partitioned) finds it gone
and writes nothing. The events it does write carry the shard epoch.

Passes: an instance that has decided every job of its shards due by an instant (its poll found
fewer due jobs than a batch, or none) has completed a pass through it; the lease renewal writes
that instant to the shard's `decided_through` under the epoch, no statement of its own. The
reconciler judges a slot only once it is older than its shard's `decided_through`, so a check
never races the scheduler's catch-up after an outage (`ostinato.ledger.outcomes.decided`).

Rebalancing: each instance's fair share is ceil(SHARDS / live instances). An instance over its
share releases the surplus (highest shards first) at its next renewal; one under it takes free
or expired shards. A dead instance's shards are free once their leases expire.

The only module that reads the `shard_leases` and `scheduler_instances` tables: the store
functions below return typed rows, never records.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import asyncpg
import msgspec

from ostinato.clock import Clock
from ostinato.db.queries import load
from ostinato.stores.rows import many
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

SHARDS = 16  # fixed by migration 0004; changing it needs a migration that re-shards jobs
Q = load("ostinato.leases", "leases.sql")
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


class ShardEpoch(msgspec.Struct, frozen=True):
    """A shard lease held (renewed or just acquired) at this epoch."""

    shard: int
    epoch: int


class ShardPass(msgspec.Struct, frozen=True):
    """How far a shard's scheduler has decided (`decided_through`, None before the first pass)
    and whether a scheduler holds the shard now (`live`, by the database clock)."""

    shard: int
    decided_through: datetime | None
    live: bool

    def passed_within(self, now: datetime, grace: timedelta) -> bool:
        """A pass over the shard completed through an instant no older than `grace`."""
        return self.decided_through is not None and self.decided_through >= now - grace


def taken_over(p: ShardPass, now: datetime, grace: timedelta) -> bool:
    """No scheduler is deciding the shard: none holds it and none completed a pass over it
    within `grace`. Only then may the reconciler decide its due jobs itself. Pure."""
    return not p.live and not p.passed_within(now, grace)


class ShardLease(msgspec.Struct, frozen=True):
    """One shard's lease as stored; `owner` None: free."""

    shard: int
    owner: str | None
    epoch: int
    expires_at: datetime


async def instance_seen(conn: asyncpg.Connection, owner: str, now: datetime | None,
                        ttl: timedelta) -> int:
    """Say this scheduler instance is alive; how many instances are alive (itself included)
    decides the fair share."""
    return await conn.fetchval(Q["instance_seen"], owner, now, ttl)


async def instance_gone(conn: asyncpg.Connection, owner: str) -> None:
    """A graceful stop: this instance no longer counts towards the others' fair share."""
    await conn.execute(Q["instance_gone"], owner)


async def renew_shards_if_epoch(conn: asyncpg.Connection, owner: str, shards: Sequence[int],
                                epochs: Sequence[int], now: datetime | None, ttl: timedelta,
                                passed: Sequence[datetime | None] | None = None,
                                ) -> list[ShardEpoch]:
    """Extend the leases `owner` still holds at these epochs, recording per shard the instant
    its last completed pass went through (`passed`, None: none); a lost one is not returned."""
    passed = list(passed) if passed is not None else [None] * len(shards)
    return many(ShardEpoch, await conn.fetch(
        Q["renew_shards_if_epoch"], owner, shards, epochs, now, ttl, passed))


async def acquire_shards(conn: asyncpg.Connection, owner: str, limit: int,
                         now: datetime | None, ttl: timedelta) -> list[ShardEpoch]:
    """Take up to `limit` free or expired shards, each at a new (bumped) epoch."""
    return many(ShardEpoch, await conn.fetch(Q["acquire_shards"], owner, limit, now, ttl))


async def release_shards_if_epoch(conn: asyncpg.Connection, owner: str, shards: Sequence[int],
                                  epochs: Sequence[int]) -> None:
    """Give shards back (rebalancing, graceful stop) so another instance takes them at once;
    only those still held at these epochs."""
    await conn.execute(Q["release_shards_if_epoch"], owner, shards, epochs)


async def hold_shards_if_epoch(conn: asyncpg.Connection, owner: str, shards: Sequence[int],
                               epochs: Sequence[int], now: datetime | None) -> set[int]:
    """In the caller's transaction: the shards still current at these epochs, locked FOR SHARE
    until it ends (a takeover waits, so a write under a lost lease never commits)."""
    return {r["shard"] for r in await conn.fetch(
        Q["hold_shards_if_epoch"], owner, shards, epochs, now)}


async def shard_table(conn: asyncpg.Connection) -> list[ShardLease]:
    """Every shard's lease (owner, epoch, expiry): for metrics and tests."""
    return many(ShardLease, await conn.fetch(Q["shard_table"]))


async def shard_passes(conn: asyncpg.Connection, now: datetime | None) -> dict[int, ShardPass]:
    """Every shard's pass and liveness at `now` (None: the database's now), by shard."""
    return {p.shard: p for p in many(ShardPass, await conn.fetch(Q["shard_passes"], now))}


async def decided_through_of_job(conn: asyncpg.Connection,
                                 job_id: uuid.UUID) -> datetime | None:
    """How far the scheduler has decided the job's shard (None: no pass yet, or no such job)."""
    return await conn.fetchval(Q["decided_through_of_job"], job_id)


async def passed_every_shard(conn: asyncpg.Connection, through: datetime) -> None:
    """A scheduler without leases (one instance, tests) decided every shard through `through`."""
    await conn.execute(Q["passed_every_shard"], through)


@dataclass
class ShardOwnership:
    """This instance's leases: shard -> epoch. Mutated only by `ShardLeases`."""

    owner: str
    epochs: dict[int, int] = field(default_factory=dict)
    # shard -> the instant its last completed pass under the current epoch went through; the
    # next renewal writes it (`decided_through`)
    passed: dict[int, datetime] = field(default_factory=dict)

    def shards(self) -> list[int]:
        return sorted(self.epochs)

    def passed_through(self, instant: datetime, shards: Sequence[int]) -> None:
        """Every job of `shards` (held at their current epochs) due by `instant` is decided."""
        for s in shards:
            if s in self.epochs and (s not in self.passed or self.passed[s] < instant):
                self.passed[s] = instant

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
            live = await instance_seen(conn, own.owner, now, self.ttl)
            shards, epochs = own.pairs()
            renewed = {r.shard: r.epoch for r in await renew_shards_if_epoch(
                conn, own.owner, shards, epochs, now, self.ttl,
                [own.passed.get(s) for s in shards])}
            for lost in set(own.epochs) - set(renewed):
                log.warning("shard lease lost", shard=lost, epoch=own.epochs[lost])
            give = surplus(renewed, live)
            if give:
                await release_shards_if_epoch(conn, own.owner, give, [renewed[s] for s in give])
                for s in give:
                    renewed.pop(s)
            want = fair_share(live) - len(renewed)
            if want > 0:
                for r in await acquire_shards(conn, own.owner, want, now, self.ttl):
                    renewed[r.shard] = r.epoch
                    log.info("shard lease acquired", shard=r.shard, epoch=r.epoch)
        # a pass made under an epoch since lost says nothing of the shard's new one
        own.passed = {s: t for s, t in own.passed.items() if own.epochs.get(s) == renewed.get(s)}
        own.epochs = renewed
        for shard, epoch in renewed.items():
            metrics.SHARD_EPOCH.labels(shard=str(shard)).set(epoch)
        return own

    async def release_all(self) -> None:
        """Graceful stop: hand every shard back so another instance takes over at once."""
        shards, epochs = self.ownership.pairs()
        async with self.pool.acquire() as conn, conn.transaction():
            if shards:
                await release_shards_if_epoch(conn, self.ownership.owner, shards, epochs)
            await instance_gone(conn, self.ownership.owner)
        self.ownership.epochs = {}
        self.ownership.passed = {}


async def hold(conn: asyncpg.Connection, ownership: ShardOwnership,
               clock: Clock) -> ShardOwnership:
    """In the caller's transaction: the leases still current at their epochs, locked FOR SHARE
    until the transaction ends. Lost ones are dropped from `ownership` and counted."""
    shards, epochs = ownership.pairs()
    held = await hold_shards_if_epoch(conn, ownership.owner, shards, epochs, clock.db_now())
    for lost in set(shards) - held:
        metrics.STALE_WRITES_REJECTED.inc()
        log.warning("write refused: shard lease no longer current", shard=lost,
                    epoch=ownership.epochs[lost], owner=ownership.owner)
        ownership.epochs.pop(lost)
        ownership.passed.pop(lost, None)
    return ownership
