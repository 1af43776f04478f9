"""worker-gateway: attempt leases with fencing tokens (`attempts`, outcomes in `reports`), the
long-poll wake-ups fed by `runs.ready.<pool>` (`wakeups`), workers' presence (`presence`) and
the HTTP routes (`app`).

Claims read PostgreSQL, not an in-memory buffer: a queued run is claimable whether or not its
Kafka message was seen, so a gateway crash loses nothing. The ready messages wake the long polls
of the tenant they concern (and of shared workers, which serve every tenant), which keeps claim
latency low without polling the database.
"""
