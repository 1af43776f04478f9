"""Which attempts are abandoned: the decision the reconciler's lease check makes each pass.

A lease runs out after `OSTINATO_LEASE_TTL_SECONDS` (30 s): long, so that a worker busy in a
step, a slow network or a gateway restart never costs a run its attempt. A dead worker must
not hold its runs that long, so a worker that declares a ping interval (`liveness_seconds`,
the SDK's: one batch request a second while it holds runs, empty if need be) is judged by its
last ping instead: silent for `silence_limit` it is dead, and its attempts are taken back
through the same fenced path as an expired lease (`LeaseExpired`, the token revoked in
storage), so a worker that was only partitioned or frozen and comes back is refused as stale.

Every instant is the database's (`workers.seen_at`, the lease's expiry and the pass's `now`
come from one clock), and liveness is a row in storage that every gateway instance refreshes,
so a worker may talk to any gateway. Silence is counted only while the worker could have been
heard: from `watching_since` (after a gap in the detector's own passes, the database or the
reconciler down, the count starts again) and from `gateways_since`, the latest start of a live
gateway instance (a gateway restart starts it again; with no gateway live nobody is judged), so
an outage or a rolling restart of the platform never passes for every worker's death.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

Cause = Literal["lease_expired", "missed_heartbeats"]
MISSED_PINGS = 3  # pings in a row a live worker never misses


def silence_limit(liveness_seconds: float, dead_after: timedelta) -> timedelta:
    """How long a worker pinging every `liveness_seconds` may stay silent before it is dead:
    `dead_after` (the setting), or three pings when the worker pings more slowly."""
    return max(dead_after, timedelta(seconds=MISSED_PINGS * liveness_seconds))


def watch_start(since: datetime | None, last_pass: datetime | None, now: datetime,
                dead_after: timedelta) -> datetime:
    """From when silence counts at this pass (`now`): since the detector's continuous watch
    began, restarted at `now` on the first pass and after a gap longer than `dead_after`
    between passes (nobody could be seen during it)."""
    if since is None or last_pass is None or now - last_pass > dead_after:
        return now
    return since


def abandoned(*, now: datetime, expires_at: datetime, seen_at: datetime | None,
              liveness_seconds: float | None, dead_after: timedelta,
              watching_since: datetime, gateways_since: datetime | None) -> Cause | None:
    """Why an attempt's lease is to be taken back at `now`, or None while its worker may still
    be working: the lease ran out, or its pinging worker has been silent too long while the
    detector watched and a gateway was there to hear it."""
    if expires_at < now:
        return "lease_expired"
    if seen_at is None or liveness_seconds is None:
        return None  # the worker declares no pings (an older SDK): its lease decides
    if gateways_since is None:
        return None  # no gateway instance live: nobody could ping
    heard_from = max(seen_at, watching_since, gateways_since)
    if now - heard_from > silence_limit(liveness_seconds, dead_after):
        return "missed_heartbeats"
    return None
