"""reconciler: what should have happened and has not. `checks/` holds one module per kind of
check (attempts: expired leases, timeouts, queue waits; occurrences: overdue jobs and silent
gaps; health: outbox lag, stuck runs, output retention); `loop` runs them."""
