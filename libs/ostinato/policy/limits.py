"""Limits for fair dispatch: concurrency arithmetic and token buckets (see docs/FAIRNESS.md).

Pure values and arithmetic: no I/O, no clock (`now` is an argument), no randomness.

- Concurrency: at most `tenant_concurrency[t]` runs of tenant t, `job_type_concurrency[j]` runs
  of job type j and `key_concurrency` runs per (tenant, concurrency key) in flight at once. A
  name without an entry is unlimited. In-flight counts come from the caller's snapshot (runs
  queued or running, released when a run reaches a final state or its lease expires).
- Rate: a token bucket per tenant and per named resource. Admitting a run takes one token from
  its tenant's bucket and one from its resource's bucket, if those buckets exist (no bucket, no
  rate limit). Tokens refill continuously up to `capacity`; they never go negative.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Bucket:
    """A token bucket as of `updated_at`."""

    tokens: float
    capacity: float
    refill_per_second: float
    updated_at: datetime

    def __post_init__(self) -> None:
        for name in ("tokens", "capacity", "refill_per_second"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"bucket {name} must be a finite number >= 0, got {value!r}")


def refill(bucket: Bucket, now: datetime) -> Bucket:
    """The bucket as of `now`. A clock that steps back refills nothing and keeps `updated_at`,
    so refilling twice never counts the same interval twice."""
    elapsed = (now - bucket.updated_at).total_seconds()
    if elapsed <= 0:
        return bucket
    grown = min(bucket.capacity, bucket.tokens + elapsed * bucket.refill_per_second)
    return replace(bucket, tokens=max(bucket.tokens, grown), updated_at=now)


def take(bucket: Bucket, n: float = 1.0) -> Bucket | None:
    """The bucket with `n` tokens taken, or None when fewer than `n` are left."""
    if bucket.tokens < n:
        return None
    return replace(bucket, tokens=bucket.tokens - n)


def seconds_until(bucket: Bucket, n: float = 1.0) -> float | None:
    """Seconds until `n` tokens are available (0 if they are); None if that never happens."""
    missing = n - bucket.tokens
    if missing <= 0:
        return 0.0
    if bucket.refill_per_second <= 0 or n > bucket.capacity:
        return None
    return missing / bucket.refill_per_second


@dataclass(frozen=True, slots=True)
class Buckets:
    """Token buckets per tenant and per named external resource."""

    tenants: Mapping[str, Bucket] = field(default_factory=dict)
    resources: Mapping[str, Bucket] = field(default_factory=dict)

    def refilled(self, now: datetime) -> Buckets:
        return Buckets({k: refill(b, now) for k, b in self.tenants.items()},
                       {k: refill(b, now) for k, b in self.resources.items()})


@dataclass(frozen=True, slots=True)
class Limits:
    """Concurrency limits, tenant weights and the in-flight counts they are checked against.

    Concurrency keys are scoped to their tenant: `in_flight_by_key` is keyed by
    (tenant, concurrency key), so two tenants using the same customer id never block each other.
    A tenant missing from `tenant_weights` has weight 1.0; weight 0 holds all its runs.
    """

    tenant_concurrency: Mapping[str, int] = field(default_factory=dict)
    job_type_concurrency: Mapping[str, int] = field(default_factory=dict)
    key_concurrency: int = 1
    tenant_weights: Mapping[str, float] = field(default_factory=dict)
    in_flight_by_tenant: Mapping[str, int] = field(default_factory=dict)
    in_flight_by_job_type: Mapping[str, int] = field(default_factory=dict)
    in_flight_by_key: Mapping[tuple[str, str], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.key_concurrency < 0:
            raise ValueError("key_concurrency must be >= 0")
        for tenant, weight in self.tenant_weights.items():
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"weight of tenant {tenant} must be finite and >= 0")

    def weight(self, tenant: str) -> float:
        return self.tenant_weights.get(tenant, 1.0)


class RunLike(Protocol):
    @property
    def tenant(self) -> str: ...
    @property
    def job_type(self) -> str: ...
    @property
    def concurrency_key(self) -> str | None: ...
    @property
    def resource(self) -> str | None: ...


def _rate_reason(kind: str, name: str, bucket: Bucket) -> str:
    wait = seconds_until(bucket)
    when = "never refills" if wait is None else f"next token in {wait:.2f}s"
    return f"rate limit {kind} {name} ({when})"


class Ledger:
    """The working copy of limits inside one decision: counts only grow and tokens only shrink,
    so a run refused once stays refused for the rest of the decision."""

    def __init__(self, limits: Limits, buckets: Buckets, now: datetime) -> None:
        self.limits = limits
        self.by_tenant = dict(limits.in_flight_by_tenant)
        self.by_job_type = dict(limits.in_flight_by_job_type)
        self.by_key = dict(limits.in_flight_by_key)
        refilled = buckets.refilled(now)
        self.tenant_buckets = dict(refilled.tenants)
        self.resource_buckets = dict(refilled.resources)

    def tenant_block(self, tenant: str) -> str | None:
        """Why no run of `tenant` can be admitted now, or None."""
        if self.limits.weight(tenant) <= 0:
            return f"tenant {tenant} has weight 0"
        limit = self.limits.tenant_concurrency.get(tenant)
        used = self.by_tenant.get(tenant, 0)
        if limit is not None and used >= limit:
            return f"concurrency limit tenant {tenant} reached ({used}/{limit})"
        bucket = self.tenant_buckets.get(tenant)
        if bucket is not None and bucket.tokens < 1:
            return _rate_reason("tenant", tenant, bucket)
        return None

    def run_block(self, run: RunLike) -> str | None:
        """Why this run cannot be admitted now (job type, key, resource), or None."""
        limit = self.limits.job_type_concurrency.get(run.job_type)
        used = self.by_job_type.get(run.job_type, 0)
        if limit is not None and used >= limit:
            return f"concurrency limit job type {run.job_type} reached ({used}/{limit})"
        if run.concurrency_key is not None:
            used = self.by_key.get((run.tenant, run.concurrency_key), 0)
            if used >= self.limits.key_concurrency:
                return (f"concurrency limit key {run.concurrency_key} of tenant {run.tenant} "
                        f"reached ({used}/{self.limits.key_concurrency})")
        if run.resource is not None:
            bucket = self.resource_buckets.get(run.resource)
            if bucket is not None and bucket.tokens < 1:
                return _rate_reason("resource", run.resource, bucket)
        return None

    def block(self, run: RunLike) -> str | None:
        return self.tenant_block(run.tenant) or self.run_block(run)

    def charge(self, run: RunLike) -> None:
        """Count an admitted run against every limit it is subject to."""
        self.by_tenant[run.tenant] = self.by_tenant.get(run.tenant, 0) + 1
        self.by_job_type[run.job_type] = self.by_job_type.get(run.job_type, 0) + 1
        if run.concurrency_key is not None:
            key = (run.tenant, run.concurrency_key)
            self.by_key[key] = self.by_key.get(key, 0) + 1
        bucket = self.tenant_buckets.get(run.tenant)
        if bucket is not None:
            self.tenant_buckets[run.tenant] = _take_checked(bucket)
        if run.resource is not None:
            bucket = self.resource_buckets.get(run.resource)
            if bucket is not None:
                self.resource_buckets[run.resource] = _take_checked(bucket)

    def buckets(self) -> Buckets:
        return Buckets(dict(self.tenant_buckets), dict(self.resource_buckets))


def _take_checked(bucket: Bucket) -> Bucket:
    taken = take(bucket)
    if taken is None:  # charge() follows block() returning None: a token is there
        raise AssertionError("token bucket would go negative")
    return taken
