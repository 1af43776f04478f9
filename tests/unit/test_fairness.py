"""Fair dispatch as a pure function (docs/FAIRNESS.md): reserved capacity and borrowing, start-time
fair queueing across tenants, concurrency and rate limits, explanations. No servers."""

from __future__ import annotations

import itertools
import math
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ostinato.policy import fairness
from ostinato.policy.fairness import ClassConfig, Decision, FairState, PoolState, Waiting, decide
from ostinato.policy.limits import Bucket, Buckets, Limits, refill, seconds_until, take

T0 = datetime(2026, 1, 1, tzinfo=UTC)
shares = fairness.shares
# The worked example of docs/FAIRNESS.md: every class lends half of its reservation.
DEFAULT_CLASSES = (ClassConfig("critical", 0.2), ClassConfig("default", 0.6),
                   ClassConfig("bulk", 0.2))
ONE = (ClassConfig("default", 1.0, 0.0),)
_ids = itertools.count(1)


def mk(tenant: str, *, klass: str = "default", pool: str = "p", job_type: str = "jt",
       key: str | None = None, resource: str | None = None, at: float = 0.0,
       cost: float = 1.0) -> Waiting:
    return Waiting(uuid.UUID(int=next(_ids)), tenant, klass, pool, job_type, key, resource,
                   T0 + timedelta(seconds=at), cost)


def once(runs: Sequence[Waiting], pools: Mapping[str, PoolState],
         classes: Sequence[ClassConfig] = ONE, limits: Limits | None = None,
         buckets: Buckets | None = None) -> Decision:
    return decide(runs, pools, classes, limits or Limits(), buckets or Buckets(), FairState(), T0)


def check(waiting: Sequence[Waiting], pools: Mapping[str, PoolState],
          classes: Sequence[ClassConfig], limits: Limits, buckets: Buckets, now: datetime,
          d: Decision) -> None:
    """Every invariant one decision must keep, whatever the snapshot."""
    by_id = {w.run_id: w for w in waiting}
    assert len(d.admit) == len(set(d.admit)) and set(d.admit).isdisjoint(d.held)
    assert set(d.admit) | set(d.held) == set(by_id)
    admitted = [by_id[i] for i in d.admit]
    # concurrency limits: never more in flight than allowed
    for counts, limit_of, in_flight in (
            (Counter(r.tenant for r in admitted), limits.tenant_concurrency.get,
             limits.in_flight_by_tenant),
            (Counter(r.job_type for r in admitted), limits.job_type_concurrency.get,
             limits.in_flight_by_job_type),
            (Counter((r.tenant, r.concurrency_key) for r in admitted if r.concurrency_key),
             lambda _k: limits.key_concurrency, limits.in_flight_by_key)):
        for name, n in counts.items():
            limit = limit_of(name)
            assert limit is None or n <= max(0, limit - in_flight.get(name, 0)), name
    # rate limits: one token per admitted run, never negative
    refilled = buckets.refilled(now)
    for before, after, used in (
            (refilled.tenants, d.buckets.tenants, Counter(r.tenant for r in admitted)),
            (refilled.resources, d.buckets.resources, Counter(r.resource for r in admitted))):
        for name, bucket in before.items():
            assert after[name].tokens >= 0
            assert after[name].tokens == pytest.approx(bucket.tokens - used[name])
    # capacity: free slots only; every class can always reach its non-lendable share
    for name, pool in pools.items():
        got = Counter(r.klass for r in admitted if r.pool == name)
        assert not (pool.paused and got)
        assert sum(got.values()) <= max(0, pool.total_slots - sum(pool.busy.values()))
        share = shares(pool.total_slots, classes)
        after = Counter(pool.busy) + got

        def floor(busy: Mapping[str, int], share: Mapping = share) -> int:
            return sum(max(busy.get(c, 0), s.guaranteed) for c, s in share.items()) + sum(
                n for c, n in busy.items() if c not in share)

        valid = floor(pool.busy) <= pool.total_slots
        if valid:
            assert floor(after) <= pool.total_slots
        for run_id, reason in d.held.items():
            run = by_id[run_id]
            if run.pool == name and "behind" in reason:  # held for want of a slot
                c = run.klass
                assert not valid or after[c] >= share[c].guaranteed
                assert sum(after.values()) >= pool.total_slots or (
                    after[c] >= share[c].guaranteed and floor(after) >= pool.total_slots)
    for run_id, reason in d.held.items():
        assert explains(by_id[run_id], reason), reason
    assert all(0 < lag < math.inf for lag in d.state.tags.values())


def explains(run: Waiting, reason: str) -> bool:
    exact = {f"pool {run.pool} paused", f"pool {run.pool} has no workers",
             f"pool {run.pool} has no worker slots", f"unknown priority class {run.klass}",
             f"tenant {run.tenant} has weight 0"}
    prefixes = [f"concurrency limit tenant {run.tenant} reached (",
                f"concurrency limit job type {run.job_type} reached (",
                f"rate limit tenant {run.tenant} ("]
    if run.concurrency_key:
        prefixes.append(f"concurrency limit key {run.concurrency_key} of tenant {run.tenant} ")
    if run.resource:
        prefixes.append(f"rate limit resource {run.resource} (")
    capacity = (reason.startswith(f"pool {run.pool} saturated") and
                reason.endswith(f" runs of class {run.klass} in pool {run.pool}"))
    return reason in exact or capacity or any(reason.startswith(p) for p in prefixes)


@dataclass
class Sim:
    """Rounds of decisions over a changing snapshot: admitted runs hold their slot (and count
    against the limits) for `duration` rounds; one round is one second."""

    slots: dict[str, int]
    classes: tuple[ClassConfig, ...] = ONE
    limits: Limits = field(default_factory=Limits)
    buckets: Buckets = field(default_factory=Buckets)
    duration: int = 1
    waiting: dict[uuid.UUID, Waiting] = field(default_factory=dict)
    running: list[tuple[int, Waiting]] = field(default_factory=list)
    admitted: list[tuple[int, Waiting]] = field(default_factory=list)
    state: FairState = field(default_factory=FairState)
    round: int = 0

    def add(self, runs: Sequence[Waiting]) -> None:
        self.waiting.update((r.run_id, r) for r in runs)

    def step(self) -> Decision:
        self.running = [(end, r) for end, r in self.running if end > self.round]
        flying = [r for _, r in self.running]
        pools = {p: PoolState(p, n, Counter(r.klass for r in flying if r.pool == p))
                 for p, n in self.slots.items()}
        limits = replace(self.limits, in_flight_by_tenant=Counter(r.tenant for r in flying),
                         in_flight_by_job_type=Counter(r.job_type for r in flying),
                         in_flight_by_key=Counter((r.tenant, r.concurrency_key)
                                                  for r in flying if r.concurrency_key))
        now, waiting = T0 + timedelta(seconds=self.round), list(self.waiting.values())
        d = decide(waiting, pools, self.classes, limits, self.buckets, self.state, now)
        check(waiting, pools, self.classes, limits, self.buckets, now, d)
        for run_id in d.admit:
            run = self.waiting.pop(run_id)
            self.running.append((self.round + self.duration, run))
            self.admitted.append((self.round, run))
        self.state, self.buckets, self.round = d.state, d.buckets, self.round + 1
        return d


# --- any snapshot: capacity, reservations, limits, explanations, determinism -----------------

@st.composite
def snapshots(draw: st.DrawFn) -> dict:
    rng = draw(st.randoms(use_true_random=True))  # usual distributions
    pick, chance = rng.choice, lambda p: rng.random() < p
    names = ["critical", "default", "bulk"][:rng.randint(1, 3)]
    raw = [rng.randint(0, 10) for _ in names]
    classes = tuple(ClassConfig(n, r / max(10, sum(raw)), pick([0.0, 0.25, 0.5, 1.0]))
                    for n, r in zip(names, raw, strict=True))
    pools = {p: PoolState(p, pick([0, 1, 2, 3, 5, 8, 12, 16]),
                          {c: rng.randint(0, 3) for c in names}, chance(0.15))
             for p in ("p", "q")}
    tenants, keys, types = ["a", "b", "c"], ["k1", "k2"], ["x", "y"]
    waiting = [Waiting(uuid.UUID(int=i + 1), pick(tenants),
                       "unknown" if chance(0.05) else pick(names),
                       "z" if chance(0.05) else pick(["p", "p", "q"]), pick(types),
                       pick(keys) if chance(0.4) else None, "r" if chance(0.3) else None,
                       T0 + timedelta(seconds=rng.randint(0, 5)), pick([0.5, 1.0, 2.0]))
               for i in range(rng.randint(0, 40))]

    def some(names: Sequence, value: Callable[[], object], p: float = 0.5) -> dict:
        return {n: value() for n in names if chance(p)}

    limits = Limits(
        tenant_concurrency=some(tenants, lambda: rng.randint(0, 6)),
        job_type_concurrency=some(types, lambda: rng.randint(0, 8)),
        key_concurrency=pick([0, 1, 1, 2]),
        tenant_weights=some(tenants, lambda: pick([0.0, 0.5, 1.0, 2.0, 3.0])),
        in_flight_by_tenant=some(tenants, lambda: rng.randint(0, 3)),
        in_flight_by_job_type=some(types, lambda: rng.randint(0, 3)),
        in_flight_by_key=some(list(itertools.product(tenants, keys)), lambda: rng.randint(0, 2)))

    def bucket() -> Bucket:
        return Bucket(rng.uniform(0, 3), 3.0, pick([0.0, 0.5, 2.0]),
                      T0 - timedelta(seconds=rng.randint(0, 3)))

    buckets = Buckets(some(tenants, bucket, 0.3), some(["r"], bucket))
    state = FairState(some(list(itertools.product(["p", "q"], names, tenants)),
                           lambda: rng.uniform(0.01, 2.0), 0.2))
    return {"waiting": waiting, "pools": pools, "classes": classes, "limits": limits,
            "buckets": buckets, "state": state, "now": T0}


@settings(max_examples=250, deadline=None)
@given(snap=snapshots(), data=st.data())
def test_any_decision_keeps_capacity_reservations_limits_and_explains_every_hold(
        snap: dict, data: st.DataObject) -> None:
    d = decide(**snap)
    check(snap["waiting"], snap["pools"], snap["classes"], snap["limits"], snap["buckets"],
          snap["now"], d)
    assert all(lag <= 2.0 / 0.5 + 1e-9 for lag in d.state.tags.values())  # <= c_max / w_min
    shuffled = data.draw(st.permutations(snap["waiting"]))
    assert decide(**{**snap, "waiting": shuffled}) == d  # deterministic, order-independent
    quick = decide(**snap, explain=False)  # what the dispatcher runs between explanations
    assert (quick.admit, quick.state, quick.buckets) == (d.admit, d.state, d.buckets)
    assert all(d.held[run_id] == reason for run_id, reason in quick.held.items())


# --- weighted fair queueing -----------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(weights=st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0, 5.0]), min_size=2, max_size=4),
       slots=st.integers(1, 8), duration=st.integers(1, 4), late=st.integers(0, 10),
       costs=st.sampled_from([(1.0,), (0.5, 1.0, 2.0)]), seed=st.integers(0, 2**32))
def test_service_tracks_weights_within_the_sfq_bound(
        weights: list[float], slots: int, duration: int, late: int, costs: tuple[float, ...],
        seed: int) -> None:
    """SFQ (Goyal-Vin-Cheng, Theorem 1): over any stretch where tenants i and j both wait,
    |W_i/w_i - W_j/w_j| <= c_max/w_i + c_max/w_j, W = cost admitted. The last tenant joins late;
    service is measured from then on."""
    rng = random.Random(seed)
    tenants = {f"t{i}": w for i, w in enumerate(weights)}
    sim = Sim({"p": slots}, limits=Limits(tenant_weights=tenants), duration=duration)
    backlog, rounds, last = slots * 40 + 1, 40, f"t{len(weights) - 1}"

    def runs_of(tenant: str, at: float) -> list[Waiting]:
        return [mk(tenant, at=at + k / 1000, cost=rng.choice(costs)) for k in range(backlog)]

    for tenant in tenants:
        if tenant != last:
            sim.add(runs_of(tenant, 0))
    served = dict.fromkeys(tenants, 0.0)
    for rnd in range(rounds):
        if rnd == late:
            sim.add(runs_of(last, rnd))
            served = dict.fromkeys(tenants, 0.0)
        before = len(sim.admitted)
        sim.step()
        for _, run in sim.admitted[before:]:
            served[run.tenant] += run.cost
        present = [t for t in tenants if t != last or rnd >= late]
        for i, j in itertools.combinations(present, 2):
            gap = abs(served[i] / tenants[i] - served[j] / tenants[j])
            assert gap <= max(costs) / tenants[i] + max(costs) / tenants[j] + 1e-6


def test_long_window_shares_are_within_ten_percent_of_weights() -> None:
    weights = {"a": 1.0, "b": 2.0, "c": 5.0}
    sim = Sim({"p": 8}, limits=Limits(tenant_weights=weights), duration=3)
    for tenant in weights:
        sim.add([mk(tenant, at=k) for k in range(400)])
    for _ in range(200):
        sim.step()
    counts = Counter(r.tenant for _, r in sim.admitted)
    total = sum(counts.values())
    print(f"\nshares over {total} dispatches:",
          {t: f"{counts[t] / total:.3f} (weight share {w / 8:.3f})" for t, w in weights.items()})
    for tenant, w in weights.items():
        assert abs(counts[tenant] / total - w / 8) <= 0.1 * w / 8


@settings(max_examples=60, deadline=None)
@given(tenants=st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.0, 4.0]), st.integers(1, 25)),
                        min_size=1, max_size=5),
       slots=st.integers(1, 5), duration=st.integers(1, 3))
def test_no_tenant_starves(tenants: list[tuple[float, int]], slots: int, duration: int) -> None:
    """Run m (0-based, FIFO) of tenant i is among the first m + 1 + sum_j min(n_j,
    floor(m w_j / w_i) + 1) dispatches, so it starts by round duration * (ceil(that / slots) - 1),
    whatever the other tenants' backlogs beyond that."""
    weights = {f"t{i}": w for i, (w, _) in enumerate(tenants)}
    counts = {f"t{i}": n for i, (_, n) in enumerate(tenants)}
    sim = Sim({"p": slots}, limits=Limits(tenant_weights=weights), duration=duration)
    mine = {t: [mk(t, at=k) for k in range(n)] for t, n in counts.items()}
    for runs in mine.values():
        sim.add(runs)
    while sim.waiting:
        sim.step()
        assert sim.round <= duration * math.ceil(sum(counts.values()) / slots)
    position = {r.run_id: k + 1 for k, (_, r) in enumerate(sim.admitted)}
    started = {r.run_id: rnd for rnd, r in sim.admitted}
    for t, runs in mine.items():
        for m, run in enumerate(runs):
            bound = m + 1 + sum(min(counts[j], math.floor(m * weights[j] / weights[t]) + 1)
                                for j in counts if j != t)
            assert position[run.run_id] <= bound
            assert started[run.run_id] <= duration * (math.ceil(bound / slots) - 1)


@pytest.mark.parametrize(("noisy_w", "quiet_w"), [(1.0, 1.0), (1.0, 2.0), (3.0, 1.0)])
def test_quiet_tenant_is_served_within_k_dispatches_whatever_the_noisy_backlog(
        noisy_w: float, quiet_w: float) -> None:
    """K <= 20 + floor(19 * w_noisy / w_quiet) + 1 (~ 20 * (sum of weights) / w_quiet), and the
    same K for a noisy backlog of 200, 2,000 or 20,000 runs."""
    bound = 20 + math.floor(19 * noisy_w / quiet_w) + 1
    k_by_backlog = {}
    for backlog in (200, 2_000, 20_000):
        sim = Sim({"p": 10}, limits=Limits(tenant_weights={"noisy": noisy_w, "quiet": quiet_w}),
                  duration=2)
        sim.add([mk("noisy", at=k / 1000) for k in range(backlog)])
        for _ in range(5):
            sim.step()
        start = len(sim.admitted)
        sim.add([mk("quiet", at=100 + k) for k in range(20)])
        while any(r.tenant == "quiet" for r in sim.waiting.values()):
            sim.step()
        after = [r.tenant for _, r in sim.admitted[start:]]
        k_by_backlog[backlog] = max(i for i, t in enumerate(after) if t == "quiet") + 1
    print(f"\nweights noisy {noisy_w} quiet {quiet_w}: K by backlog {k_by_backlog}, bound {bound}")
    assert len(set(k_by_backlog.values())) == 1
    assert all(k <= bound for k in k_by_backlog.values())


# --- reserved capacity and borrowing --------------------------------------------------------

def test_reservations_round_by_largest_remainder_and_keep_the_guarantee_rounded_up() -> None:
    got = {c: (s.reserved, s.guaranteed) for c, s in shares(10, DEFAULT_CLASSES).items()}
    assert got == {"critical": (2, 1), "default": (6, 3), "bulk": (2, 1)}
    assert {c: s.reserved for c, s in shares(4, DEFAULT_CLASSES).items()} == {
        "critical": 1, "default": 2, "bulk": 1}
    assert sum(s.reserved for s in shares(7, DEFAULT_CLASSES).values()) == 7


def test_bulk_flood_leaves_guarantees_free_and_borrowed_slots_return_to_their_owner() -> None:
    pool = lambda **busy: {"p": PoolState("p", 10, busy)}  # noqa: E731
    bulk = [mk("a", klass="bulk", at=k) for k in range(100)]
    d = once(bulk, pool(), DEFAULT_CLASSES)
    assert len(d.admit) == 6  # 10 - critical's 1 - default's 3 non-lendable slots
    assert d.held[bulk[6].run_id] == ("pool p saturated for class bulk (4 free slots reserved for "
                                      "critical, default); behind 0 runs of class bulk in pool p")
    crit = [mk("b", klass="critical", at=200 + k) for k in range(5)]
    d = once(bulk[6:] + crit, pool(bulk=6), DEFAULT_CLASSES)
    assert d.admit == [crit[0].run_id]  # its non-lendable slot, at once
    # a bulk run ends: the freed slot goes to critical (below its reservation), not to bulk
    d = once(bulk[6:] + crit[1:], pool(bulk=5, critical=1), DEFAULT_CLASSES)
    assert d.admit == [crit[1].run_id]
    # another ends: critical, now at its reservation, borrows before bulk does
    d = once(bulk[6:] + crit[2:], pool(bulk=4, critical=2), DEFAULT_CLASSES)
    assert d.admit == [crit[2].run_id]


def test_every_class_keeps_its_reservation_when_all_are_flooded() -> None:
    sim = Sim({"p": 10}, classes=DEFAULT_CLASSES, duration=2)
    for klass in ("critical", "default", "bulk"):
        sim.add([mk("a", klass=klass, at=k) for k in range(200)])
    for _ in range(20):
        sim.step()
        flying = Counter(r.klass for _, r in sim.running)
        assert flying == {"critical": 2, "default": 6, "bulk": 2}


def test_non_lendable_capacity_is_never_lent() -> None:
    classes = (ClassConfig("critical", 0.5, 0.0), ClassConfig("bulk", 0.5, 1.0))
    pools = {"p": PoolState("p", 10, {})}
    bulk = [mk("a", klass="bulk", at=k) for k in range(20)]
    crit = [mk("a", klass="critical", at=k) for k in range(20)]
    assert (len(once(bulk, pools, classes).admit), len(once(crit, pools, classes).admit)) == (5, 10)


def test_a_saturated_long_jobs_pool_does_not_hold_back_the_short_pool() -> None:
    pools = {"long": PoolState("long", 2, {"default": 2}), "short": PoolState("short", 4, {})}
    runs = [mk("a", pool="long", at=0)] + [mk("a", pool="short", at=k + 1) for k in range(5)]
    d = once(runs, pools)
    assert d.admit == [r.run_id for r in runs[1:5]]
    assert d.held[runs[0].run_id] == ("pool long saturated (2/2 slots busy); "
                                      "behind 0 runs of class default in pool long")
    assert d.held[runs[5].run_id].startswith("pool short saturated (4/4 slots busy)")


# --- limits and explanations ----------------------------------------------------------------

def test_concurrency_limits_per_tenant_job_type_and_key_with_reasons() -> None:
    limits = Limits(tenant_concurrency={"a": 2}, job_type_concurrency={"export": 1},
                    in_flight_by_tenant={"a": 1}, in_flight_by_key={("b", "cust-1"): 1})
    a = [mk("a", at=k) for k in range(3)]
    b = [mk("b", key="cust-1", at=0), mk("b", key="cust-2", at=1), mk("b", key="cust-2", at=2),
         mk("b", job_type="export", at=3), mk("b", job_type="export", at=4)]
    c = [mk("c", key="cust-1", at=0)]  # keys belong to their tenant
    d = once(a + b + c, {"p": PoolState("p", 100)}, limits=limits)
    assert set(d.admit) == {a[0].run_id, b[1].run_id, b[3].run_id, c[0].run_id}
    assert d.held == {
        a[1].run_id: "concurrency limit tenant a reached (2/2)",
        a[2].run_id: "concurrency limit tenant a reached (2/2)",
        b[0].run_id: "concurrency limit key cust-1 of tenant b reached (1/1)",
        b[2].run_id: "concurrency limit key cust-2 of tenant b reached (1/1)",
        b[4].run_id: "concurrency limit job type export reached (1/1)"}


def test_token_buckets_limit_tenants_and_resources_without_blocking_other_runs() -> None:
    buckets = Buckets({"a": Bucket(10, 10, 1, T0), "z": Bucket(0.5, 1, 0, T0)},
                      {"stripe": Bucket(2, 5, 0.5, T0)})
    runs = [mk("a", resource="stripe", at=k) for k in range(5)] + [mk("a", at=9), mk("z", at=0)]
    pools = {"p": PoolState("p", 100)}
    d = once(runs, pools, buckets=buckets)
    assert d.admit == [runs[0].run_id, runs[1].run_id, runs[5].run_id]
    assert d.held[runs[2].run_id] == "rate limit resource stripe (next token in 2.00s)"
    assert d.held[runs[6].run_id] == "rate limit tenant z (never refills)"
    assert (d.buckets.resources["stripe"].tokens, d.buckets.tenants["a"].tokens) == (0, 7)
    later = decide(runs[2:5], pools, ONE, Limits(), d.buckets, d.state, T0 + timedelta(seconds=2))
    assert later.admit == [runs[2].run_id]


def test_pool_class_and_weight_reasons() -> None:
    runs = [mk("a", pool="paused"), mk("a", pool="nowhere"), mk("a", pool="empty"),
            mk("a", klass="vip"), mk("zero")]
    pools = {"paused": PoolState("paused", 5, {}, paused=True), "empty": PoolState("empty", 0),
             "p": PoolState("p", 5)}
    d = once(runs, pools, limits=Limits(tenant_weights={"zero": 0.0}))
    assert d.admit == []
    assert list(d.held.values()) == [
        "pool paused paused", "pool nowhere has no workers", "pool empty has no worker slots",
        "unknown priority class vip", "tenant zero has weight 0"]


def test_behind_n_counts_the_runs_ahead_in_fair_order() -> None:
    a = [mk("a", at=k) for k in range(4)]
    b = [mk("b", at=10 + k) for k in range(2)]
    d = once(a + b, {"p": PoolState("p", 3, {"default": 3})})
    fair = [a[0], b[0], a[1], b[1], a[2], a[3]]
    for n, run in enumerate(fair):
        assert d.held[run.run_id] == (f"pool p saturated (3/3 slots busy); behind {n} runs of "
                                      "class default in pool p")


# --- token bucket arithmetic ----------------------------------------------------------------

def test_refill_and_take() -> None:
    b = Bucket(1.0, 5.0, 2.0, T0)
    assert refill(b, T0 + timedelta(seconds=1)).tokens == 3.0
    assert refill(b, T0 + timedelta(seconds=10)) == Bucket(5.0, 5.0, 2.0,
                                                           T0 + timedelta(seconds=10))
    assert refill(b, T0 - timedelta(seconds=5)) == b  # a clock stepping back refills nothing
    assert take(Bucket(0.5, 5, 1, T0)) is None and take(b) == Bucket(0.0, 5.0, 2.0, T0)
    assert seconds_until(Bucket(0.5, 5, 0.25, T0)) == 2.0
    assert seconds_until(Bucket(0.5, 5, 0, T0)) is None


@given(steps=st.lists(st.tuples(st.floats(-2, 5), st.integers(0, 4)), max_size=30),
       rate=st.floats(0, 3), capacity=st.floats(1, 10))
def test_buckets_never_go_negative_nor_over_capacity(steps: list[tuple[float, int]], rate: float,
                                                     capacity: float) -> None:
    b, now = Bucket(capacity, capacity, rate, T0), T0
    for dt, takes in steps:
        now += timedelta(seconds=dt)
        b = refill(b, now)
        for _ in range(takes):
            b = take(b) or b
        assert 0 <= b.tokens <= capacity


# --- speed ----------------------------------------------------------------------------------

def test_decide_on_ten_thousand_waiting_runs() -> None:
    rng = random.Random(7)
    tenants = [f"t{i}" for i in range(50)]
    runs = [mk(rng.choice(tenants), klass=rng.choice(["critical", "default", "bulk"]),
               pool=rng.choice(["short", "long"]), job_type=rng.choice(["x", "y", "z"]),
               key=rng.choice([None, None, f"c{rng.randrange(500)}"]),
               resource=rng.choice([None, None, None, "api"]), at=rng.uniform(0, 60))
            for _ in range(10_000)]
    pools = {"short": PoolState("short", 200, {"default": 50}), "long": PoolState("long", 40)}
    limits = Limits(tenant_concurrency=dict.fromkeys(tenants[:10], 5),
                    job_type_concurrency={"z": 30},
                    tenant_weights={t: 1.0 + i % 4 for i, t in enumerate(tenants)})
    buckets = Buckets(resources={"api": Bucket(20, 20, 5, T0)})
    start = time.perf_counter()
    d = once(runs, pools, DEFAULT_CLASSES, limits, buckets)
    elapsed = time.perf_counter() - start
    print(f"\ndecide() on {len(runs)} waiting runs: {elapsed * 1000:.1f} ms, "
          f"{len(d.admit)} admitted, {len(d.held)} held")
    check(runs, pools, DEFAULT_CLASSES, limits, buckets, T0, d)
