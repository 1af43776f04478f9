"""A hop's batch appended as columns (`ostinato.eventlog.columns`) writes what `EventStore.append`
and the projector write for the same events: the log's rows, the read models, the outbox row;
and a rebuild from the log gives the live rows back."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

from ostinato.bus import codec
from ostinato.clock import FakeClock
from ostinato.domain import events as ev
from ostinato.domain.errors import VersionConflict
from ostinato.domain.states import RunState
from ostinato.eventlog import ended
from ostinato.eventlog.columns import Queued, append_queued, append_started, append_succeeded
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import read_stream
from ostinato.jobs import materialise
from ostinato.jobs.materialise import decide_and_append
from ostinato.leases.shard import SHARDS
from ostinato.stores import jobs, runs
from tests.helpers.integration import new_job, new_tenant, store
from tests.helpers.run_stories import scheduled

pytestmark = pytest.mark.integration

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)
TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _scheduled(job_id: uuid.UUID, **fields: Any) -> ev.RunScheduled:
    """A run of the job for the same slot as its twin's (a DAG node's: the slot is not unique)."""
    return msgspec.structs.replace(scheduled(job_id), trigger="dag", **fields)


def _stories(job_id: uuid.UUID) -> list[list[ev.Event]]:
    """Runs waiting for the dispatcher in the ways they can: new, in other pools and classes,
    with a concurrency key, and a retry whose time has come."""
    with_key = _scheduled(job_id, pool="long", priority="bulk", concurrency_key="k",
                          resource="crm")
    retry = [_scheduled(job_id), ev.RunQueued(pool="default"),
             ev.RunStarted(attempt=1, fencing_token=1, worker_id="w", lease_expires_at=LATER),
             ev.RunFailed(attempt=1, fencing_token=1, error_type="boom", message="m",
                          retryable=True),
             ev.RetryScheduled(retry_at=LATER, reason="retryable", counts=True, failures=1),
             ev.RetryDue(pool="default")]
    return [[_scheduled(job_id)], [_scheduled(job_id, pool="etl")], [with_key], retry]


async def _story(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                 story: list[ev.Event]) -> uuid.UUID:
    """A new run whose stream is `story`, appended the usual way; its id."""
    head = StreamHead(uuid.uuid4(), tenant_id)
    async with conn.transaction():
        await store(FakeClock(NOW)).append(conn, [head.next(e, "test") for e in story])
    return head.stream_id


def _in_order(heads: list[runs.RunHead], ids: list[uuid.UUID]) -> list[runs.RunHead]:
    """The heads in the stories' order (each twin's last message then stands for the same)."""
    return sorted(heads, key=lambda h: ids.index(h.id))


def _without(row: Any, *names: str) -> dict[str, Any]:
    return {k: v for k, v in dict(row).items() if k not in names}


async def _written(conn: asyncpg.Connection, run_id: uuid.UUID) -> dict[str, Any]:
    """What queueing wrote for the run: its last event, its row, its slot."""
    event = await conn.fetchrow(
        "SELECT version, stream_type, tenant_id, type, data::text AS data, actor, epoch,"
        " traceparent, occurred_at FROM events WHERE stream_id = $1"
        " ORDER BY version DESC LIMIT 1", run_id)
    row = await conn.fetchrow("SELECT * FROM runs WHERE id = $1", run_id)
    slot = await conn.fetchrow("SELECT * FROM run_slots WHERE run_id = $1", run_id)
    return {"event": dict(event), "run": _without(row, "id"),
            "slot": slot and _without(slot, "run_id")}


def _wake_ups(row: asyncpg.Record) -> list[tuple[Any, ...]]:
    """An outbox row's messages by topic, less the ids of the event each stands for."""
    out = []
    for topic, key, payload, headers in zip(row["topics"], row["keys"], row["payloads"],
                                            row["headers"], strict=True):
        envelope = codec.decode(payload)
        told = msgspec.json.decode(headers)
        out.append((topic, key, envelope.version, envelope.tenant_id, envelope.actor,
                    envelope.traceparent, envelope.event, envelope.coalesced,
                    envelope.occurred_at, sorted(told)))
    return sorted(out, key=lambda m: m[0])


async def test_queued_as_columns_writes_what_append_and_the_projector_write(
        pool: asyncpg.Pool) -> None:
    tenant_id, _ = await new_tenant(pool)
    job = await new_job(pool, tenant_id, at=NOW + timedelta(days=1))
    clock = FakeClock(NOW + timedelta(seconds=1))
    async with pool.acquire() as conn:
        twins = [(await _story(conn, tenant_id, s), await _story(conn, tenant_id, s))
                 for s in _stories(job.id)]
        await conn.execute("DELETE FROM outbox")
        by_append, by_columns = [a for a, _ in twins], [b for _, b in twins]
        async with conn.transaction():  # the projector's path, as the dispatcher took it
            heads = _in_order(await runs.lock_heads(conn, by_append), by_append)
            await store(clock).append(conn, [StreamHead.of(h).next(
                ev.RunQueued(pool=h.pool,
                             reason="retry" if h.state == "retry_scheduled" else "dispatched"),
                "dispatcher", traceparent=TP) for h in heads])
        appended = await conn.fetch("DELETE FROM outbox RETURNING *")
        async with conn.transaction():
            heads = _in_order(await runs.lock_heads(conn, by_columns), by_columns)
            await append_queued(store(clock), conn, [Queued(
                h.id, h.tenant_id, h.version, h.pool,
                "retry" if h.state == "retry_scheduled" else "dispatched", TP) for h in heads],
                "dispatcher")
        columnar = await conn.fetch("DELETE FROM outbox RETURNING *")

        for a, b in twins:
            assert await _written(conn, b) == await _written(conn, a)
        retried = await _written(conn, by_columns[-1])
        assert retried["event"]["data"] == ev.encode_event(
            ev.RunQueued(pool="default", reason="retry")).decode()
        assert retried["run"]["state"] == "queued" and retried["slot"] is not None
        assert len(appended) == len(columnar) == 1
        assert _wake_ups(columnar[0]) == _wake_ups(appended[0])
        topics = [m[0] for m in _wake_ups(columnar[0])]
        assert topics == sorted(store().topics.ready(p) for p in ("default", "etl", "long"))

        live = await snapshot(conn)
        await rebuild(conn)
        assert await snapshot(conn) == live


async def test_a_stale_head_writes_nothing(pool: asyncpg.Pool) -> None:
    """A writer that read a run's head before another moved it conflicts on the log's key:
    no event, no row changed, as `append`."""
    tenant_id, _ = await new_tenant(pool)
    job = await new_job(pool, tenant_id, at=NOW + timedelta(days=1))
    async with pool.acquire() as conn:
        fresh = await _story(conn, tenant_id, [_scheduled(job.id)])
        moved = await _story(conn, tenant_id, [_scheduled(job.id)])
        [a, b] = sorted(await runs.lock_heads(conn, [fresh, moved]),
                        key=lambda h: h.id != fresh)
        async with conn.transaction():
            await store().append(conn, [StreamHead.of(b).next(ev.CancelRequested(by="t"), "t")])
        before = await snapshot(conn)
        with pytest.raises(VersionConflict):
            async with conn.transaction():
                await append_queued(store(), conn, [
                    Queued(h.id, h.tenant_id, h.version, h.pool, "dispatched", None)
                    for h in (a, b)], "dispatcher")
        assert await snapshot(conn) == before


ZERO = uuid.UUID(int=0)


def _but_ids(event: ev.Event, *names: str) -> ev.Event:
    """The event with the named fields (its job's and run's own) set alike."""
    return msgspec.structs.replace(event, **{n: "t" if n == "task" else ZERO for n in names})


async def _fire(pool: asyncpg.Pool, clock: FakeClock, job_id: uuid.UUID) -> None:
    """The scheduler's decision and append for one due job, as its tick makes them."""
    async with pool.acquire() as conn, conn.transaction():
        due = [j for j in await jobs.claim_due(conn, clock.now(), 1000, [], range(SHARDS))
               if j.id == job_id]
        assert len(due) == 1
        await decide_and_append(conn, store(clock), clock, due, actor="scheduler")


async def test_fired_as_columns_writes_what_append_and_the_projector_write(
        pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    tenant_id, _ = await new_tenant(pool)
    clock = FakeClock(NOW)
    a, b = [await new_job(pool, tenant_id, at=NOW - timedelta(minutes=1), name=n, clock=clock,
                          payload={"same": True}) for n in ("a", "b")]
    async with pool.acquire() as conn:
        await conn.execute("DELETE FROM outbox")
    clock.advance(1)
    with monkeypatch.context() as m:  # a: the projector's path
        m.setattr(materialise, "fires_as_columns", lambda run: False)
        await _fire(pool, clock, a.id)
    async with pool.acquire() as conn:
        appended = await conn.fetch("DELETE FROM outbox RETURNING *")
    await _fire(pool, clock, b.id)  # b: as columns
    async with pool.acquire() as conn:
        columnar = await conn.fetch("DELETE FROM outbox RETURNING *")
        written = {}
        for job in (a, b):
            run = await conn.fetchrow("SELECT * FROM runs WHERE job_id = $1", job.id)
            row = await conn.fetchrow("SELECT * FROM jobs WHERE id = $1", job.id)
            [scheduled_] = await read_stream(conn, run["id"], tenant_id)
            fired = (await read_stream(conn, job.id, tenant_id))[-1]
            assert (run["payload_ref"], run["task"]) == (row["payload_ref"], row["task"])
            assert fired.version == row["version"]
            written[job.id] = {
                "run": _without(run, "id", "job_id", "payload_ref", "task"),
                "job": _without(row, "id", "name", "task", "payload_ref", "shard"),
                "scheduled": (scheduled_.version, scheduled_.actor, scheduled_.epoch,
                              scheduled_.traceparent, scheduled_.occurred_at,
                              _but_ids(scheduled_.event, "job_id", "task", "payload_ref")),
                "fired": (fired.type, fired.actor, fired.epoch, fired.traceparent,
                          fired.occurred_at,
                          _but_ids(fired.event, "run_id")),
                "seq": fired.seq - scheduled_.seq}
        assert written[b.id] == written[a.id]
        assert written[b.id]["run"]["state"] == "scheduled" and written[b.id]["seq"] == 1
        assert written[b.id]["job"]["status"] == "completed"  # a one-off: nothing comes next
        assert len(appended) == len(columnar) == 1
        [(topic, *_, event, count, _, _)] = _wake_ups(columnar[0])
        [(topic_a, *_, event_a, count_a, _, _)] = _wake_ups(appended[0])
        assert (topic, type(event), count) == (topic_a, type(event_a), count_a)
        assert topic == store().topics.due and isinstance(event, ev.RunScheduled)

        live = await snapshot(conn)
        await rebuild(conn)
        assert await snapshot(conn) == live


def _running(job_id: uuid.UUID, ended: ev.Event | None = None) -> list[ev.Event]:
    """A run of the job in its first attempt (ended by `ended`, then dead-lettered, if given)."""
    story: list[ev.Event] = [
        _scheduled(job_id), ev.RunQueued(pool="default"),
        ev.RunStarted(attempt=1, fencing_token=1, worker_id="w", lease_expires_at=LATER)]
    if ended is not None:
        story += [ended, ev.RunDeadLettered(reason="permanent", error_type="boom", message="m",
                                            attempts=1)]
    return story


async def test_succeeded_as_columns_writes_what_append_and_the_projector_write(
        pool: asyncpg.Pool, db_url: str) -> None:
    tenant_id, _ = await new_tenant(pool)
    failed = ev.RunFailed(attempt=1, fencing_token=1, error_type="boom", message="m",
                          retryable=False)
    ref = uuid.uuid4()
    outcomes = [dict(output_ref=None, logs_ref=None), dict(output_ref=ref, logs_ref=ref)]
    clock = FakeClock(NOW + timedelta(seconds=2))
    heard: list[str] = []
    listener = await asyncpg.connect(db_url)
    await listener.add_listener(ended.CHANNEL, lambda *args: heard.append(args[-1]))
    try:
        async with pool.acquire() as conn:
            twins, job_ids = [], []
            for name in ("a", "b"):  # a job each, with a streak of failures to end
                job = await new_job(pool, tenant_id, at=NOW + timedelta(days=1), name=name)
                await _story(conn, tenant_id, _running(job.id, failed))
                twins.append([await _story(conn, tenant_id, _running(job.id))
                              for _ in outcomes])
                job_ids.append(job.id)
            streak = "SELECT consecutive_failures FROM jobs WHERE id = ANY($1) ORDER BY id"
            assert [s["consecutive_failures"] for s in await conn.fetch(streak, job_ids)] == [1, 1]
            # a run waiting for the dispatcher: the freed slots' wake-up is written (below, the
            # test without one)
            waiting = await new_job(pool, tenant_id, at=NOW + timedelta(days=1), name="w")
            await _story(conn, tenant_id, [_scheduled(waiting.id)])
            await conn.execute("DELETE FROM outbox")
            out = []
            appenders = (store(clock).append, _columnar(append_succeeded, clock))
            for ids, append in zip(twins, appenders, strict=True):
                async with conn.transaction():
                    heads = _in_order(await runs.lock_heads(conn, ids), ids)
                    await append(conn, [StreamHead.of(h).next(ev.RunSucceeded(
                        attempt=1, fencing_token=1, **o), "worker:w", epoch=1, traceparent=TP)
                        for h, o in zip(heads, outcomes, strict=True)])
                out.append(await conn.fetch("DELETE FROM outbox RETURNING *"))
            streaks = await conn.fetch(streak, job_ids)

            written = [[await _written(conn, i) for i in ids] for ids in twins]
            for a, b in zip(*written, strict=True):  # the runs' own job and payload apart
                assert {**b, "run": _without(b["run"], "job_id", "payload_ref")} == \
                    {**a, "run": _without(a["run"], "job_id", "payload_ref")}
            assert [w["run"]["state"] for w in written[1]] == ["succeeded"] * 2
            assert [w["slot"] for w in written[1]] == [None, None]
            assert [s["consecutive_failures"] for s in streaks] == [0, 0]
            assert _wake_ups(out[1][0]) == _wake_ups(out[0][0])
            live = await snapshot(conn)
            await rebuild(conn)
            assert await snapshot(conn) == live
        for _ in range(100):  # notices arrive after the commits, in order
            if len(heard) >= 2:
                break
            await asyncio.sleep(0.02)
        assert [set(ended.parse(h)) for h in heard[-2:]] == [set(t) for t in twins]
    finally:
        await listener.close()


RUNS_UPDATED = "SELECT pg_stat_get_xact_tuples_updated('runs'::regclass)"  # this transaction's


async def test_a_told_chunk_end_writes_what_append_and_the_projector_write_in_one_row_write(
        pool: asyncpg.Pool) -> None:
    """A fan-out chunk's end told with it (`told`, the gateway's report holding the parent):
    its `ParentNotified` goes in the statement of its `RunSucceeded`, and its row is written
    once, as the two projections leave it after two writes; a run beside it without one is
    written as before."""
    tenant_id, _ = await new_tenant(pool)
    clock = FakeClock(NOW + timedelta(seconds=2))
    job = await new_job(pool, tenant_id, at=NOW + timedelta(days=1))
    parent = uuid.uuid4()
    chunk = [_scheduled(job.id, parent_run_id=parent), *_running(job.id)[1:]]
    updated = []
    async with pool.acquire() as conn:
        twins = [[await _story(conn, tenant_id, chunk),
                  await _story(conn, tenant_id, _running(job.id))] for _ in range(2)]
        for ids, columnar in zip(twins, (False, True), strict=True):
            async with conn.transaction():
                heads = _in_order(await runs.lock_heads(conn, ids), ids)
                ends = [StreamHead.of(h).next(ev.RunSucceeded(
                    attempt=1, fencing_token=1, output_ref=None, logs_ref=None), "worker:w",
                    epoch=1, traceparent=TP) for h in heads]
                told = [StreamHead(ids[0], tenant_id, ends[0].version, RunState.SUCCEEDED).next(
                    ev.ParentNotified(parent_run_id=parent, woke=False), "worker-gateway",
                    traceparent=TP)]
                before = await conn.fetchval(RUNS_UPDATED)
                if columnar:
                    await append_succeeded(store(clock), conn, ends, told)
                else:
                    await store(clock).append(conn, [*ends, *told])
                updated.append(await conn.fetchval(RUNS_UPDATED) - before)
        written = [[await _written(conn, i) for i in ids] for ids in twins]
        for a, b in zip(*written, strict=True):
            assert {**b, "run": _without(b["run"], "payload_ref")} == \
                {**a, "run": _without(a["run"], "payload_ref")}
        [told_chunk, plain] = written[1]
        assert told_chunk["event"]["type"] == "ParentNotified"
        assert told_chunk["run"]["parent_notified"] and told_chunk["run"]["version"] == 5
        assert (plain["event"]["type"], plain["run"]["version"]) == ("RunSucceeded", 4)
        assert updated == [3, 2]  # the told chunk's row: twice by append, once as columns
        kinds = "SELECT type FROM events WHERE stream_id = $1 ORDER BY seq"
        assert [r["type"] for r in await conn.fetch(kinds, twins[1][0])][-2:] == \
            ["RunSucceeded", "ParentNotified"]
        live = await snapshot(conn)
        await rebuild(conn)
        assert await snapshot(conn) == live


async def test_a_told_event_that_is_not_its_runs_next_writes_nothing(pool: asyncpg.Pool) -> None:
    tenant_id, _ = await new_tenant(pool)
    job = await new_job(pool, tenant_id, at=NOW + timedelta(days=1))
    async with pool.acquire() as conn:
        ran, other = [await _story(conn, tenant_id, _running(job.id)) for _ in range(2)]
        for told_run, version in ((ran, 6), (other, 5)):  # a version skipped; another run
            with pytest.raises(ValueError, match="ParentNotified"):
                async with conn.transaction():
                    [head] = await runs.lock_heads(conn, [ran])
                    end = StreamHead.of(head).next(ev.RunSucceeded(
                        attempt=1, fencing_token=1, output_ref=None, logs_ref=None), "worker:w")
                    told = StreamHead(told_run, tenant_id, version - 1, RunState.SUCCEEDED).next(
                        ev.ParentNotified(parent_run_id=uuid.uuid4(), woke=False), "gw")
                    await append_succeeded(store(FakeClock(NOW)), conn, [end], [told])
        assert await conn.fetchval("SELECT state FROM runs WHERE id = $1", ran) == "running"


async def test_completions_wake_the_dispatcher_only_while_a_run_waits_for_it(
        pool: asyncpg.Pool) -> None:
    # A freed slot matters to the dispatcher only if a run waits for one: without such a run
    # the completions' statement writes no `runs.finished` wake-up (the rest as before).
    tenant_id, _ = await new_tenant(pool)
    clock = FakeClock(NOW + timedelta(seconds=2))
    job = await new_job(pool, tenant_id, at=NOW + timedelta(days=1), name="a")
    retry_later = [_scheduled(job.id), ev.RunQueued(pool="default"),
                   ev.RunStarted(attempt=1, fencing_token=1, worker_id="w",
                                 lease_expires_at=LATER),
                   ev.RunFailed(attempt=1, fencing_token=1, error_type="boom", message="m",
                                retryable=True),
                   ev.RetryScheduled(retry_at=LATER, reason="retryable", counts=True,
                                     failures=1)]
    async with pool.acquire() as conn:
        await _story(conn, tenant_id, retry_later)  # waits for its time, not for a slot
        wake_ups = []
        for waiting in (False, True):
            if waiting:
                await _story(conn, tenant_id, [_scheduled(job.id)])
            ran = await _story(conn, tenant_id, _running(job.id))
            await conn.execute("DELETE FROM outbox")
            async with conn.transaction():
                [head] = await runs.lock_heads(conn, [ran])
                await append_succeeded(store(clock), conn, [StreamHead.of(head).next(
                    ev.RunSucceeded(attempt=1, fencing_token=1, output_ref=None, logs_ref=None),
                    "worker:w", epoch=1)])
            state = await conn.fetchval("SELECT state FROM runs WHERE id = $1", ran)
            assert state == "succeeded"
            wake_ups.append([_wake_ups(r) for r in
                             await conn.fetch("DELETE FROM outbox RETURNING *")])
    assert wake_ups[0] == []
    assert [[m[0] for m in row] for row in wake_ups[1]] == [[store(clock).topics.finished]]


def _columnar(append_as_columns: Any, clock: FakeClock) -> Any:
    """`store(clock).append`'s stand-in: the columnar append given."""
    async def append(conn: asyncpg.Connection, events: list[Any]) -> None:
        await append_as_columns(store(clock), conn, events)
    return append


async def test_started_as_columns_writes_what_append_and_the_projector_write(
        pool: asyncpg.Pool) -> None:
    """A claim's starts: the runs, the start-lag histogram (first attempts only), a pinned
    workflow's version kept."""
    tenant_id, _ = await new_tenant(pool)
    job = await new_job(pool, tenant_id, at=NOW + timedelta(days=1))
    retried = [*_running(job.id)[:3],
               ev.LeaseReleased(attempt=1, fencing_token=1, worker_id="w"),
               ev.RunQueued(pool="default", reason="retry")]
    stories = [_running(job.id)[:2], _running(job.id)[:2], retried]
    starts = [dict(attempt=1, fencing_token=1, task_version=None, pinned=False),
              dict(attempt=1, fencing_token=1, task_version="3", pinned=True),
              dict(attempt=2, fencing_token=2, task_version=None, pinned=False)]
    minute = "SELECT bucket, starts, max_seconds FROM start_lag_minutes" \
             " WHERE tenant_id = $1 ORDER BY bucket"
    out, histograms = [], []
    async with pool.acquire() as conn:
        twins = [[await _story(conn, tenant_id, s) for s in stories] for _ in range(2)]
        await conn.execute("DELETE FROM outbox")
        for ids, columnar in zip(twins, (False, True), strict=True):
            clock = FakeClock(NOW + timedelta(seconds=3))
            append = _columnar(append_started, clock) if columnar else store(clock).append
            before = await conn.fetch(minute, tenant_id)
            async with conn.transaction():
                heads = _in_order(await runs.lock_heads(conn, ids), ids)
                await append(conn, [StreamHead.of(h).next(ev.RunStarted(
                    worker_id="w", lease_expires_at=LATER, **o), "worker:w",
                    epoch=o["fencing_token"], traceparent=TP)
                    for h, o in zip(heads, starts, strict=True)])
            out.append(await conn.fetch("DELETE FROM outbox RETURNING *"))
            after = {r["bucket"]: r for r in await conn.fetch(minute, tenant_id)}
            histograms.append(sorted(
                (b, r["starts"] - next((x["starts"] for x in before if x["bucket"] == b), 0),
                 r["max_seconds"]) for b, r in after.items()))
        written = [[await _written(conn, i) for i in ids] for ids in twins]
        for a, b in zip(*written, strict=True):
            assert b == a
        assert [(await _written(conn, i))["run"]["task_version"] for i in twins[1]] == \
            [None, "3", None]
        assert histograms[1] == histograms[0] and sum(h[1] for h in histograms[1]) == 2
        assert out == [[], []]  # a start wakes no one
        live = await snapshot(conn)
        await rebuild(conn)
        assert await snapshot(conn) == live

