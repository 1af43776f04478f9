"""`ostinato.testing` is a small public harness (docs/TESTING.md): what a user needs to test
handlers and workflows, importable from the package itself, and none of the fault lab, which
needs a source checkout and lives in tests/helpers/."""

from __future__ import annotations

import pkgutil

import ostinato.testing as harness
from ostinato.sdk.errors import Suspended
from ostinato.testing import gateway, handlers


def test_the_harness_exports_the_handler_environment_and_the_fake_gateway() -> None:
    assert sorted(harness.__all__) == ["FakeGateway", "HandlerEnvironment", "MemoryJournal",
                                       "Suspended", "running"]
    assert (harness.HandlerEnvironment, harness.MemoryJournal) == (
        handlers.HandlerEnvironment, handlers.MemoryJournal)
    assert (harness.FakeGateway, harness.running) == (gateway.FakeGateway, gateway.running)
    assert harness.Suspended is Suspended  # what `run` raises when a workflow waits


def test_the_fault_lab_is_no_part_of_the_shipped_package() -> None:
    assert {m.name for m in pkgutil.iter_modules(harness.__path__)} == {"gateway", "handlers"}
