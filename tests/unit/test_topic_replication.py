"""Topic replication (issue 39): how many copies of a topic the services ask for, and the
in-sync minimum that makes an acks=all write survive a broker's death."""

import pytest

from ostinato.bus.kafka import topic_configs
from ostinato.runtime.settings import load_settings


def test_three_replicas_or_more_need_two_in_sync_to_acknowledge_a_write() -> None:
    assert topic_configs(3) == {"min.insync.replicas": "2"}
    assert topic_configs(5) == {"min.insync.replicas": "2"}


def test_fewer_replicas_keep_the_brokers_default_so_one_broker_still_takes_writes() -> None:
    assert topic_configs(1) == {}
    assert topic_configs(2) == {}
    with pytest.raises(ValueError):
        topic_configs(0)


def test_the_replication_factor_is_one_unless_set_and_refuses_less_than_one() -> None:
    assert load_settings({}).kafka_replication_factor == 1
    assert load_settings({"OSTINATO_KAFKA_REPLICATION_FACTOR": "3"}).kafka_replication_factor == 3
    with pytest.raises(SystemExit, match="OSTINATO_KAFKA_REPLICATION_FACTOR"):
        load_settings({"OSTINATO_KAFKA_REPLICATION_FACTOR": "0"})

