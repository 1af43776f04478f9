"""The fault lab, from a source checkout only: the five services as real processes on free ports
(`cluster`), a cluster with short leases (`lab`), worker processes (`processes`), faults
(`injection`, `outage`), a steady load (`load`), metrics scrapes (`metrics`) and the end-of-run
checks read from the run-event log (`invariants`, `database`). Used by tests/faults, tests/e2e
and bench/ (bench/chaos.py, bench/failover.py)."""
