"""The test harness shipped with the SDK, for users' tests of their handlers and workflows
(docs/TESTING.md); no server is needed:

- `HandlerEnvironment`: one handler or workflow run in-process, as a worker would, with a real
  `RunContext`; a workflow's steps kept in a `MemoryJournal` judged by the gateway's rules, so
  a test can suspend it (`Suspended`), send it a signal, move its clock and resume it;
- `FakeGateway` and `running`: an in-process fake of the worker-gateway's HTTP protocol and a
  real `Worker` claiming from it.

One module per concern (`handlers`, `gateway`). The fault lab (a cluster of the five services
as processes, faults, load, end-of-run checks) and the other helpers of the project's own tests
live in tests/helpers/ (a source checkout only) and are no part of this surface.

Nothing here imports `services` (an import-linter contract): helpers that drive service code
stay with the tests (tests/helpers/integration.py).
"""

from ostinato.sdk.errors import Suspended
from ostinato.testing.gateway import FakeGateway, running
from ostinato.testing.handlers import HandlerEnvironment, MemoryJournal

__all__ = ["FakeGateway", "HandlerEnvironment", "MemoryJournal", "Suspended", "running"]
