"""reconciler: what should have happened and has not. `checks/` holds one module per check:
expired leases (`leases`), unreported timeouts (`timeouts`), queue-wait deadlines
(`queue_waits`), overdue jobs (`overdue`), silent gaps in recurring schedules (`gaps`), outbox
lag and stuck runs (`pipeline`), the retention of outputs and of the start-lag histogram
(`retention`); `loop` makes each one a duty."""
