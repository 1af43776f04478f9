"""Back to back: one scenario run alternately on an earlier commit and on this checkout, round
after round, so that both sides meet the same drift of a shared machine; prints each side's
figures per repetition, their medians and the ratio after/before.

    .venv/bin/python -m bench.ab --before 1ac0a62 --scenario burst [--rounds 2] \\
        [--keys all_started_s,cpu_per_run_ms] [-- --quick --repeat 2]

The earlier commit is checked out as a detached git worktree in .cache/ab/<commit> (kept for the
next comparison) and given this checkout's bench/ directory, so both sides are measured by the
same harness; its services, SDK and libraries are its own (PYTHONPATH names only its tree). The
figures are each repetition's `--keys` (dotted paths into `runs[i]` of bench/results/
<scenario>.json; default: the scenario's headline and its CPU a run). Single runs of the
end-to-end scenarios spread by 10-20 % here: compare medians over several rounds, and prefer a
figure the change acts on directly (a statement's time in `pg_stat_statements`) where one exists.
Writes bench/results/ab-<scenario>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.common import ROOT, log, table, write_result

SCENARIO = "ab"
DEFAULT_KEYS = {
    "burst": ("all_started_s", "cpu_per_run_ms"),
    "throughput": ("completion_rate_per_s", "cpu_per_run_ms"),
    "start_lag": ("start_lag_ms.p50", "start_lag_ms.p99"),
}


def figures(result: Mapping[str, Any], keys: Sequence[str]) -> dict[str, list[float]]:
    """Each key's value in every repetition of one scenario result (missing ones left out); a
    result without repetitions (`idle_cost`) is one."""
    out: dict[str, list[float]] = {k: [] for k in keys}
    for run in result["runs"] if "runs" in result else [result]:
        for key in keys:
            value: Any = run
            for part in key.split("."):  # a number indexes a list: ostinato.steps.0.cpu...
                if isinstance(value, list) and part.isdigit():
                    value = value[int(part)] if int(part) < len(value) else None
                else:
                    value = value.get(part) if isinstance(value, Mapping) else None
            if isinstance(value, int | float):
                out[key].append(float(value))
    return out


def compare(before: Mapping[str, list[float]], after: Mapping[str, list[float]]
            ) -> list[dict[str, Any]]:
    """Per key: both sides' values, medians and the ratio of medians (after / before)."""
    rows = []
    for key in before:
        b, a = before[key], after.get(key, [])
        # the median of an even count is a mean: rounded, so sums' float noise is not printed
        mb = round(statistics.median(b), 6) if b else None
        ma = round(statistics.median(a), 6) if a else None
        rows.append({"key": key, "before": b, "after": a, "before_median": mb,
                     "after_median": ma,
                     "ratio": round(ma / mb, 3) if ma is not None and mb else None})
    return rows


def worktree(commit: str) -> Path:
    """The earlier commit's tree, with this checkout's bench/ (created once, then reused)."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout.strip()
    path = ROOT / ".cache" / "ab" / sha[:12]
    if not (path / ".git").exists():
        subprocess.run(["git", "worktree", "add", "--force", "--detach", str(path), sha],
                       cwd=ROOT, check=True, capture_output=True)
    shutil.copytree(ROOT / "bench", path / "bench", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("results", "__pycache__"))
    return path


def run_side(tree: Path, scenario: str, extra: Sequence[str]) -> dict[str, Any]:
    """One run of `bench.<scenario>` with `tree`'s code; its result file."""
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'libs'}"}
    subprocess.run([sys.executable, "-m", f"bench.{scenario}", *extra], cwd=tree, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    return json.loads((tree / "bench" / "results" / f"{scenario}.json").read_text())


def main(argv: Sequence[str]) -> dict[str, Any]:
    own, extra = _split(argv)
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument("--scenario", required=True, help="a bench module: burst, throughput…")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keys", default=None, help="comma-separated dotted keys of runs[i]")
    args = parser.parse_args(own)
    keys = args.keys.split(",") if args.keys else list(DEFAULT_KEYS.get(args.scenario, ()))
    if not keys:
        parser.error(f"no default keys for {args.scenario!r}: give --keys")
    trees = {"before": worktree(args.before), "after": ROOT}
    seen: dict[str, dict[str, list[float]]] = {side: {k: [] for k in keys} for side in trees}
    for round_ in range(1, args.rounds + 1):
        for side, tree in trees.items():
            log(SCENARIO, f"round {round_}/{args.rounds}: {args.scenario} on {side} ({tree})")
            for key, values in figures(run_side(tree, args.scenario, extra), keys).items():
                seen[side][key] += values
                log(SCENARIO, f"  {side} {key}: {values}")
    return {"scenario": f"ab-{args.scenario}", "before": args.before, "rounds": args.rounds,
            "arguments": list(extra), "figures": compare(seen["before"], seen["after"])}


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(ours, the scenario's own arguments after `--`)."""
    items = list(argv)
    if "--" in items:
        i = items.index("--")
        return items[:i], items[i + 1:]
    return items, []


def report(r: Mapping[str, Any]) -> str:
    rows = [(f"{f['key']} (before → after, median)",
             f"{f['before_median']} → {f['after_median']}",
             f"ratio {f['ratio']}; {len(f['before'])} + {len(f['after'])} repetitions")
            for f in r["figures"]]
    return table(f"{r['scenario']}: {r['before']} against this checkout, {r['rounds']} rounds",
                 rows)


if __name__ == "__main__":
    result = main(sys.argv[1:])
    write_result(result["scenario"], result)
    print(report(result))
