"""The workflow benchmark's peers (bench/workflows.py, bench/peers/temporal_workflow.py): the
ratios to Ostinato's figures, the printed rows, and where the Temporal dev server's binary is
looked for. No servers, no timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.peers import temporal_workflow
from bench.workflows import ratios, report

OURS = {"workflows_per_s": 100.0, "steps_per_s": 1000.0, "cpu_ms_per_workflow": 20.0}


def test_ratios_favour_ostinato_above_one_for_speed_and_for_cpu() -> None:
    peer = {"workflows_per_s": 10.0, "steps_per_s": 100.0, "cpu_ms_per_workflow": 140.0}
    assert ratios(OURS, peer) == {"ratio_workflows_per_s": 10.0, "ratio_steps_per_s": 10.0,
                                  "ratio_cpu_per_workflow": 7.0}


def test_a_cpu_figure_missing_on_either_side_leaves_its_ratio_out() -> None:
    peer = {"workflows_per_s": 10.0, "steps_per_s": 100.0}
    assert ratios(OURS, peer)["ratio_cpu_per_workflow"] is None
    assert ratios({**OURS, "cpu_ms_per_workflow": None},
                  {**peer, "cpu_ms_per_workflow": 5.0})["ratio_cpu_per_workflow"] is None


def test_the_table_says_why_temporal_did_not_run() -> None:
    text = report({"peers": {"temporal": {"not_run": "`make bench-infra` builds it"}}})
    assert "Temporal" in text and "not run" in text and "`make bench-infra` builds it" in text


def test_the_table_shows_each_temporal_mode_and_its_ratios() -> None:
    figures = {"workflows_per_s": 10.9, "steps_per_s": 109.0, "cpu_ms_per_workflow": 141.0,
               "max_inflight": 64, "temporalio": "1.35.0", "server": "temporal-1.5.1"}
    local = {**figures, "workflows_per_s": 27.2, "cpu_ms_per_workflow": 49.0}
    result = {"steps": {**OURS},
              "peers": {"temporal": {"activities": {**figures, **ratios(OURS, figures)},
                                     "local_activities": {**local, **ratios(OURS, local)}}}}
    lines = report(result).splitlines()
    row = next(line for line in lines
               if line.startswith("ratio Temporal (local activities)/Ostinato, CPU"))
    assert "2.45" in row.split()  # 49.0 / 20.0
    assert any(line.startswith("Temporal (activities): workflows/s") and "10.9" in line
               for line in lines)


def test_the_server_binary_is_the_cached_build_of_the_scripts_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSTINATO_CACHE", str(tmp_path))
    assert temporal_workflow.server_binary() is None
    version = next(line.split("=", 1)[1].split()[0]
                   for line in temporal_workflow.TEMPORAL_SH.read_text().splitlines()
                   if line.startswith("TEMPORAL_VERSION="))
    binary = tmp_path / "bin" / f"temporal-{version}"
    binary.parent.mkdir()
    binary.write_text("")
    assert temporal_workflow.server_binary() == binary
