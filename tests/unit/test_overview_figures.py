"""The overview page's figures, the pure part (ostinato.policy.overview): rows in, per-pool
figures and series out: the nearest-rank quantile of the lag histogram, the windows (the
current minute and hour included, older rows left out), breaches of the SLO, the oldest due
age of waiting runs only, alerts under their pool. No servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ostinato.policy.overview import (
    HOURS,
    LAG_MINUTES,
    AlertEpisode,
    EndedHour,
    LagBucket,
    LiveCount,
    day_start,
    lag_start,
    quantile,
    summarize,
)

NOW = datetime(2026, 3, 2, 14, 30, 20, tzinfo=UTC)


def test_quantile_is_the_nearest_rank_buckets_largest_value() -> None:
    rows = [(0, 50, 0.0005), (10, 49, 0.0026), (70, 1, 0.9)]  # 100 samples
    assert quantile(rows, 0.5) == 0.0005  # rank 50: bucket 0
    assert quantile(rows, 0.51) == 0.0026
    assert quantile(rows, 0.99) == 0.0026  # rank 99: the 99th sample is in bucket 10
    assert quantile(rows, 1.0) == 0.9
    assert quantile([], 0.5) is None
    # rows of one bucket from several minutes are merged (counts added, the largest kept)
    assert quantile([(5, 1, 0.0015), (5, 1, 0.0016), (9, 1, 0.002)], 0.5) == 0.0016


def test_windows_end_with_the_current_minute_and_hour() -> None:
    assert lag_start(NOW) == datetime(2026, 3, 2, 13, 31, tzinfo=UTC)
    assert day_start(NOW) == datetime(2026, 3, 1, 15, 0, tzinfo=UTC)
    assert lag_start(NOW) + timedelta(minutes=LAG_MINUTES - 1) == NOW.replace(second=0)
    assert day_start(NOW) + timedelta(hours=HOURS - 1) == NOW.replace(minute=0, second=0)


def test_live_states_and_the_oldest_due_age_of_waiting_runs_only() -> None:
    live = [
        LiveCount("default", "scheduled", 3, NOW - timedelta(seconds=90)),
        LiveCount("default", "queued", 2, NOW - timedelta(seconds=30)),
        LiveCount("default", "running", 4, None),
        LiveCount("default", "retry_scheduled", 1, NOW + timedelta(minutes=5)),  # not yet due
        LiveCount("batch", "suspended", 7, None),
    ]
    o = summarize(["default", "batch"], live, [], [], [], now=NOW, slo_seconds=60)
    default, batch = o.pools
    assert default.states == {"scheduled": 3, "queued": 2, "running": 4, "suspended": 0,
                              "retry_scheduled": 1, "failed": 0}
    assert default.live == 10
    assert default.oldest_due_seconds == 90.0
    assert batch.states["suspended"] == 7 and batch.oldest_due_seconds is None


def test_ended_runs_per_hour_of_the_day_and_older_ones_left_out() -> None:
    this_hour = NOW.replace(minute=0, second=0)
    ended = [
        EndedHour("default", this_hour, 10, 2, 3),
        EndedHour("default", this_hour - timedelta(hours=23), 4, 1, 1),  # the day's first hour
        EndedHour("default", this_hour - timedelta(hours=24), 99, 99, 99),  # before the day
    ]
    [p] = summarize(["default"], [], ended, [], [], now=NOW, slo_seconds=60).pools
    assert len(p.ended_by_hour) == HOURS
    assert p.ended_by_hour[-1] == 10 and p.ended_by_hour[0] == 4
    assert p.dead_letters_by_hour[-1] == 2 and p.dead_letters == 3
    assert p.failed == 4 and sum(p.ended_by_hour) == 14


def test_start_lag_of_the_hour_per_pool_and_minute_with_breaches() -> None:
    m0 = lag_start(NOW)
    last = m0 + timedelta(minutes=LAG_MINUTES - 1)
    lags = [
        LagBucket("default", m0, 0, 98, 0.0005),  # 98 starts on time in the first minute
        LagBucket("default", last, 80, 1, 2.5),
        LagBucket("default", last, 120, 1, 95.0),  # over the SLO: the last minute breaches
        LagBucket("default", m0 - timedelta(minutes=1), 150, 500, 4000.0),  # before the hour
        LagBucket("batch", last, 30, 3, 0.02),
    ]
    o = summarize(["default", "batch"], [], [], lags, [], now=NOW, slo_seconds=60)
    default, batch = o.pools
    assert default.lag_starts == 100
    assert default.lag_p50 == 0.0005 and default.lag_p99 == 2.5  # rank 99 of 100
    assert default.lag_p99_by_minute[0] == 0.0005
    assert default.lag_p99_by_minute[-1] == 95.0  # rank ceil(1.98) = 2 of 2
    assert default.lag_p99_by_minute[1:-1] == [None] * (LAG_MINUTES - 2)
    assert default.breach_minutes == 1
    assert batch.lag_p50 == batch.lag_p99 == 0.02 and batch.breach_minutes == 0


def test_a_pool_only_the_rows_name_follows_the_configured_ones() -> None:
    o = summarize(["default"], [LiveCount("gpu", "running", 1, None)], [], [], [], now=NOW,
                  slo_seconds=60)
    assert [p.pool for p in o.pools] == ["default", "gpu"]


@pytest.mark.parametrize("pool", ["default", None])
def test_firing_alerts_under_their_pool_or_the_tenant(pool: str | None) -> None:
    alerts = [
        AlertEpisode("k1", "OstinatoLagSLOBreach", "firing", pool, "warning", "late",
                     NOW - timedelta(minutes=5), None),
        AlertEpisode("k2", "OstinatoDeadLetter", "resolved", None, "critical", "dl",
                     NOW - timedelta(hours=2), NOW - timedelta(hours=1)),
        AlertEpisode("k3", "OstinatoDeadLetter", "firing", None, "critical", "old",
                     NOW - timedelta(days=3), None),
    ]
    o = summarize(["default"], [], [], [], alerts, now=NOW, slo_seconds=60)
    assert [a.alert_key for a in o.firing] == ["k1", "k3"]  # newest first, resolved left out
    assert o.alerts_by_hour[-1] == 1 and o.alerts_by_hour[-3] == 1 and sum(o.alerts_by_hour) == 2
    [p] = o.pools
    if pool:
        assert [a.alert_key for a in p.firing] == ["k1"] and p.alerts_by_hour[-1] == 1
        assert [a.alert_key for a in o.tenant_firing] == ["k3"]
    else:
        assert p.firing == [] and sum(p.alerts_by_hour) == 0
        assert [a.alert_key for a in o.tenant_firing] == ["k1", "k3"]
