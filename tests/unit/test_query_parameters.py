"""Which query parameters a route refuses (`runtime.parameters`): a plain decision."""

from __future__ import annotations

from ostinato.runtime.parameters import unknown_parameters


def test_unknown_parameters_are_named_once_in_the_order_sent() -> None:
    declared = frozenset({"state", "limit", "cursor"})
    assert unknown_parameters(["state", "task", "limit", "pool", "task"], declared) == [
        "task", "pool"]
    assert unknown_parameters(["state", "limit"], declared) == []
    assert unknown_parameters([], frozenset()) == []
    assert unknown_parameters(["State"], declared) == ["State"]  # names are case-sensitive
