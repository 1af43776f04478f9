"""The pure decision core of fair dispatch (docs/FAIRNESS.md): which waiting runs start now.

`decide()` is a deterministic function of a snapshot: no I/O, no clock (`now` is an argument),
no randomness; equal inputs give equal decisions whatever the order of `waiting`.

1. Capacity per pool. Priority classes (first in `classes` = highest) each reserve
   R = `reserved_share` of the pool's slots (largest-remainder rounding); N = R minus the
   lendable part floor(R * `lendable_fraction`) is never used by another class. A run of class c
   may start iff a slot is free and, after it starts, sum over classes of max(busy, N) <= slots
   still holds (so every class can always reach its N). Free slots go first to classes below
   their R in priority order (borrowed slots return to their owner as borrowers finish), then to
   any class in priority order (work-conserving borrowing). No preemption.
2. Within a (pool, class): start-time fair queueing (SFQ, Goyal-Vin-Cheng 1996) across tenants
   with weights w: a tenant's next run gets start tag S = max(V, F) and finish tag
   F = S + cost / w; the run with the smallest S starts (ties: enqueued_at, then run_id) and V
   becomes its S. For two tenants backlogged over any stretch of dispatches,
   |W_i/w_i - W_j/w_j| <= c_max/w_i + c_max/w_j (W = cost admitted). `FairState` keeps F - V
   per (pool, class, tenant) between decisions; only positive lags are kept, bounded by c/w.
3. Limits (`limits.Ledger`): tenant, job type and key concurrency; token buckets per tenant and
   resource. A run a limit refuses is skipped (held with the reason) without blocking its tenant's
   other runs; a tenant-wide refusal holds the tenant's runs in that queue.
4. Pools take turns, one admission each, so limits shared across pools are shared fairly.
"""

from __future__ import annotations

import heapq
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ostinato.policy.limits import Bucket, Buckets, Ledger, Limits, refill, seconds_until, take

__all__ = [
    "DEFAULT_CLASSES", "Bucket", "Buckets", "ClassConfig", "Decision", "FairState", "Limits",
    "PoolState", "Share", "Waiting", "decide", "parse_classes", "refill", "seconds_until",
    "shares", "take",
]

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class ClassConfig:
    """A priority class: `reserved_share` of each pool's slots, of which `lendable_fraction`
    may be used by other classes while this class does not need it."""

    name: str
    reserved_share: float
    lendable_fraction: float = 0.5

    def __post_init__(self) -> None:
        for name in ("reserved_share", "lendable_fraction"):
            value = getattr(self, name)
            if not (0.0 <= value <= 1.0):
                raise ValueError(f"class {self.name}: {name} must be within 0..1, got {value!r}")


# The product default (OSTINATO_PRIORITY_CLASSES): critical keeps half of its 10 % ready at
# once; default and bulk lend all of theirs (they get it back as borrowers finish), so a pool
# running one class uses all but critical's non-lendable slots.
DEFAULT_CLASSES: tuple[ClassConfig, ...] = (
    ClassConfig("critical", 0.1, 0.5), ClassConfig("default", 0.7, 1.0),
    ClassConfig("bulk", 0.2, 1.0),
)


@dataclass(frozen=True, slots=True)
class PoolState:
    """A worker pool: slots declared by its workers and slots in use per class (runs queued
    or running in this pool)."""

    name: str
    total_slots: int
    busy: Mapping[str, int] = field(default_factory=dict)
    paused: bool = False


@dataclass(frozen=True, slots=True)
class Waiting:
    """A run waiting to be dispatched. `cost` weighs it in fair queueing (e.g. expected
    seconds); every run takes one slot whatever its cost."""

    run_id: uuid.UUID
    tenant: str
    klass: str
    pool: str
    job_type: str
    concurrency_key: str | None
    resource: str | None
    enqueued_at: datetime
    cost: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.cost) and self.cost > 0):
            raise ValueError(f"run {self.run_id}: cost must be finite and > 0")


@dataclass(frozen=True, slots=True)
class FairState:
    """Fair-queueing memory carried between decisions: per (pool, class, tenant), how far the
    tenant's finish tag is ahead of its queue's virtual time. Soft state: starting from empty
    (e.g. after a restart) forgets at most one run's worth (cost / weight) per tenant."""

    tags: Mapping[tuple[str, str, str], float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Decision:
    admit: list[uuid.UUID]  # in dispatch order
    held: Mapping[uuid.UUID, str]  # every other waiting run, with why it waits
    state: FairState
    buckets: Buckets  # refilled to `now`, admitted runs' tokens taken


@dataclass(frozen=True, slots=True)
class Share:
    reserved: int  # R: slots the class gets first when it has work
    guaranteed: int  # N: the non-lendable part, never used by another class


def parse_classes(text: str) -> tuple[ClassConfig, ...]:
    """`name:reserved_share[:lendable_fraction],...` in priority order (highest first)."""
    classes = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, *numbers = item.split(":")
        if not name or len(numbers) not in (1, 2):
            raise ValueError(f"expected name:reserved_share[:lendable_fraction], got {item!r}")
        try:
            values = [float(n) for n in numbers]
        except ValueError as exc:
            raise ValueError(f"{item!r}: shares must be numbers") from exc
        classes.append(ClassConfig(name, *values))
    if not classes:
        raise ValueError("no priority class configured")
    _check_classes(classes)
    return tuple(classes)


def shares(total_slots: int, classes: Sequence[ClassConfig]) -> dict[str, Share]:
    """Each class's reserved and non-lendable slots in a pool (largest-remainder rounding; the
    lendable part is rounded down so the owner's guarantee is rounded up)."""
    total = max(0, total_slots)
    quotas = [c.reserved_share * total for c in classes]
    reserved = [math.floor(q + _EPS) for q in quotas]
    extra = min(total, math.floor(sum(quotas) + _EPS)) - sum(reserved)
    by_remainder = sorted(range(len(classes)), key=lambda i: (reserved[i] - quotas[i], i))
    for i in by_remainder[:max(0, extra)]:
        reserved[i] += 1
    return {c.name: Share(r, r - math.floor(r * c.lendable_fraction + _EPS))
            for c, r in zip(classes, reserved, strict=True)}


def _check_classes(classes: Sequence[ClassConfig]) -> None:
    names = [c.name for c in classes]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate priority class names: {names}")
    if sum(c.reserved_share for c in classes) > 1.0 + _EPS:
        raise ValueError("reserved shares of the priority classes add up to more than 1")


class _Capacity:
    """Slots of one pool during a decision."""

    def __init__(self, name: str, pool: PoolState, classes: Sequence[ClassConfig]) -> None:
        self.name = name
        self.total = pool.total_slots
        self.shares = shares(pool.total_slots, classes)
        self.busy = {c: max(0, n) for c, n in pool.busy.items()}
        self.used = sum(self.busy.values())
        # sum over classes of max(busy, N): kept <= total so every class can reach its N
        self.floor = sum(max(self.busy.get(c, 0), s.guaranteed) for c, s in self.shares.items())
        self.floor += sum(n for c, n in self.busy.items() if c not in self.shares)

    def below_reservation(self, klass: str) -> bool:
        return self.busy.get(klass, 0) < self.shares[klass].reserved

    def can_take(self, klass: str) -> bool:
        if self.used >= self.total:
            return False
        return self.busy.get(klass, 0) < self.shares[klass].guaranteed or self.floor < self.total

    def take(self, klass: str) -> None:
        busy = self.busy.get(klass, 0)
        if busy >= self.shares[klass].guaranteed:
            self.floor += 1
        self.busy[klass] = busy + 1
        self.used += 1

    def reason(self, klass: str, order: Sequence[str]) -> str:
        free = self.total - self.used
        if free <= 0:
            return f"pool {self.name} saturated ({self.used}/{self.total} slots busy)"
        owners = [c for c in order
                  if c != klass and self.busy.get(c, 0) < self.shares[c].guaranteed]
        return (f"pool {self.name} saturated for class {klass} ({free} free slots reserved for "
                f"{', '.join(owners)})")


_Entry = tuple[float, datetime, uuid.UUID, str]  # (start tag, head enqueued_at, head id, tenant)


class _Queue:
    """Start-time fair queueing across the tenants of one (pool, class)."""

    def __init__(self, by_tenant: dict[str, list[Waiting]], lags: Mapping[str, float],
                 limits: Limits) -> None:
        self.runs = by_tenant
        self.pos = dict.fromkeys(by_tenant, 0)
        self.finish = dict(lags)  # relative to the virtual time at the start of the decision
        self.vtime = 0.0
        self.limits = limits
        self.heap: list[_Entry] = [(lags.get(t, 0.0), rs[0].enqueued_at, rs[0].run_id, t)
                                   for t, rs in by_tenant.items()]
        heapq.heapify(self.heap)

    def pop_next(self, ledger: Ledger, held: dict[uuid.UUID, str]) -> Waiting | None:
        """The next run in fair order that the limits allow; refused runs go to `held`."""
        heap = self.heap
        while heap:
            tag, _, _, tenant = heap[0]
            runs, i = self.runs[tenant], self.pos[tenant]
            if (reason := ledger.tenant_block(tenant)) is not None:
                heapq.heappop(heap)
                for run in runs[i:]:
                    held[run.run_id] = reason
                self.pos[tenant] = len(runs)
                continue
            j = i
            while j < len(runs) and (reason := ledger.run_block(runs[j])) is not None:
                held[runs[j].run_id] = reason
                j += 1
            self.pos[tenant] = j
            if j == len(runs):
                heapq.heappop(heap)
                continue
            run = runs[j]
            if j != i:  # the tenant's head changed: re-rank it on its new head
                heapq.heapreplace(heap, (tag, run.enqueued_at, run.run_id, tenant))
                continue
            self.vtime = max(self.vtime, tag)
            finish = tag + run.cost / self.limits.weight(tenant)
            self.finish[tenant] = finish
            self.pos[tenant] = j + 1
            if j + 1 < len(runs):
                after = runs[j + 1]
                heapq.heapreplace(heap, (finish, after.enqueued_at, after.run_id, tenant))
            else:
                heapq.heappop(heap)
            return run
        return None

    def hold_rest(self, ledger: Ledger, held: dict[uuid.UUID, str], capacity: str,
                  where: str) -> None:
        """Hold every run left: a limit's reason if one refuses it, else `capacity` and its
        place in the fair order among the runs of its queue that only wait for a slot."""
        ahead: list[tuple[float, datetime, uuid.UUID]] = []
        for tag, _, _, tenant in self.heap:
            blocked = ledger.tenant_block(tenant)
            weight = self.limits.weight(tenant)
            for run in self.runs[tenant][self.pos[tenant]:]:
                reason = blocked or ledger.run_block(run)
                if reason is not None:
                    held[run.run_id] = reason
                    continue
                ahead.append((tag, run.enqueued_at, run.run_id))
                tag += run.cost / weight
        ahead.sort()
        for n, (_, _, run_id) in enumerate(ahead):
            held[run_id] = f"{capacity}; behind {n} runs of {where}"

    def lags(self) -> dict[str, float]:
        return {t: f - self.vtime for t, f in self.finish.items() if f - self.vtime > _EPS}


def decide(waiting: Sequence[Waiting], pools: Mapping[str, PoolState],
           classes: Sequence[ClassConfig], limits: Limits, buckets: Buckets, state: FairState,
           now: datetime, *, explain: bool = True) -> Decision:
    """Which waiting runs to dispatch now, in order, and why every other one waits. With
    `explain` False, `held` names only the runs refused on the way (pool, class, limits met
    while admitting), not every run left waiting: the same admissions, less work."""
    _check_classes(classes)
    order = [c.name for c in classes]
    known = set(order)
    ledger = Ledger(limits, buckets, now)
    held: dict[uuid.UUID, str] = {}
    grouped: dict[tuple[str, str], dict[str, list[Waiting]]] = {}
    seen: set[uuid.UUID] = set()
    for run in sorted(waiting, key=lambda r: (r.enqueued_at, r.run_id)):
        if run.run_id in seen:
            continue
        seen.add(run.run_id)
        pool = pools.get(run.pool)
        if pool is None:
            held[run.run_id] = f"pool {run.pool} has no workers"
        elif pool.paused:
            held[run.run_id] = f"pool {run.pool} paused"
        elif pool.total_slots <= 0:
            held[run.run_id] = f"pool {run.pool} has no worker slots"
        elif run.klass not in known:
            held[run.run_id] = f"unknown priority class {run.klass}"
        else:
            grouped.setdefault((run.pool, run.klass), {}).setdefault(run.tenant, []).append(run)

    stored: dict[tuple[str, str], dict[str, float]] = {}
    for (p, c, tenant), lag in state.tags.items():
        if p in pools and c in known and lag > _EPS:
            stored.setdefault((p, c), {})[tenant] = lag
    queues = {key: _Queue(by_tenant, stored.get(key, {}), limits)
              for key, by_tenant in grouped.items()}
    capacity = {p: _Capacity(p, pools[p], classes) for p in sorted({p for p, _ in grouped})}

    admit: list[uuid.UUID] = []
    active = list(capacity)
    while active:  # pools take turns, one admission each
        still = []
        for p in active:
            run = _admit_one(capacity[p], queues, order, ledger, held)
            if run is not None:
                admit.append(run.run_id)
                still.append(p)
        active = still

    for (p, c), queue in queues.items():
        if explain:
            queue.hold_rest(ledger, held, capacity[p].reason(c, order), f"class {c} in pool {p}")
    tags = {(p, c, t): lag for (p, c), lags in stored.items() if (p, c) not in queues
            for t, lag in lags.items()}
    for (p, c), queue in queues.items():
        tags.update({(p, c, t): lag for t, lag in queue.lags().items()})
    return Decision(admit, held, FairState(dict(sorted(tags.items()))), ledger.buckets())


def _admit_one(cap: _Capacity, queues: Mapping[tuple[str, str], _Queue], order: Sequence[str],
               ledger: Ledger, held: dict[uuid.UUID, str]) -> Waiting | None:
    """Admit one run into the pool, or None when it can take no more. Classes below their
    reservation come first, then borrowing, each in priority order."""
    for own_share_only in (True, False):
        for klass in order:
            queue = queues.get((cap.name, klass))
            if queue is None or not queue.heap:
                continue
            if own_share_only and not cap.below_reservation(klass):
                continue
            if not cap.can_take(klass):
                continue
            run = queue.pop_next(ledger, held)
            if run is not None:
                ledger.charge(run)
                cap.take(klass)
                return run
    return None
