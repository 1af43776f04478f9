"""The benchmarks' shared arithmetic (bench/common.py): percentiles, distributions, medians over
repetitions and the profile summary. No servers, no timing."""

from __future__ import annotations

import os

from bench.ab import compare, figures
from bench.common import (
    _proc_stat,
    cpu_per_run_ms,
    cpu_spent,
    distribution,
    median_of,
    percentile,
    rows_line,
    rows_per_run,
    table,
    top_frames,
)
from bench.peers.harness import peer_cpu


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([7.0], 99) == 7.0


def test_distribution_of_nothing_and_of_values() -> None:
    assert distribution([])["p99"] is None
    d = distribution([3.0, 1.0, 2.0, 10.0])
    assert (d["n"], d["min"], d["p50"], d["max"]) == (4, 1.0, 2.0, 10.0)
    assert d["mean"] == 4.0


def test_median_over_repetitions_skips_missing_figures() -> None:
    runs = [{"lag": {"p99": 5}}, {"lag": {"p99": 1}}, {"lag": {"p99": 3}}, {"lag": None}]
    assert median_of(runs, "lag", "p99") == 3
    assert median_of(runs, "absent") is None


def test_top_frames_counts_own_and_total_samples() -> None:
    folded = "main;loop;parse 6\nmain;loop;write 3\nmain;idle 1\n"
    top = top_frames(folded)
    assert top[0] == {"frame": "parse", "own_pct": 60.0, "total_pct": 60.0}
    loop = next(t for t in top_frames(folded + "main;loop 1\n") if t["frame"] == "loop")
    assert loop["total_pct"] == round(100 * 10 / 11, 1)


def test_table_shows_missing_values_as_dashes() -> None:
    text = table("T", [("a", None, ""), ("b", 1.5, "target ≥ 1")])
    assert "-" in text.splitlines()[2] and "target ≥ 1" in text.splitlines()[3]


def test_top_frames_charged_to_the_innermost_matching_frame() -> None:
    folded = "main;ostinato/a;lib/x 3\nmain;ostinato/b 1\nmain;lib/y 1\n"
    top = {t["frame"]: t["own_pct"] for t in top_frames(folded, within=("ostinato/",))}
    assert top == {"ostinato/a": 60.0, "ostinato/b": 20.0, "(outside)": 20.0}


def test_a_peers_cpu_is_its_own_processes_and_not_kafka() -> None:
    measured = {"worker-0": 0.75, "worker-1": 0.74, "postgresql": 2.05, "redis": 0.3,
                "bench (client + SDK worker)": 0.02, "kafka": 0.28, "other": 0.4}
    own = peer_cpu(measured)
    assert set(own) == {"worker-0", "worker-1", "postgresql", "redis",
                        "bench (client + SDK worker)"}
    assert cpu_per_run_ms(own, 20_000) == round((0.75 + 0.74 + 2.05 + 0.3 + 0.02) / 20, 3)
    assert cpu_per_run_ms(own, 0) is None


def test_back_to_back_figures_are_read_per_repetition_and_compared_by_median() -> None:
    before = figures({"runs": [{"cpu_per_run_ms": 0.75, "start_lag_ms": {"p99": 7000}},
                               {"cpu_per_run_ms": 0.70, "start_lag_ms": {"p99": 6000}},
                               {"cpu_per_run_ms": 0.80}]},
                     ["cpu_per_run_ms", "start_lag_ms.p99"])
    assert before == {"cpu_per_run_ms": [0.75, 0.70, 0.80], "start_lag_ms.p99": [7000.0, 6000.0]}
    assert figures({"with": {"postgresql_cpu_s_per_s": 0.08}}, ["with.postgresql_cpu_s_per_s"]
                   ) == {"with.postgresql_cpu_s_per_s": [0.08]}  # idle_cost: no repetitions
    assert figures({"ostinato": {"steps": [{"cpu": 1.1}, {"cpu": 0.9}]}},
                   ["ostinato.steps.1.cpu", "ostinato.steps.2.cpu"]
                   ) == {"ostinato.steps.1.cpu": [0.9], "ostinato.steps.2.cpu": []}
    after = figures({"runs": [{"cpu_per_run_ms": 0.60}, {"cpu_per_run_ms": 0.66}]},
                    ["cpu_per_run_ms", "start_lag_ms.p99"])
    rows = {r["key"]: r for r in compare(before, after)}
    assert rows["cpu_per_run_ms"]["before_median"] == 0.75
    assert rows["cpu_per_run_ms"]["after_median"] == 0.63
    assert rows["cpu_per_run_ms"]["ratio"] == round(0.63 / 0.75, 3)
    assert rows["start_lag_ms.p99"]["after_median"] is None
    assert rows["start_lag_ms.p99"]["ratio"] is None
    # an even count's median is a mean, printed without the sum's float noise
    assert compare({"k": [0.1, 0.2]}, {"k": [0.2]})[0]["before_median"] == 0.15


def test_cpu_spent_is_each_groups_difference_without_the_rest_of_the_machine() -> None:
    before = {"postgresql": 10.0, "api": 1.0, "other": 5.0}
    after = {"postgresql": 12.5, "api": 1.25, "scheduler": 0.5, "other": 9.0}
    assert cpu_spent(before, after) == {"postgresql": 2.5, "api": 0.25, "scheduler": 0.5}


async def test_the_sdk_attempt_benchmark_runs_every_attempt_to_its_outcome() -> None:
    from bench.sdk_attempt import TRACEPARENT, once

    for traceparent, capture in ((None, False), (TRACEPARENT, True)):
        # once() raises unless every attempt handed its completion to the reporter
        assert await once(120, traceparent, capture) > 0


def test_the_hot_ceiling_keeps_only_indexes_naming_no_column_the_run_path_writes() -> None:
    from bench.hot_updates import ceiling

    definitions = {
        "runs_pkey": "CREATE UNIQUE INDEX runs_pkey ON public.runs USING btree (id)",
        "runs_ready": "CREATE INDEX runs_ready ON public.runs USING btree "
                      "(tenant_id, pool, queued_at, id) WHERE (state = 'queued'::text)",
        "runs_children": "CREATE INDEX runs_children ON public.runs USING btree "
                         "(parent_run_id, id) WHERE (parent_run_id IS NOT NULL)",
        "runs_job_active": "CREATE INDEX runs_job_active ON public.runs USING btree (job_id) "
                           "WHERE (state <> ALL (ARRAY['succeeded'::text]))",
        "runs_statement": "CREATE INDEX runs_statement ON public.runs USING btree (task)",
    }
    # the index's own name ("runs_statement" contains "state") is not a column it names
    assert sorted(ceiling(definitions)) == ["runs_children", "runs_pkey", "runs_statement"]


def test_a_process_counts_the_cpu_of_the_children_it_waited_for() -> None:
    # An autovacuum worker that exits inside a window: its CPU moves into the postmaster's
    # cutime/cstime, so PostgreSQL's sum over the window does not fall (it did: -0.04 s/s).
    tick = os.sysconf("SC_CLK_TCK")
    line = (f"4242 (postgres) S 1 4242 4242 0 -1 4194560 100 0 0 0 {3 * tick} {tick} "
            f"{5 * tick} {2 * tick} 20 0 1 0 100 0 0")
    assert _proc_stat(line) == ("postgres", 1, 11.0)


def test_rows_a_run_are_the_counter_deltas_of_the_tables_that_changed() -> None:
    before = {"events": (100, 0, 0, 0), "runs": (10, 20, 0, 0), "jobs": (5, 5, 5, 0)}
    after = {"events": (150, 0, 0, 0), "runs": (20, 50, 2, 0), "jobs": (5, 5, 5, 0),
             "outbox": (1, 0, 0, 1)}
    rows = rows_per_run(before, after, 10)
    assert rows["events"] == {"inserted": 5.0, "updated": 0.0, "hot": 0.0, "deleted": 0.0}
    assert rows["runs"] == {"inserted": 1.0, "updated": 3.0, "hot": 0.2, "deleted": 0.0}
    assert "jobs" not in rows  # nothing changed
    assert rows["outbox"]["inserted"] == 0.1  # a table new since `before` counts from zero
    assert rows_per_run(before, after, 0) == {}


def test_rows_line_puts_the_tables_writing_most_first_and_drops_the_negligible() -> None:
    rows = {"runs": {"inserted": 1.0, "updated": 3.0, "hot": 0.0, "deleted": 0.0},
            "events": {"inserted": 5.0, "updated": 0.0, "hot": 0.0, "deleted": 0.0},
            "noise": {"inserted": 0.0, "updated": 0.004, "hot": 0.0, "deleted": 0.0}}
    assert rows_line(rows) == "events 5/0(0)/0; runs 1/3(0)/0"
