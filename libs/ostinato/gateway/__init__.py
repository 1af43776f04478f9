"""The worker-gateway as library code: attempt leases with fencing tokens (`attempts`), the
long-poll wake-ups fed by `runs.ready.<pool>` (`wakeups`), and the HTTP routes (`app`).

Claims read PostgreSQL, not an in-memory buffer: a queued run is claimable whether or not its
Kafka message was seen, so a gateway crash loses nothing. The ready messages wake the long polls
of the tenant they concern (and of shared workers, which serve every tenant), which keeps claim
latency low without polling the database. Workers' presence feeds the worker registry
(`presence`), the capacity fair dispatch shares.
"""
