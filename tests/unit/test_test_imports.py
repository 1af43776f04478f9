"""The lint check that keeps tests leaning on helpers (tests/helpers/lint_test_imports.py) holds
for the repository, and catches each way a test could import another test module or a
conftest again."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.lint_test_imports import problems


def test_no_module_under_tests_imports_a_test_module_or_a_conftest() -> None:
    assert problems() == []


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"tests/__init__.py": "", "tests/integration/__init__.py": "",
                       "tests/helpers/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("line", [
    "from .test_workflows import events_of",
    "from tests.integration.test_workflows import events_of",
    "from .conftest import auth",
    "from tests.conftest import KAFKA_BOOTSTRAP",
    "from tests.integration import test_workflows",
    "from .. import conftest",
    "import tests.integration.test_workflows",
    "def f():\n    from .test_workflows import events_of",
])
def test_an_import_of_a_test_module_or_a_conftest_is_refused(tmp_path: Path, line: str) -> None:
    root = tree(tmp_path, {"tests/integration/test_pausing.py": line + "\n"})
    [problem] = problems(root)
    assert problem.startswith("tests/integration/test_pausing.py:")


def test_a_helper_importing_a_test_module_is_refused_and_helpers_are_fine(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "tests/helpers/workflows.py": "from tests.integration.test_sagas import saga\n",
        "tests/integration/test_pausing.py": "from tests.helpers.workflows import drive\n"
                                             "from tests.helpers import workflows\n"
                                             "from . import job_bodies\n"})
    assert [p.split(":")[0] for p in problems(root)] == ["tests/helpers/workflows.py"]
