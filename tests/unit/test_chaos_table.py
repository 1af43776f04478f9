"""bench/chaos.py's closing table (issue 39): a row per fault with lost, duplicated, missed and
the fault's own recovery measure, whichever figure that fault keeps."""

from __future__ import annotations

from bench.chaos import Fault, fault_table, recovery_of


def test_each_fault_recovers_by_its_own_measure_the_slowest_where_several() -> None:
    assert recovery_of(Fault("worker_kill", 0.0, detail={"_recovery": [1.2, 3.4, 2.0]})) == 3.4
    assert recovery_of(Fault("scheduler_kill", 0.0, detail={"failover_s": 4.1})) == 4.1
    assert recovery_of(Fault("worker_sigterm", 0.0, detail={"_queued": [250.0, 900.0]})) == 0.9
    assert recovery_of(Fault("dispatcher_kill", 0.0, detail={"throughput_back_s": 1.5})) == 1.5
    assert recovery_of(Fault("kafka_leader_kill", 0.0,
                             detail={"recovery_s": 5.2, "throughput_back_s": 9.0})) == 5.2
    assert recovery_of(Fault("worker_kill", 0.0, detail={})) is None


def test_the_table_has_a_row_per_fault_and_says_which_were_not_survived() -> None:
    text = fault_table([
        {"fault": "postgres_primary_kill", "lost": 0, "duplicated": 0, "missed": 0,
         "recovery_s": 11.04, "survived": True},
        {"fault": "instance_kill", "lost": 1, "duplicated": 0, "missed": 2,
         "recovery_s": None, "survived": False}])
    head, rule, *rows = text.splitlines()
    assert head.split() == ["fault", "lost", "duplicated", "missed", "recovery", "s",
                            "survived"]
    assert set(rule.replace(" ", "")) == {"-"}
    assert rows[0].split() == ["postgres_primary_kill", "0", "0", "0", "11.04", "yes"]
    assert rows[1].split() == ["instance_kill", "1", "0", "2", "n/a", "NO"]
