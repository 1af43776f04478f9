"""Test helpers shipped with the product, one module per concern:

- `gateway`: an in-process fake of the worker-gateway protocol to run SDK workers against;
- `handlers`: `HandlerEnvironment`, one SDK handler run in-process with a fake context.

The fault lab (a cluster of the five services as processes, faults, load, end-of-run checks) and
the other helpers of the project's own tests live in tests/helpers/ (a source checkout only).

Nothing here imports `services` (an import-linter contract): helpers that drive service code
stay with the tests (tests/integration/helpers.py).
"""
