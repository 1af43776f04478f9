"""Ports of a test or benchmark cluster (`tests.helpers.lab.cluster`)."""

from __future__ import annotations

import socket

from tests.helpers.lab.cluster import SERVICES, Cluster, free_ports, instance_alias, service_of


def test_a_clusters_services_get_distinct_ports_that_are_free() -> None:
    # Two services given one port: the second never listened while the first answered its
    # readiness probe, and a suite's API URL reached a worker gateway (404 on /v1/tenants).
    for _ in range(20):
        ports = free_ports(200)
        assert len(set(ports)) == 200
    cluster = Cluster(database_url="", kafka_bootstrap="", topic_prefix="", log_dir=None)  # type: ignore[arg-type]
    assert set(cluster.ports) == set(SERVICES) and len(set(cluster.ports.values())) == 5
    for port in cluster.ports.values():
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # released: a service can bind it


def test_a_cluster_of_two_instances_names_every_one_and_their_balancers() -> None:
    # issue 39: the second instance of each service has its own port from the start, so a
    # balancer in front of the api and of the gateway names it before it joins.
    cluster = Cluster(database_url="", kafka_bootstrap="", topic_prefix="", log_dir=None,  # type: ignore[arg-type]
                      instances=2)
    assert set(cluster.ports) == set(SERVICES) | {instance_alias(s, 2) for s in SERVICES}
    assert set(cluster.front_ports) == {"api", "worker_gateway"}
    every = [*cluster.ports.values(), *cluster.front_ports.values()]
    assert len(set(every)) == 12
    assert cluster.aliases("scheduler") == ["scheduler", "scheduler-2"]
    assert [service_of(a) for a in ("worker_gateway-2", "scheduler-3", "api")] == \
        ["worker_gateway", "scheduler", "api"]
