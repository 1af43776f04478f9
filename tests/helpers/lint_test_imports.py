"""Tests lean on helpers, not on each other: no module under tests/ imports a test module
(`test_*`) or a conftest. What tests share lives in tests/helpers/; fixtures come from a
conftest through pytest, never by import. Run by `make lint` and by
tests/unit/test_test_imports.py; `python tests/helpers/lint_test_imports.py` prints each
offending import as path:line and exits 1."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _forbidden(module: str) -> bool:
    """A test module or a conftest of the tests package."""
    parts = module.split(".")
    return parts[0] == "tests" and (parts[-1].startswith("test_") or parts[-1] == "conftest")


def _module_of(path: Path, root: Path) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(tree: ast.AST, package: list[str]) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of every import in `tree`, a name imported from a package
    counting as its module (`from tests.e2e import test_ui`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def problems(root: Path = ROOT) -> list[str]:
    """Every import under root/tests of a test module or a conftest, as 'path:line: module'."""
    found = []
    for path in sorted((root / "tests").rglob("*.py")):
        module = _module_of(path, root)
        package = module if path.name == "__init__.py" else module[:-1]
        tree = ast.parse(path.read_text(), str(path))
        for line, imported in _imported(tree, package):
            if _forbidden(imported):
                found.append(f"{path.relative_to(root)}:{line}: imports {imported} "
                             "(move what it shares to tests/helpers/, fixtures to a conftest)")
    return found


def main() -> int:
    found = problems()
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
