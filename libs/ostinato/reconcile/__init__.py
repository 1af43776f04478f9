"""The reconciler's checks: what should have happened and has not.

`health`: outbox lag and runs stuck in a waiting state (gauges and alerts).
`occurrences`: overdue jobs and silent gaps in recurring schedules (events, alerts, repairs).
`loop`: one pass of every check, repeated.
"""
