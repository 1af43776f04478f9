"""The web UI's overview (docs/UI.md, "Overview"): per pool, what a tenant's operator reads at a
glance, from a few set-based reads of the api's own stores (`ostinato.stores.overview`). Pure:
rows and an instant in, the figures and their per-minute or per-hour series out.

- runs by state now: the tenant's runs not yet final, per state; the oldest due instant among
  those waiting to start (scheduled, queued, retry_scheduled) gives the oldest due age;
- start lag over the last hour (LAG_MINUTES whole minutes, the current one included): p50 and
  p99 of the first attempts started, from the schedule-lag histogram `start_lag_minutes` (10 %
  wide buckets, each with its largest lag), nearest rank as OstinatoLagSLOBreach reads it: the
  largest lag of the bucket holding the rank, within one bucket's width above the exact figure
  and exact when the bucket's lags are equal; per minute, the p99, and the minutes whose p99
  is over the lag SLO (the breaches);
- over the last day (HOURS whole hours): per hour the runs that ended, dead-lettered, and
  ended after at least one failed attempt (retried, or dead-lettered);
- alerts: those firing now (a pool's own, such as OstinatoLagSLOBreach, under its pool), and
  per hour the episodes that started (the state keeps each alert key's latest episode only).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import msgspec

LAG_MINUTES = 60
HOURS = 24
WAITING = ("scheduled", "queued", "retry_scheduled")  # states whose due age counts
LIVE_STATES = ("scheduled", "queued", "running", "suspended", "retry_scheduled", "failed")


class LiveCount(msgspec.Struct, frozen=True):
    """The tenant's runs not yet final in one pool and state; the oldest due among them."""

    pool: str
    state: str
    runs: int
    oldest_due: datetime | None  # waiting states only


class EndedHour(msgspec.Struct, frozen=True):
    """Runs of one pool that ended in one hour."""

    pool: str
    hour: datetime
    ended: int
    dead_lettered: int
    failed: int  # ended after at least one failed attempt, or dead-lettered


class LagBucket(msgspec.Struct, frozen=True):
    """One row of the schedule-lag histogram: a pool's first starts in one minute and bucket."""

    pool: str
    minute: datetime
    bucket: int
    starts: int
    max_seconds: float


class AlertEpisode(msgspec.Struct, frozen=True):
    """An alert key's latest episode: firing now, or resolved within the day."""

    alert_key: str
    rule: str
    status: str
    pool: str | None  # the pool label of a pool's own alert
    severity: str | None
    summary: str | None
    starts_at: datetime
    ends_at: datetime | None


def quantile(buckets: Iterable[tuple[int, int, float]], q: float) -> float | None:
    """The nearest-rank `q` quantile of histogram rows (bucket, count, largest value): the
    largest value of the first bucket, ascending, whose cumulative count reaches
    ceil(q * total). None without a sample."""
    merged: dict[int, tuple[int, float]] = {}
    for bucket, n, top in buckets:
        have_n, have_top = merged.get(bucket, (0, 0.0))
        merged[bucket] = (have_n + n, max(have_top, top))
    total = sum(n for n, _ in merged.values())
    if total <= 0:
        return None
    rank = max(1, math.ceil(q * total - 1e-9))
    reached = 0
    for bucket in sorted(merged):
        n, top = merged[bucket]
        reached += n
        if reached >= rank:
            return top
    return None  # unreachable: the last bucket reaches the total


def lag_start(now: datetime) -> datetime:
    """The first of the LAG_MINUTES whole minutes ending with `now`'s."""
    return now.replace(second=0, microsecond=0) - timedelta(minutes=LAG_MINUTES - 1)


def day_start(now: datetime) -> datetime:
    """The first of the HOURS whole hours ending with `now`'s."""
    return now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=HOURS - 1)


@dataclass
class PoolOverview:
    pool: str
    states: dict[str, int]  # live state -> runs (every state of LIVE_STATES, 0 when none)
    oldest_due_seconds: float | None  # how long the oldest waiting run is past its due
    lag_starts: int  # first starts counted in the last hour
    lag_p50: float | None
    lag_p99: float | None
    lag_p99_by_minute: list[float | None]  # LAG_MINUTES points (None: no start that minute)
    breach_minutes: int  # minutes whose p99 is over the SLO
    ended_by_hour: list[int]  # HOURS points
    dead_letters_by_hour: list[int]
    failed_by_hour: list[int]
    firing: list[AlertEpisode] = field(default_factory=list)
    alerts_by_hour: list[int] = field(default_factory=lambda: [0] * HOURS)

    @property
    def live(self) -> int:
        return sum(self.states.values())

    @property
    def dead_letters(self) -> int:
        return sum(self.dead_letters_by_hour)

    @property
    def failed(self) -> int:
        return sum(self.failed_by_hour)


@dataclass
class Overview:
    now: datetime
    slo_seconds: float
    pools: list[PoolOverview]
    firing: list[AlertEpisode]  # every firing alert of the tenant, newest first
    tenant_firing: list[AlertEpisode]  # those not about one pool
    alerts_by_hour: list[int]  # episodes started per hour, every alert of the tenant


def _slot(at: datetime, start: datetime, step: timedelta, n: int) -> int | None:
    i = int((at - start) // step)
    return i if 0 <= i < n else None


def summarize(pools: Sequence[str], live: Iterable[LiveCount], ended: Iterable[EndedHour],
              lags: Iterable[LagBucket], alerts: Iterable[AlertEpisode], *, now: datetime,
              slo_seconds: float) -> Overview:
    """The overview of the configured `pools` (and any other pool the rows name, after them)
    at `now`, from the store's rows; `slo_seconds` the start-lag SLO a minute's p99 breaches."""
    names = list(dict.fromkeys(pools))
    live, ended, lags, alerts = list(live), list(ended), list(lags), list(alerts)
    for row in (*live, *ended, *lags):
        if row.pool not in names:
            names.append(row.pool)
    minute0, hour0 = lag_start(now), day_start(now)
    one_minute, one_hour = timedelta(minutes=1), timedelta(hours=1)
    out: dict[str, PoolOverview] = {
        p: PoolOverview(pool=p, states=dict.fromkeys(LIVE_STATES, 0), oldest_due_seconds=None,
                        lag_starts=0, lag_p50=None, lag_p99=None,
                        lag_p99_by_minute=[None] * LAG_MINUTES, breach_minutes=0,
                        ended_by_hour=[0] * HOURS, dead_letters_by_hour=[0] * HOURS,
                        failed_by_hour=[0] * HOURS) for p in names}
    for c in live:
        view = out[c.pool]
        view.states[c.state] = view.states.get(c.state, 0) + c.runs
        if c.state in WAITING and c.oldest_due is not None and c.oldest_due <= now:
            age = (now - c.oldest_due).total_seconds()
            view.oldest_due_seconds = max(view.oldest_due_seconds or 0.0, age)
    for h in ended:
        i = _slot(h.hour, hour0, one_hour, HOURS)
        if i is None:
            continue
        view = out[h.pool]
        view.ended_by_hour[i] += h.ended
        view.dead_letters_by_hour[i] += h.dead_lettered
        view.failed_by_hour[i] += h.failed
    by_pool: dict[str, list[LagBucket]] = {}
    for b in lags:
        if _slot(b.minute, minute0, one_minute, LAG_MINUTES) is not None:
            by_pool.setdefault(b.pool, []).append(b)
    for pool, rows in by_pool.items():
        view = out[pool]
        view.lag_starts = sum(b.starts for b in rows)
        triples = [(b.bucket, b.starts, b.max_seconds) for b in rows]
        view.lag_p50, view.lag_p99 = quantile(triples, 0.5), quantile(triples, 0.99)
        per_minute: dict[int, list[tuple[int, int, float]]] = {}
        for b in rows:
            i = _slot(b.minute, minute0, one_minute, LAG_MINUTES)
            assert i is not None
            per_minute.setdefault(i, []).append((b.bucket, b.starts, b.max_seconds))
        for i, minute_rows in per_minute.items():
            view.lag_p99_by_minute[i] = quantile(minute_rows, 0.99)
        view.breach_minutes = sum(1 for v in view.lag_p99_by_minute
                                  if v is not None and v > slo_seconds)
    firing = sorted((a for a in alerts if a.status == "firing"),
                    key=lambda a: (a.starts_at, a.alert_key), reverse=True)
    tenant_hours = [0] * HOURS
    for a in alerts:
        i = _slot(a.starts_at, hour0, one_hour, HOURS)
        if i is not None:
            tenant_hours[i] += 1
            if a.pool in out:
                out[a.pool].alerts_by_hour[i] += 1
    for a in firing:
        if a.pool in out:
            out[a.pool].firing.append(a)
    return Overview(now=now, slo_seconds=slo_seconds, pools=[out[p] for p in names],
                    firing=firing, tenant_firing=[a for a in firing if a.pool not in out],
                    alerts_by_hour=tenant_hours)
