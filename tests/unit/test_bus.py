"""The producer's partitioner: the Java client's partition for every tenant key, cached."""

import uuid

from aiokafka.partitioner import DefaultPartitioner

from ostinato.bus.kafka import TenantPartitioner
from ostinato.bus.topics import tenant_key


def test_tenant_partitioner_picks_the_default_partitioners_partition_for_every_key() -> None:
    cached = TenantPartitioner(max_keys=50)
    default = DefaultPartitioner()
    keys = [tenant_key(uuid.uuid4()) for _ in range(200)] + [b"", b"a", b"abcde"]
    for count in (1, 3, 12, 64):
        partitions = list(range(count))
        for _ in range(2):  # the second pass answers from the cache (cleared past 50 keys)
            for key in keys:
                assert cached(key, partitions, partitions) == default(key, partitions,
                                                                      partitions)
    assert len(cached._known) <= 50


def test_tenant_partitioner_spreads_unkeyed_messages_over_available_partitions() -> None:
    picked = {TenantPartitioner()(None, [0, 1, 2, 3], [2, 3]) for _ in range(200)}
    assert picked == {2, 3}


def test_a_reopened_run_wakes_the_dispatcher_and_a_run_marked_succeeded_frees_its_slot() -> None:
    from ostinato.bus.topics import Topics
    from ostinato.domain import events as ev

    topics = Topics()
    reopened = ev.RunReopened(cause="step_retried", by="ops", reason="fixed the card API")
    marked = ev.RunMarkedSucceeded(output_ref=None, by="ops", reason="done by hand")
    assert topics.route(reopened) == topics.due
    assert topics.route(marked) == topics.finished


def test_routing_names_catalogued_events_and_leaves_the_rest_in_the_log() -> None:
    from datetime import UTC, datetime

    from ostinato.bus.topics import _ROUTES, Topics
    from ostinato.domain import events as ev

    assert set(_ROUTES) <= set(ev.CATALOGUE)
    topics = Topics(pools=("default", "etl"))
    assert topics.route(ev.RunQueued(pool="etl", reason="dispatched")) == topics.ready("etl")
    started = ev.RunStarted(attempt=1, fencing_token=1, worker_id="w",
                            lease_expires_at=datetime.now(UTC), task_version=None, pinned=False)
    assert topics.route(started) is None  # a start frees no slot and wakes no one


def test_an_append_publishes_one_wake_up_per_topic_and_tenant_standing_for_its_events() -> None:
    import json
    from datetime import UTC, datetime

    from ostinato.bus.codec import decode
    from ostinato.bus.topics import Topics
    from ostinato.domain import events as ev
    from ostinato.eventlog.outbox import messages
    from ostinato.eventlog.records import NewEvent

    topics = Topics()
    a, b = uuid.uuid4(), uuid.uuid4()
    queued = [NewEvent(uuid.uuid4(), 2, tenant, ev.RunQueued(pool="default"), "dispatcher",
                       traceparent=f"00-{i:032x}-{i:016x}-01")
              for i, tenant in enumerate([a, b, a, a, b], start=1)]
    left = NewEvent(uuid.uuid4(), 5, a, ev.StepCompleted(seq=1, name="s", attempt=1,
                                                      fencing_token=1),
                    "worker:w")  # stays in the log
    finished = NewEvent(uuid.uuid4(), 4, b, ev.RunCancelled(by="ops", reason="requested"), "api")
    got = messages(topics, [*queued, left, finished], datetime(2026, 1, 1, tzinfo=UTC))
    sent = [(topic, key, decode(value), json.loads(headers))
            for topic, key, value, headers in zip(*got, strict=True)]
    assert [(t, k, e.tenant_id, e.coalesced) for t, k, e, _ in sent] == [
        (topics.ready("default"), tenant_key(a), a, 3),
        (topics.ready("default"), tenant_key(b), b, 2),
        (topics.finished, tenant_key(b), b, 1)]
    # each stands for its tenant's last event on the topic, with that event's trace context
    assert [e.event_id for _, _, e, _ in sent] == [queued[3].event_id, queued[4].event_id,
                                                  finished.event_id]
    assert sent[0][3]["traceparent"] == queued[3].traceparent
