"""A dead worker detected in seconds (issue 39): the pure decision of which attempts are
abandoned (`ostinato.policy.liveness`), and the SDK's pings that keep a live worker's runs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from ostinato.policy.liveness import abandoned, silence_limit, watch_start
from ostinato.sdk import current
from ostinato.sdk.reporter import Reporter
from ostinato.testing.gateway import FakeGateway, running
from ostinato.wire import worker as p
from tests.helpers.waiting import eventually

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
DEAD_AFTER = timedelta(seconds=3)
LEASE_LEFT = NOW + timedelta(seconds=20)  # a lease far from running out


def judge(*, expires_at: datetime = LEASE_LEFT, seen_ago: float | None = 0.5,
          liveness: float | None = 1.0, watching_for: float = 60.0,
          gateway_up_for: float | None = 600.0) -> str | None:
    return abandoned(now=NOW, expires_at=expires_at,
                     seen_at=None if seen_ago is None else NOW - timedelta(seconds=seen_ago),
                     liveness_seconds=liveness, dead_after=DEAD_AFTER,
                     watching_since=NOW - timedelta(seconds=watching_for),
                     gateways_since=None if gateway_up_for is None
                     else NOW - timedelta(seconds=gateway_up_for))


def test_an_expired_lease_is_taken_back_whatever_its_worker_says() -> None:
    assert judge(expires_at=NOW - timedelta(milliseconds=1)) == "lease_expired"
    assert judge(expires_at=NOW - timedelta(seconds=1), seen_ago=0.0) == "lease_expired"
    assert judge(expires_at=NOW - timedelta(seconds=1), liveness=None) == "lease_expired"


def test_a_pinging_worker_silent_past_the_limit_is_dead_before_its_lease_runs_out() -> None:
    assert judge(seen_ago=3.5) == "missed_heartbeats"
    assert judge(seen_ago=3.0) is None  # exactly at the limit: still alive
    assert judge(seen_ago=2.0) is None


def test_a_slow_pinger_gets_three_pings_and_a_fast_one_the_setting() -> None:
    assert silence_limit(1.0, DEAD_AFTER) == DEAD_AFTER
    assert silence_limit(0.1, DEAD_AFTER) == DEAD_AFTER
    assert silence_limit(2.0, DEAD_AFTER) == timedelta(seconds=6)
    assert judge(seen_ago=5.0, liveness=2.0) is None
    assert judge(seen_ago=6.5, liveness=2.0) == "missed_heartbeats"


def test_a_worker_that_declares_no_pings_or_is_unknown_is_judged_by_its_lease_alone() -> None:
    assert judge(seen_ago=600.0, liveness=None) is None  # an older SDK heartbeats every 10 s
    assert judge(seen_ago=None) is None  # not registered (said goodbye, never claimed)


def test_silence_counts_only_while_the_detector_watched() -> None:
    # seen 10 s ago, but the detector has been looking for 2 s only (it just came back)
    assert judge(seen_ago=10.0, watching_for=2.0) is None
    assert judge(seen_ago=10.0, watching_for=3.5) == "missed_heartbeats"


def test_silence_counts_only_while_a_gateway_was_there_to_hear_it() -> None:
    assert judge(seen_ago=10.0, gateway_up_for=None) is None  # no gateway live: nobody pinged
    assert judge(seen_ago=10.0, gateway_up_for=2.0) is None  # one just (re)started
    assert judge(seen_ago=10.0, gateway_up_for=3.5) == "missed_heartbeats"
    # an expired lease needs no witness
    assert judge(expires_at=NOW - timedelta(seconds=1), gateway_up_for=None) == "lease_expired"


def test_the_watch_starts_at_the_first_pass_and_again_after_a_gap_in_passes() -> None:
    began = NOW - timedelta(seconds=30)
    assert watch_start(None, None, NOW, DEAD_AFTER) == NOW
    assert watch_start(began, NOW - timedelta(seconds=1), NOW, DEAD_AFTER) == began
    assert watch_start(began, NOW - timedelta(seconds=3), NOW, DEAD_AFTER) == began
    assert watch_start(began, NOW - timedelta(seconds=4), NOW, DEAD_AFTER) == NOW  # a gap


async def test_a_worker_holding_a_run_pings_and_declares_its_interval_in_claims() -> None:
    """With a lease of an hour (no periodic heartbeat for 20 min), a run in custody still
    makes the worker say it is alive every `liveness_seconds`: empty batches."""
    gw, pinged = FakeGateway(), asyncio.Event()

    async def busy(payload: Any) -> str:
        ctx = current()
        await eventually(lambda: sum(1 for b in gw.batches if not b.heartbeats) >= 3)
        pinged.set()
        return ctx.run_id

    run_id = await gw.add("busy", ttl=3600.0)
    async with running(gw, {"busy": busy}, liveness_seconds=0.02):
        await eventually(lambda: run_id in gw.completions())
    assert pinged.is_set()
    assert {c.liveness_seconds for c in gw.claims} == {0.02}
    empty = [b for b in gw.batches if not (b.heartbeats or b.completions or b.failures
                                           or b.releases or b.steps)]
    assert len(empty) >= 3 and all(b.worker_id == gw.claims[0].worker_id for b in empty)


async def test_an_idle_worker_does_not_ping_and_none_turns_pings_off() -> None:
    async def busy(payload: Any) -> str:
        await asyncio.sleep(0.1)
        return "done"

    gw = FakeGateway()
    async with running(gw, {"busy": busy}, liveness_seconds=0.01, claim_wait_seconds=0.01):
        await eventually(lambda: len(gw.claims) >= 2)
        await asyncio.sleep(0.1)
    assert gw.batches == []  # nothing held: nothing to be judged by

    gw = FakeGateway()

    run_id = await gw.add("busy", ttl=3600.0)
    async with running(gw, {"busy": busy}, liveness_seconds=None):
        await eventually(lambda: run_id in gw.completions())
    assert {c.liveness_seconds for c in gw.claims} == {None}
    assert [len(b.completions) for b in gw.batches] == [1]  # no ping, no heartbeat


async def test_a_ping_rides_with_pending_items_and_alone_is_sent_once_never_retried() -> None:
    requests: list[p.BatchRequest] = []
    fail = [True]

    async def transport(request: p.BatchRequest) -> p.BatchResponse:
        requests.append(request)
        if fail[0]:
            raise OSError("gateway unreachable")
        return p.BatchResponse(results=[p.BatchItemResult(run_id=c.run_id, kind="complete",
                                                          status=200)
                                        for c in request.completions])

    reporter = Reporter(transport, worker_id="w", linger_seconds=0.001)
    reporter.start()
    reporter.ping()
    await eventually(lambda: len(requests) == 1)
    await asyncio.sleep(0.05)
    assert len(requests) == 1 and reporter.pending == 0  # a lost ping is not retried
    fail[0] = False
    reporter.complete("r1", 1, None)
    reporter.ping()
    await eventually(lambda: len(requests) == 2)
    assert [c.run_id for c in requests[1].completions] == ["r1"]  # one request for both
    await asyncio.sleep(0.05)
    assert len(requests) == 2
    assert await reporter.close(1.0) == []


@pytest.mark.parametrize("interval", [5e-324, 0.0, 0.0005, 60.5])
def test_a_claim_declaring_a_ping_interval_out_of_range_is_refused_by_its_type(
        interval: float) -> None:
    """A subnormal interval used to pass `> 0` and round to 0 in the `real` column, whose CHECK
    then refused the INSERT: a 500 where the worker sent bad input."""
    body = {"worker_id": "w", "pools": ["default"], "liveness_seconds": interval}
    with pytest.raises(msgspec.ValidationError, match="liveness_seconds"):
        msgspec.json.decode(msgspec.json.encode(body), type=p.ClaimRequest)


def test_a_claim_declaring_a_ping_interval_in_range_is_accepted() -> None:
    body = {"worker_id": "w", "pools": ["default"], "liveness_seconds": p.MIN_LIVENESS_SECONDS}
    claim = msgspec.json.decode(msgspec.json.encode(body), type=p.ClaimRequest)
    assert claim.liveness_seconds == p.MIN_LIVENESS_SECONDS
