"""Ownership leases judged by the database clock: attempt leases with fencing tokens for workers
(`sql/leases.sql`, used by the worker-gateway and the reconciler) and shard leases with epochs for
schedulers (`shard`)."""
