"""Test helpers shipped with the product, one module per concern:

- `cluster`: the five services as real processes on free ports (e2e tests, benchmarks);
- `lab`, `database`, `processes`, `injection`, `load`, `metrics`, `invariants`: fault scenarios
  (tests/faults, bench/chaos.py) — a cluster with short leases, worker processes, faults, a
  steady load and the end-of-run checks read from the run-event log;
- `gateway`: an in-process fake of the worker-gateway protocol to run SDK workers against;
- `handlers`: `HandlerEnvironment`, one SDK handler run in-process with a fake context;
- `run_stories`: generated run event sequences (hypothesis) for lifecycle property tests;
- `waiting`: `eventually` / `until`, polling for an observable signal instead of sleeping;
- `outbox`: the outbox messages of one topic, as a consumer would receive them.

Nothing here imports `services` (an import-linter contract): helpers that drive service code
stay with the tests (tests/integration/helpers.py).
"""
