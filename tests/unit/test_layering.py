"""The layering of DESIGN.md holds: the import-linter contracts in pyproject.toml are kept (the
domain imports nothing else of ours, time and policy only the domain, the SDK no database, bus,
event-log or service code, services never import each other, libraries never import services,
no import cycles). A broken contract is a red build; `make lint` prints the same report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept() -> None:
    linter = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(linter), "--no-cache", "--no-logo"], cwd=ROOT,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ", 0 broken." in result.stdout, result.stdout
