"""What a signal's idempotency key stands for (`runs.signals.same_payload`): a plain decision."""

from __future__ import annotations

from ostinato.runs.signals import same_payload


def test_payloads_are_compared_as_canonical_json() -> None:
    assert same_payload({"a": 1, "b": [1, {"c": 2, "d": 3}]},
                        {"b": [1, {"d": 3, "c": 2}], "a": 1})
    assert same_payload(None, None)
    assert not same_payload({"a": 1}, {"a": 2})
    assert not same_payload([1, 2], [2, 1])  # a list's order is its meaning
    assert not same_payload(None, {})
    assert not same_payload(1, "1")
