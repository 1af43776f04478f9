"""Ownership leases judged by the database clock: attempt leases with fencing tokens for workers
(here), shard leases with epochs for schedulers (the fault-tolerance issue)."""
