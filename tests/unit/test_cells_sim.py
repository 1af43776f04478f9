"""The cell simulation's pure parts (bench/cells_sim.py, docs/SCALING.md): tenant rates,
capacities and utilisation, placement, Erlang C, and the event-by-event queue against it. No
servers; seeded, so every figure is the same on every run."""

from __future__ import annotations

import math
import random

import pytest

from bench.cells_sim import (
    CellShape,
    Costs,
    capacities,
    cell_budget,
    erlang_c_wait_ms,
    first_to_break,
    hottest_partition_rate,
    partition_of,
    place,
    simulate_cell,
    utilisation,
    zipf_rates,
)


def test_zipf_rates_sum_to_the_total_and_fall_as_one_over_k_to_the_skew() -> None:
    rates = zipf_rates(1000, 200_000.0, 1.0)
    assert sum(rates) == pytest.approx(200_000.0)
    harmonic = sum(1 / k for k in range(1, 1001))
    assert rates[0] == pytest.approx(200_000.0 / harmonic)
    assert rates[0] / rates[9] == pytest.approx(10.0)  # 10**1
    assert zipf_rates(4, 8.0, 0.0) == [2.0, 2.0, 2.0, 2.0]  # no skew: equal shares


def test_capacities_divide_the_resources_by_the_costs_a_run() -> None:
    costs = Costs(pg_cpu_ms=0.25, wal_kb=10.0, dispatch_cpu_ms=0.1, dispatch_sql_ms=0.15,
                  wakeups_per_run=0.05, wakeup_client_ms=0.5, scheduler_cpu_ms=0.2)
    caps = capacities(costs, CellShape(pg_cores=4, wal_mb_s=100.0, lanes=2, shards=16))
    assert caps["pg_cpu"] == pytest.approx(16_000.0)  # 4 cores / 0.25 ms
    assert caps["wal"] == pytest.approx(10_240.0)  # 100 MB/s / 10 KB
    assert caps["dispatcher"] == pytest.approx(8_000.0)  # 2 lanes / 0.25 ms, serial in a lane
    assert caps["partition"] == pytest.approx(40_000.0)  # 1 / (0.05 x 0.5 ms)
    assert caps["scheduler"] == pytest.approx(80_000.0)  # 16 shards / 0.2 ms
    util = utilisation(8_000.0, 4_000.0, caps)
    assert util["pg_cpu"] == pytest.approx(0.5)
    assert util["dispatcher"] == pytest.approx(1.0)
    assert util["partition"] == pytest.approx(0.1)  # the partition's own rate, not the cell's
    assert first_to_break(util) == ("dispatcher", pytest.approx(1.0))
    assert first_to_break({"wal": 0.25, "pg_cpu": 0.2}) == ("wal", pytest.approx(4.0))
    # the budget is a share of the binding resource, a partition (one tenant's limit) aside
    assert cell_budget(caps, 0.5) == pytest.approx(4_000.0)
    assert cell_budget({**caps, "partition": 1.0}, 0.5) == pytest.approx(4_000.0)


def test_placement_is_first_fit_decreasing_under_the_budget() -> None:
    rates = [3.0, 6.0, 5.0, 2.0, 4.0]
    p = place(rates, 10.0)
    # largest first: 6 (cell 0), 5 (cell 1), 4 -> cell 0 (10), 3 -> cell 1 (8), 2 -> cell 1 (10)
    assert p.cells == [[1, 4], [2, 0, 3]]
    assert p.load == [10.0, 10.0]
    assert p.oversize == []
    assert sorted(t for cell in p.cells for t in cell) == list(range(len(rates)))


def test_a_tenant_above_the_budget_gets_a_cell_of_its_own_and_is_listed() -> None:
    p = place([25.0, 1.0, 1.0], 10.0)
    assert p.cells[0] == [0] and p.oversize == [0]
    assert p.cells[1:] == [[1, 2]]  # nobody joins the oversize tenant's cell


def test_erlang_c_matches_the_single_and_two_server_closed_forms() -> None:
    # M/M/1: Wq = rho / (mu - lambda); lambda 500/s, service 1 ms (mu 1000/s): 1 ms
    assert erlang_c_wait_ms(500.0, 1.0, 1) == pytest.approx(1.0)
    # M/M/2: Wq = rho**2 / (mu (1 - rho**2)) with rho = lambda / (2 mu); rho 0.5: 1/3 ms
    assert erlang_c_wait_ms(1000.0, 1.0, 2) == pytest.approx(1 / 3)
    assert erlang_c_wait_ms(2000.0, 1.0, 2) == math.inf


def test_the_simulated_primary_queues_as_erlang_c_predicts() -> None:
    """An M/M/1 primary at rho 0.8: the simulation's mean wait is Erlang C's 4 ms (within
    the noise of 16,000 seeded arrivals), and its busy share the offered load."""
    costs = Costs(pg_cpu_ms=1.0, dispatch_cpu_ms=0.05, dispatch_sql_ms=0.05)
    run = simulate_cell({0: 800.0}, costs, CellShape(pg_cores=1), 20.0, random.Random(7))
    mean = sum(run.pg_waits) / len(run.pg_waits)
    assert erlang_c_wait_ms(800.0, 1.0, 1) == pytest.approx(4.0)
    assert mean == pytest.approx(4.0, rel=0.2)
    assert run.busy["pg_cpu"] == pytest.approx(0.8, rel=0.05)


def test_an_overloaded_dispatcher_leaves_a_growing_queue_and_a_loaded_one_none() -> None:
    costs = Costs(dispatch_cpu_ms=0.5, dispatch_sql_ms=0.5, dispatch_round_ms=1.0)  # 1,000/s
    over = simulate_cell({0: 1_500.0}, costs, CellShape(), 2.0, random.Random(3))
    assert over.busy["dispatcher"] == pytest.approx(1.0, abs=0.01)
    assert over.backlog > 500  # ~1,000 more arrived in 2 s than a lane could take
    under = simulate_cell({0: 500.0}, costs, CellShape(), 2.0, random.Random(3))
    assert under.backlog < costs.dispatch_batch
    # two lanes serve what one could not
    two = simulate_cell({0: 1_500.0}, costs, CellShape(lanes=2), 2.0, random.Random(3))
    assert two.backlog < costs.dispatch_batch


def test_a_tenant_keeps_one_partition_so_the_hottest_partition_carries_it_whole() -> None:
    assert partition_of(42, 12) == partition_of(42, 12)
    rates = {t: 1.0 for t in range(100)}
    rates[7] = 500.0
    assert hottest_partition_rate(rates, 12) >= 500.0
    assert hottest_partition_rate({1: 3.0}, 12) == 3.0
