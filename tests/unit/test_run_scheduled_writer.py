"""`RunScheduled` has one constructor (`ostinato.jobs.materialise.scheduled`): every run, a
job's occurrence, a child, a fan-out's chunk or completion, a DAG node's, is created through
it, so what a new run carries is decided in one place (docs/ARCHITECTURE.md says so)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRITER = ("libs/ostinato/jobs/materialise.py", "scheduled")


def constructions() -> list[tuple[str, str]]:
    """(file, enclosing function) of every call of `RunScheduled(...)` in the shipped code."""
    found = []
    for base in ("libs/ostinato", "services"):
        for path in sorted((ROOT / base).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for fn in ast.walk(tree):
                if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(fn):
                    if isinstance(node, ast.Call) and (
                            (isinstance(node.func, ast.Attribute)
                             and node.func.attr == "RunScheduled")
                            or (isinstance(node.func, ast.Name)
                                and node.func.id == "RunScheduled")):
                        found.append((str(path.relative_to(ROOT)), fn.name))
    return found


def test_only_the_one_constructor_builds_run_scheduled() -> None:
    assert set(constructions()) == {WRITER}


def test_the_scan_sees_a_construction_where_there_is_one() -> None:
    # the scan itself: it finds the constructor's own call (a scan finding nothing proves nothing)
    assert WRITER in constructions()
