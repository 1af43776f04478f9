"""The SDK's public surface is pinned: `ostinato.sdk.__all__` must equal the list below, so adding,
removing or renaming a public name is a deliberate edit of this test (and of the SDK's docs)."""

from __future__ import annotations

import importlib
import typing

import pytest

PUBLIC_NAMES = [
    "Cancelled",
    "ChildFailedError",
    "CompensationFailed",
    "FanOutFailedError",
    "GatewayError",
    "Handler",
    "LeaseLost",
    "NonDeterminismError",
    "OstinatoWorkerError",
    "PermanentError",
    "RetryableError",
    "RunContext",
    "SignalTimeout",
    "StateTooLarge",
    "StepFailedError",
    "Task",
    "Throttled",
    "Update",
    "UpdateTimeout",
    "Worker",
    "WorkflowContext",
    "WorkflowTimedOut",
    "apply_once",
    "current",
    "fence",
    "task",
    "workflow",
]
# Type aliases cannot carry a docstring of their own on Python 3.11 (`Handler` is
# `Callable[[Any], Any]`); every other public name must.
TYPE_ALIASES = {"Handler"}


def test_the_public_names_are_the_pinned_ones() -> None:
    sdk = importlib.import_module("ostinato.sdk")
    assert sdk.__all__ == PUBLIC_NAMES, (
        "ostinato.sdk.__all__ changed: if the public surface is meant to change, edit "
        "PUBLIC_NAMES in this test")


def test_the_pinned_list_is_sorted() -> None:
    assert sorted(PUBLIC_NAMES) == PUBLIC_NAMES


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_each_public_name_is_importable_and_documented(name: str) -> None:
    sdk = importlib.import_module("ostinato.sdk")
    assert hasattr(sdk, name), f"`from ostinato.sdk import {name}` fails"
    value = getattr(sdk, name)
    if name in TYPE_ALIASES:
        assert typing.get_origin(value) is not None, f"{name} is no longer a type alias"
        return
    doc = getattr(value, "__doc__", None)
    assert doc and doc.strip(), f"ostinato.sdk.{name} has no docstring"
