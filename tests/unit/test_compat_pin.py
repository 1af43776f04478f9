"""The previous release is pinned in one place (tests/compat/PREVIOUS) as a full hash, and a
clone without it fails the mixed-version tests with what to do: never a silent skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.compat import previous_commit, require_commit


def test_the_pin_is_one_full_hash_of_this_repository() -> None:
    commit = previous_commit()
    assert len(commit) == 40
    require_commit(commit)


@pytest.mark.parametrize("text", ["8193fb1\n", "# only a comment\n", "a" * 40 + "\n" + "b" * 40])
def test_a_pin_that_is_not_one_full_hash_is_refused(tmp_path: Path, text: str) -> None:
    pin = tmp_path / "PREVIOUS"
    pin.write_text(text)
    with pytest.raises(ValueError, match="full 40-hex commit hash"):
        previous_commit(pin)


def test_a_commit_missing_from_the_clone_fails_saying_what_to_do() -> None:
    with pytest.raises(RuntimeError, match=r"not in this clone.*unshallow"):
        require_commit("0" * 40)
