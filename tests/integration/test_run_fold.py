"""The `runs` read model is the SQL form of the domain's `fold`: for generated lawful histories,
appended through the store in random batches, the projected row equals `fold()` of its stream,
and equals it again after the read models are rebuilt from the log."""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ostinato.domain import events as ev
from ostinato.domain.lifecycle import fold
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.eventlog.records import StreamHead
from tests.helpers.integration import new_tenant, store
from tests.helpers.rows import ROW, _as_run
from tests.helpers.run_stories import T0, run_stories, scheduled

pytestmark = pytest.mark.integration

def _fan_out(seq: int) -> ev.FanOutStarted:
    return ev.FanOutStarted(seq=seq, name="fan_out:t", task="t", total=4, max_concurrency=2,
                            admitted=2, on_failure="fail", pool="default", priority="default",
                            attempt=1)


def _fanning(*more: ev.Event) -> list[ev.Event]:
    """A running run's fan-out at position 0, then `more`."""
    return [scheduled(), ev.RunQueued(pool="default"),
            ev.RunStarted(attempt=1, fencing_token=1, worker_id="worker-a",
                          lease_expires_at=T0 + timedelta(seconds=30)),
            _fan_out(0), *more]


# Starts the lifecycle table allows but the gateway never writes (it reads fan_outs first):
# the same position started again, and another position started while the first runs. Their
# append once failed on fan_outs' keys.
FAN_OUTS_AGAIN = [_fanning(_fan_out(0)),
                  _fanning(ev.StepCompleted(seq=0, name="a", attempt=1, fencing_token=1),
                           _fan_out(1))]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])


@given(events=run_stories(), cuts=st.lists(st.integers(1, 4), min_size=1, max_size=15))
@example(events=FAN_OUTS_AGAIN[0], cuts=[1])
@example(events=FAN_OUTS_AGAIN[1], cuts=[4])
async def test_the_projected_run_is_the_fold_of_its_stream(
    pool: asyncpg.Pool, events: list[ev.Event], cuts: list[int],
) -> None:
    tenant_id, _ = await new_tenant(pool)
    head = StreamHead(uuid.uuid4(), tenant_id)
    pending = [head.next(e, "test") for e in events]
    async with pool.acquire() as conn:
        while pending:  # several transactions, several events of the stream in some of them
            size = cuts[len(pending) % len(cuts)]
            async with conn.transaction():
                await store().append(conn, pending[:size])
            pending = pending[size:]
        assert _as_run(await conn.fetchrow(ROW, head.stream_id)) == fold(events)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])


@given(stories=st.lists(run_stories(), min_size=1, max_size=10))
@example(stories=FAN_OUTS_AGAIN)
async def test_a_rebuild_gives_every_run_its_fold_again(
    pool: asyncpg.Pool, stories: list[list[ev.Event]],
) -> None:
    tenant_id, _ = await new_tenant(pool)
    heads = [StreamHead(uuid.uuid4(), tenant_id) for _ in stories]
    async with pool.acquire() as conn:
        async with conn.transaction():
            await store().append(conn, [h.next(e, "test") for h, story in
                                        zip(heads, stories, strict=True) for e in story])
        live = await snapshot(conn)
        await rebuild(conn)
        assert await snapshot(conn) == live
        for h, story in zip(heads, stories, strict=True):
            assert _as_run(await conn.fetchrow(ROW, h.stream_id)) == fold(story)
