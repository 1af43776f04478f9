"""Requests per API key: a token bucket per key in this api process (`policy.limits.Bucket`,
the arithmetic fair dispatch uses), with the tenant's own rate (`LimitSet` scope `api`) or the
default from the settings. A request over the rate is a 429 problem with `Retry-After`; it is
refused before its route runs, so it changes nothing.

Per process, not per cluster: N api replicas admit up to N times the rate. That is what a rate
limit in front of a database needs (the point is that no one key floods it), and it costs no
shared state per request. The admin key is not limited."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass

import asyncpg
from litestar import Request

from ostinato.clock import Clock
from ostinato.domain.errors import Forbidden, RateLimited
from ostinato.domain.roles import Principal
from ostinato.policy.limits import Bucket, refill, seconds_until, take
from ostinato.runtime.auth import action_of, authenticated, authorize
from ostinato.runtime.instants import raise_pending
from ostinato.stores import limits
from services.api import auditing

RATE_CACHE_SECONDS = 10.0  # how soon a changed tenant rate reaches a running api
MAX_KEYS = 100_000  # buckets kept; the least recently used go first


@dataclass(frozen=True, slots=True)
class Rate:
    per_second: float  # 0: not limited
    burst: float


class KeyRateLimits:
    def __init__(self, clock: Clock, default: Rate) -> None:
        self._clock = clock
        self._default = default
        self._buckets: OrderedDict[uuid.UUID, Bucket] = OrderedDict()
        self._rates: dict[uuid.UUID, tuple[float, Rate]] = {}

    def cached_rate(self, tenant_id: uuid.UUID) -> Rate | None:
        cached = self._rates.get(tenant_id)
        if cached is not None and self._clock.monotonic() < cached[0]:
            return cached[1]
        return None

    async def rate_of(self, conn: asyncpg.Connection, tenant_id: uuid.UUID) -> Rate:
        rate = self._default
        for row in await limits.of_tenant(conn, tenant_id):
            if row.scope == "api" and row.rate_per_second is not None:
                rate = Rate(row.rate_per_second, row.burst or max(1.0, row.rate_per_second))
        self._rates[tenant_id] = (self._clock.monotonic() + RATE_CACHE_SECONDS, rate)
        return rate

    def admit(self, key_id: uuid.UUID, rate: Rate) -> None:
        """Take a token of the key's bucket, or raise RateLimited saying when to retry."""
        if rate.per_second <= 0:
            return
        now = self._clock.now()
        bucket = self._buckets.pop(key_id, None)
        if bucket is None or (bucket.capacity, bucket.refill_per_second) != \
                (rate.burst, rate.per_second):
            bucket = Bucket(rate.burst, rate.burst, rate.per_second, now)
        bucket = refill(bucket, now)
        taken = take(bucket)
        self._buckets[key_id] = taken or bucket
        while len(self._buckets) > MAX_KEYS:
            self._buckets.popitem(last=False)
        if taken is None:
            wait = seconds_until(bucket) or 1.0
            raise RateLimited(f"this key may send {rate.per_second:g} requests a second "
                              f"(bursts of {rate.burst:g}); retry in {wait:.2f} s", wait)


async def limited_principal(request: Request) -> Principal:
    """`runtime.auth.principal` (a refusal of a control action is audited), then one token of
    the key's bucket; then a date-time error the body held (`instants.raise_pending`)."""
    found = await authenticated(request)
    try:
        authorize(found, action_of(request))
    except Forbidden as exc:
        await auditing.refused(request, found, exc)
        raise
    if found.key_id is None or found.tenant_id is None:
        raise_pending(request)
        return found  # the admin key
    state = request.app.state
    rate_limits: KeyRateLimits = state.rate_limits
    rate = rate_limits.cached_rate(found.tenant_id)
    if rate is None:
        async with state.pool.acquire() as conn:
            rate = await rate_limits.rate_of(conn, found.tenant_id)
    rate_limits.admit(found.key_id, rate)
    raise_pending(request)
    return found
