"""Identities, the event catalogue and its committed JSON Schema, named SQL, settings."""

import json
import os
import random
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from ostinato.db.queries import REGISTRY, load, parse
from ostinato.domain import events as ev
from ostinato.domain.ids import idempotency_key, new_id, run_id_for
from ostinato.runtime.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


def test_run_id_is_a_function_of_the_occurrence_instant() -> None:
    job = uuid.uuid4()
    at = datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    same_instant = at.astimezone(timezone(timedelta(hours=2)))
    assert run_id_for(job, at) == run_id_for(job, same_instant)
    assert run_id_for(job, at) != run_id_for(job, at + timedelta(microseconds=1))
    assert run_id_for(job, at) != run_id_for(uuid.uuid4(), at)
    with pytest.raises(ValueError):
        run_id_for(job, datetime(2026, 1, 1))  # noqa: DTZ001 — naive on purpose
    rid = run_id_for(job, at)
    assert idempotency_key(rid) == idempotency_key(rid) == f"run:{rid}"


def test_run_ids_are_the_uuid5_of_the_occurrence_key_every_release_derived() -> None:
    """The fast derivation gives exactly the id `uuid.uuid5` gave: runs created by an earlier
    release keep their ids (one run per occurrence across an upgrade)."""
    rng = random.Random(44)
    for _ in range(2000):
        job = uuid.UUID(int=rng.getrandbits(128))
        at = datetime(2001, 1, 1, tzinfo=UTC) + timedelta(microseconds=rng.getrandbits(50))
        expected = uuid.uuid5(uuid.UUID("6f1b7e52-2b0c-4c59-9d7e-0a1e5c3f7a11"),
                              f"{job}/{at.isoformat(timespec='microseconds')}")
        made = run_id_for(job, at.astimezone(timezone(timedelta(hours=-5))))
        assert made == expected and str(made) == str(expected)
        assert made.version == 5 and made.variant == uuid.RFC_4122
        assert hash(made) == hash(expected) and made.bytes == expected.bytes


def test_new_ids_are_uuidv7_ordered_by_the_millisecond_they_were_made() -> None:
    before = time.time_ns() // 1_000_000
    first = [new_id() for _ in range(1000)]
    time.sleep(0.002)
    later = new_id()
    after = time.time_ns() // 1_000_000
    assert {i.version for i in first} == {7} and {i.variant for i in first} == {uuid.RFC_4122}
    assert len(set(first)) == 1000  # the random bits differ within one millisecond
    assert all(before <= i.int >> 80 <= after for i in [*first, later])  # Unix milliseconds
    assert later > max(first)  # a later millisecond sorts after: index inserts go rightmost


def test_every_event_round_trips_through_the_codec() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    samples = [
        ev.TenantCreated(name="acme"), ev.ApiKeyIssued(key_hash="ab", role="tenant"),
        ev.ApiKeyIssued(key_hash="cd", role="worker", key_id=uuid.uuid4(), name="fleet-1",
                        pools=["default"], rotated_from=uuid.uuid4()),
        ev.ApiKeyRevoked(key_id=uuid.uuid4(), effective_at=now, reason="rotated"),
        ev.LimitSet(scope="tenant", name="", max_concurrency=5, rate_per_second=2.5, weight=2.0),
        ev.RetentionSet(keep_seconds=3600, archive=False, by="admin", reason="tests"),
        ev.PoolPaused(pool="default", scope_tenant_id=None, reason="db maintenance"),
        ev.PoolResumed(pool="default", scope_tenant_id=uuid.uuid4()),
        ev.JobCreated(name="n", task="t", schedule={"at": now.isoformat()},
                      payload_ref=uuid.uuid4(), pool="default", priority="default",
                      next_run_at=now),
        ev.OccurrenceFired(scheduled_for=now, run_id=uuid.uuid4(), next_run_at=None),
        ev.JobDeleted(),
        ev.OccurrencesSkipped(first=now, last=now, slots=1, reason="calendar", next_run_at=now,
                              next_slot=now),
        ev.OccurrenceMissed(scheduled_for=now, detected_by="reconciler", repair="run"),
        ev.LedgerSlotMissing(scheduled_for=now),
        ev.LedgerSlotResolved(scheduled_for=now, outcome="in_progress", run_id=uuid.uuid4()),
        ev.LedgerDisagreement(scheduled_for=now, expected_by="scheduler"),
        ev.LedgerScheduleUnreadable(error="unknown field 'every2'"),
        ev.CompletionOverdue(kind="complete_within", deadline=now, run_id=uuid.uuid4(),
                             scheduled_for=now, state="retry_scheduled"),
        ev.JobPaused(reason="r"), ev.JobResumed(misfire="skip"),
        ev.BackfillRequested(start=now, end=now, runs_created=1, slots_with_runs=0,
                             slots_skipped=0),
        ev.CalendarDefined(name="holidays", dates=[now.date()]),
        ev.RunScheduled(job_id=uuid.uuid4(), task="t", pool="default", priority="default",
                        payload_ref=uuid.uuid4(), scheduled_for=now),
        ev.RunQueued(pool="default"),
        ev.RunStarted(attempt=1, fencing_token=1, worker_id="w", lease_expires_at=now),
        ev.RunSucceeded(attempt=1, fencing_token=1, output_ref=None),
        ev.RunFailed(attempt=1, fencing_token=1, error_type="x", message="m", retryable=True),
        ev.StaleWriteRejected(operation="complete", presented_token=1, current_token=2,
                              worker_id="w"),
        ev.AttemptTimedOut(attempt=1, fencing_token=1, timeout_seconds=5, detected_by="w"),
        ev.LeaseExpired(attempt=1, fencing_token=1, worker_id="w", expired_at=now),
        ev.LeaseReleased(attempt=1, fencing_token=1, worker_id="w"),
        ev.RetryScheduled(retry_at=now, reason="retryable", counts=True, failures=1),
        ev.RetryDue(pool="default"), ev.RunRepublished(reason="lost"),
        ev.RunDeadLettered(reason="exhausted", error_type="x", message="m", attempts=3),
        ev.CancelRequested(by="t"), ev.RunCancelled(by="t", reason="requested"),
        ev.QueueWaitExpired(deadline=now),
        ev.DeadLetterTriaged(state="acknowledged", comment=None, by="t"),
        ev.DeadLetterReplayed(new_run_id=uuid.uuid4(), request_key="k", payload_changed=False,
                              by="t"),
        ev.StepCompleted(seq=0, name="a", attempt=1, fencing_token=1, output={"n": 1}),
        ev.StepFailed(seq=1, name="b", attempt=1, fencing_token=1, error_type="x", message="m"),
        ev.AttributesUpserted(seq=2, name="attributes:upsert", attempt=1, fencing_token=1,
                              attributes={"customer": "acme", "amount": 3}),
        ev.JobUpdated(definition_version=2, changed=["schedule", "pool"],
                      schedule={"cron": "0 * * * *", "timezone": "UTC"},
                      payload_ref=uuid.uuid4(), pool="p", priority="normal", next_run_at=now,
                      next_slot=now, retry={"max_attempts": 2}, timeout_seconds=5.0),
        ev.RunAmended(job_id=uuid.uuid4(), definition_version=2, payload_ref=uuid.uuid4(),
                      pool="p", priority="normal", timeout_seconds=5.0),
        ev.RunSuspended(attempt=1, fencing_token=1, seq=2, name="child:t", reason="child",
                        child_run_id=uuid.uuid4()),
        ev.RunWoken(cause="child"),
        ev.TimerFired(seq=2, name="sleep", due_at=now),
        ev.SignalReceived(signal_id=uuid.uuid4(), name="go", payload=[1]),
        ev.SignalDelivered(seq=3, name="signal:go", signal_id=uuid.uuid4()),
        ev.SignalTimedOut(seq=3, name="signal:go", deadline=now),
        ev.ChildStarted(seq=4, name="child:t", child_run_id=uuid.uuid4(), task="t",
                        awaited=True, attempt=1),
        ev.ChildFinished(seq=4, name="child:t", child_run_id=uuid.uuid4(), state="succeeded",
                         output="ok"),
        ev.ParentNotified(parent_run_id=uuid.uuid4(), woke=True),
        ev.FanOutStarted(seq=2, name="fan_out:t", task="t", total=10, max_concurrency=3,
                         admitted=3, on_failure="complete", on_complete="done", pool="default",
                         priority="normal", retry={"max_attempts": 2}, timeout_seconds=5.0,
                         attempt=1),
        ev.FanOutProgressed(seq=2, succeeded=1, failed=1, admitted=5,
                            failures=[{"index": 1, "run_id": str(uuid.uuid4()),
                                       "state": "dead_lettered", "error_type": "boom",
                                       "message": "no"}]),
        ev.FanOutCompleted(seq=2, name="fan_out:t", outcome="succeeded", total=10,
                           succeeded=9, failed=1, completion_run_id=uuid.uuid4()),
        ev.RunPaused(by="ops", reason="incident", frozen_wake_in=12.5),
        ev.RunResumed(by="ops", wake_at=now),
        ev.RunStuck(reason="no_worker", detail="no worker serves billing v3", since=now),
        ev.StepRetried(seq=2, name="pay", set_aside=1, by="ops", reason="card fixed"),
        ev.StepSkipped(seq=2, name="pay", set_aside=3, by="ops", reason="paid by hand",
                       output={"paid": True}),
        ev.RunRestarted(from_seq=0, set_aside=4, by="ops", reason="bad data"),
        ev.RunReopened(cause="restarted", by="ops", reason="bad data"),
        ev.RunMarkedSucceeded(output_ref=uuid.uuid4(), by="ops", reason="done by hand"),
        ev.RunMarkedFailed(error_type="operator_failed", message="m", by="ops",
                           reason="obsolete"),
        ev.DagDefined(name="etl", version=1, version_hash="ab" * 32,
                      definition={"nodes": [{"key": "a", "task": "t"}]}),
        ev.DagRunStarted(dag_id=uuid.uuid4(), dag_version=1, nodes=["a", "b"], due_at=now),
        ev.DagNodeReady(key="a", run_id=uuid.uuid4(), generation=1, parents=[uuid.uuid4()]),
        ev.DagNodeFinished(key="a", run_id=uuid.uuid4(), state="succeeded", started_at=now,
                           finished_at=now, attempts=2, first_started_at=now),
        ev.DagNodeSkipped(key="b", state="upstream_failed", cause="a failed"),
        ev.DagRunCancelled(by="ops", reason="not today"),
        ev.DagRunRetriedFromNode(key="a", reset=["a", "b"], by="ops", reason="fixed"),
        ev.DagRunFinished(outcome="succeeded", counts={"succeeded": 2}),
        ev.RunHeld(reason="legal hold", by="ops"), ev.RunReleased(by="ops", reason="done"),
    ]
    assert {type(s) for s in samples} == set(ev.CATALOGUE)
    every: set[type[ev.Event]] = set()
    todo: list[type[ev.Event]] = [ev.Event]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            every.add(sub)
    # no event left out of the catalogue (or the decoder); UnknownEvent holds the others
    assert every - {ev.UnknownEvent} == set(ev.CATALOGUE)
    for sample in samples:
        assert ev.decode_event(ev.encode_event(sample)) == sample
        assert json.loads(ev.encode_event(sample))["type"] == ev.event_type(sample)


def test_a_dag_node_finished_event_written_before_its_times_existed_still_decodes() -> None:
    run_id = uuid.uuid4()
    old = json.dumps({"type": "DagNodeFinished", "key": "a", "run_id": str(run_id),
                      "state": "failed"})
    assert ev.decode_event(old) == ev.DagNodeFinished(key="a", run_id=run_id, state="failed",
                                                      started_at=None, finished_at=None,
                                                      attempts=None, first_started_at=None)


def test_committed_event_schema_is_current() -> None:
    committed = json.loads((ROOT / "schemas" / "events" / "catalogue.json").read_text())
    assert committed == json.loads(json.dumps(ev.json_schema())), \
        "schemas/events/catalogue.json is stale: run `ostinato schemas`"


def test_named_sql_files_load_and_reject_duplicates() -> None:
    for package, filename in REGISTRY:
        assert load(package, filename)
    with pytest.raises(ValueError, match="defined twice"):
        parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


def test_settings_from_environment_and_clear_errors() -> None:
    s = load_settings({"OSTINATO_API_PORT": "9000", "OSTINATO_POOLS": "default, long",
                       "HOME": "/root"})
    assert s.api_port == 9000
    assert s.pool_names == ("default", "long")
    assert s.topics.ready("long").endswith("ostinato.runs.ready.long")
    with pytest.raises(SystemExit, match="OSTINATO_API_PORT"):
        load_settings({"OSTINATO_API_PORT": "eighty"})
    with pytest.raises(SystemExit, match="OSTINATO_POOLS"):
        load_settings({"OSTINATO_POOLS": "Bad Pool"})


def test_new_ids_differ_across_threads_and_in_a_forked_child() -> None:
    # The random bytes are read from the OS in blocks: no two threads, and no child forked
    # with a copy of the parent's block, may hand out the same bytes.
    made: list[uuid.UUID] = []

    def make() -> None:
        made.extend(new_id() for _ in range(2000))

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 8000
    assert all(uuid.UUID(str(i)) == i and hash(uuid.UUID(str(i))) == hash(i) for i in made[:50])
    new_id()  # this thread's block is read and partly used when the child is forked
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child writes the ids it makes, then leaves at once
        os.write(write, b"".join(new_id().bytes for _ in range(100)))
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    data = os.read(read, 1600)
    os.close(read)
    random_bits = (1 << 80) - 1  # below the milliseconds: version, variant, random
    theirs = {uuid.UUID(bytes=data[i:i + 16]).int & random_bits for i in range(0, len(data), 16)}
    ours = {new_id().int & random_bits for _ in range(100)}
    assert len(theirs) == 100 and not theirs & ours
