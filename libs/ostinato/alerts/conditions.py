"""The thresholds of the rules read from the fleet's state (stuck leases, lag SLO, outbox
backlog, no worker for a pool, ledger disagreements) and the pure decisions over them: where a
signal starts counting (the cutoff the reconciler's queries take) and whether a lag sample
breaches its SLO. Defaults and their environment variables: docs/ALERTS.md."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta


@dataclasses.dataclass(frozen=True, slots=True)
class Thresholds:
    lease_stuck_after: timedelta = timedelta(seconds=60)  # expired this long, still held
    lag_slo: timedelta = timedelta(seconds=60)  # schedule lag p99 allowed per tenant and pool
    lag_window: timedelta = timedelta(minutes=15)  # the starts the p99 is taken over
    lag_min_samples: int = 10  # fewer starts in the window: too few to judge, no breach
    outbox_after: timedelta = timedelta(seconds=120)  # an unpublished message this old
    no_worker_after: timedelta = timedelta(minutes=5)  # runs waiting this long, no worker
    disagreement_window: timedelta = timedelta(hours=24)  # a disagreement fires this long
    archive_failing_after: timedelta = timedelta(minutes=15)  # archiver passes failing this long


def cutoff(now: datetime, after: timedelta) -> datetime:
    """The instant before which a condition has lasted `after` at `now`."""
    return now - after


def lag_breached(p99_seconds: float | None, samples: int, t: Thresholds) -> bool:
    """A tenant's pool breaches its lag SLO when enough runs started in the window and their
    p99 schedule lag is over the SLO (equal is within it)."""
    return (p99_seconds is not None and samples >= t.lag_min_samples
            and p99_seconds > t.lag_slo.total_seconds())


DEFAULT = Thresholds()
