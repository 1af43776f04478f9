"""The layering of docs/ARCHITECTURE.md holds, and is whole: the import-linter contracts in
pyproject.toml are kept (one layers contract, services at the top and the domain at the ground,
plus the few contracts a layers contract cannot say), every package of libs/ostinato and every
service is placed on a floor of it, and the contracts that name a run of floors name all of it.
So a package added anywhere is refused until it is placed. `make lint` prints the same report."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
IMPORTLINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def _contract(kind: str, name_starts: str = "") -> dict[str, Any]:
    found = [c for c in IMPORTLINTER["contracts"]
             if c["type"] == kind and c["name"].startswith(name_starts)]
    assert len(found) == 1, f"one {kind} contract named {name_starts!r}..., found {len(found)}"
    return found[0]


def _floors() -> list[set[str]]:
    """The layers contract's floors, top first, as module names ("(x)" is an optional x)."""
    return [{name.strip().strip("()") for name in floor.split("|")}
            for floor in _contract("layers")["layers"]]


def _floor_of(module: str) -> int:
    return next(i for i, floor in enumerate(_floors()) if module in floor)


def _between(top: str, bottom: str) -> set[str]:
    """The modules on the floors under `top`'s and over `bottom`'s."""
    return set().union(*_floors()[_floor_of(top) + 1:_floor_of(bottom)])


def _ours(modules: list[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in ("ostinato", "services")}


def _packages() -> set[str]:
    """Every package and top-level module of libs/ostinato, and every service."""
    found = set()
    for root, name in ((ROOT / "libs" / "ostinato", "ostinato"), (ROOT / "services", "services")):
        for path in root.iterdir():
            if path.is_dir() and (path / "__init__.py").exists():
                found.add(f"{name}.{path.name}")
            elif path.suffix == ".py" and path.name != "__init__.py":
                found.add(f"{name}.{path.stem}")
    return found


def test_every_import_contract_is_kept() -> None:
    linter = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(linter), "--no-cache", "--no-logo"], cwd=ROOT,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ", 0 broken." in result.stdout, result.stdout


def test_every_package_and_service_stands_on_one_floor() -> None:
    placed = [m for floor in _floors() for m in floor]
    assert len(placed) == len(set(placed)), "a module is placed twice"
    assert sorted(_packages() - set(placed)) == [], "place these in the layers contract"


def test_the_cli_reaches_no_server_floor_but_through_the_client() -> None:
    cli = _contract("forbidden", "the CLI's user commands")
    assert _ours(cli["forbidden_modules"]) == _between("ostinato.cli", "ostinato.testing")


def test_the_user_side_is_the_protected_run_of_floors() -> None:
    user_side = _between("ostinato.db", "ostinato.clock")
    assert set(_contract("protected")["protected_modules"]) == user_side
    no_kafka = _contract("forbidden", "the user's side imports no Kafka")
    assert set(no_kafka["source_modules"]) == user_side


def test_every_floor_from_the_wire_down_does_no_io() -> None:
    ground = set().union(*_floors()[_floor_of("ostinato.wire"):])
    no_io = _contract("forbidden", "the pure ground does no I/O")
    assert set(no_io["source_modules"]) == ground
