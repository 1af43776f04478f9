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
